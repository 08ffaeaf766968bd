"""`pip install ./sdk-gen/python` works with no network: the build backend is in the tree."""

import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class PackageTest(unittest.TestCase):
    def test_pip_install_offline(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            venv = os.path.join(d, "venv")
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
            py = os.path.join(venv, "bin", "python")
            # --no-index: nothing may come from PyPI (there is none on our machines).
            out = subprocess.run([py, "-m", "pip", "install", "--no-index", "--no-cache-dir", ROOT], capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            probe = (
                "import importlib.metadata as m, os, kiln, kiln.v1\n"
                "print(m.version('kiln-sdk'), os.path.exists(os.path.join(os.path.dirname(kiln.__file__), 'py.typed')), kiln.v1.TrainJob.__name__)\n"
                "print(os.path.dirname(kiln.__file__))"
            )
            out = subprocess.run([py, "-c", probe], capture_output=True, text=True, cwd=d)
            self.assertEqual(out.returncode, 0, out.stderr)
            version, where = out.stdout.splitlines()
            self.assertEqual(version, "0.1.0 True TrainJob")
            self.assertTrue(where.startswith(venv), where)


if __name__ == "__main__":
    unittest.main()
