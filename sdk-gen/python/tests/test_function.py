"""kiln._function: the command that runs a CustomTrainer's function on the nodes, as the Kubeflow SDK
builds it (torchrun, mpirun, python; packages installed first), the functions and func_args it
refuses before submission and why, and the generated script run for real with bash."""

import functools
import json
import os
import shutil
import subprocess
import tempfile
import textwrap
import types
import unittest

from kiln import _function
from kiln._function import check_func_args, check_function, function_program, trainer_command

LIMIT = 3  # a module-level constant a function may not use


def load_module(directory, name, source):
    """A module of source, imported from a file in directory (so that its functions have source)."""
    import importlib.util

    path = os.path.join(directory, name + ".py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def trainer(func, func_args=None, packages_to_install=None, pip_index_urls=None):
    """A CustomTrainer as the function sees it: by attribute."""
    return types.SimpleNamespace(func=func, func_args=func_args, packages_to_install=packages_to_install, pip_index_urls=pip_index_urls)


def record(path, lr, tags, nested=None):
    """Writes its arguments and a few facts of the script it runs in to path."""
    import json
    import os
    import sys

    def twice(x):
        return 2 * x

    class Box:
        kind = "box"

        def size(self):
            return len([i for i in range(3) if i])

    out = {"lr": lr, "tags": tags, "nested": nested, "twice": twice(lr), "box": Box().size(), "file": os.path.basename(__file__)}
    out["text"] = "$HOME `date` \\n \t"  # written as is: no shell expansion in the heredoc
    out["python"] = sys.version_info[0]
    with open(path, "w") as f:
        json.dump(out, f)
    print("recorded", lr)


def plain():
    import math

    print("sqrt", math.sqrt(16), len(str(math.pi)), max(1, 2))
    return plain  # its own name is defined in the script too


def uses_modules():
    return os.getcwd(), json.dumps({})


def uses_constant(n):
    return n < LIMIT


def default_from_module(n=LIMIT):
    return n


def annotated_with_module(x: types.SimpleNamespace) -> int:
    return 1


def annotated_with_builtins(x: int = 3, *rest: str, flag: bool = False, **kw: float) -> dict:
    return {}


def uses_attributes():
    import json

    return json.decoder.JSONDecoder, json.dumps.__name__  # attribute names are not globals


def generator():
    yield 1


async def coroutine():
    return 1


def identity(f):
    return f


@identity
def decorated():
    return 1


def wrapping(f):
    @functools.wraps(f)
    def wrapper(*a, **kw):
        return f(*a, **kw)

    return wrapper


@wrapping
def wrapped():
    return 1


def make_closure():
    secret = 42

    def inner():
        return secret

    return inner


def make_nested():
    def inner(x):
        import math

        return math.floor(x)

    return inner


def sets_global():
    global COUNTER
    COUNTER = 1
    return COUNTER


class Holder:
    def method(self):
        return 1

    @staticmethod
    def static(x):
        return x


class Callable_:
    def __call__(self):
        return 1


class RefusalTest(unittest.TestCase):
    def refused(self, func, *words, func_args=None):
        with self.assertRaises(ValueError) as cm:
            function_program(func, func_args)
        msg = str(cm.exception)
        for w in words:
            self.assertIn(w, msg)
        return msg

    def test_lambda(self):
        self.refused(lambda: 1, "lambda", "def")

    def test_not_a_plain_function(self):
        self.refused(Holder().method, "bound method", "Holder.method", "func_args")
        self.refused(print, "built-in", "print")
        self.refused(len, "built-in")
        self.refused(functools.partial(record, lr=1), "functools.partial", "func_args")
        self.refused(Holder, "a class")
        self.refused(Callable_(), "Callable_ object")
        self.refused("train", "not callable")

    def test_closure(self):
        self.refused(make_closure(), "inner", "variables of the function it is defined in: secret", "func_args")

    def test_nested_function_without_closure_is_dedented(self):
        program = function_program(make_nested(), {"x": 2.5})
        self.assertTrue(program.startswith("def inner(x):\n"), program)
        self.assertTrue(program.endswith("\ninner(**{'x': 2.5})\n"), program)
        compile(program, "train.py", "exec")

    def test_module_globals(self):
        msg = self.refused(uses_modules, "names defined outside it: json, os", "import json; import os", "inside the function")
        self.assertIn("self-contained", msg)
        msg = self.refused(uses_constant, "LIMIT", "func_args", func_args={"n": 1})
        self.assertIn("define LIMIT inside the function or pass the values through func_args", msg)

    def test_defaults_and_annotations(self):
        self.refused(default_from_module, "default values or annotations", "LIMIT")
        self.refused(annotated_with_module, "types")
        function_program(annotated_with_builtins, None)

    def test_what_is_allowed(self):
        check_function(plain)  # builtins, an inner import, its own name
        check_function(uses_attributes)
        check_function(record)  # inner def and class, comprehension, __file__
        check_function(sets_global)  # a global it defines itself
        self.assertRaisesRegex(ValueError, "@staticmethod", check_function, Holder.static)

    def test_async_generator_decorated(self):
        self.refused(coroutine, "async", "asyncio.run")
        self.refused(generator, "generator", "yield")
        self.refused(decorated, "decorated", "@identity")
        self.refused(wrapped, "decorated", "functools.wraps")

    def test_source_unavailable(self):
        ns = {}
        exec("def made():\n    return 1\n", ns)
        self.refused(ns["made"], "source cannot be read", "exec()")

    def test_func_args(self):
        self.assertEqual(check_func_args(plain, None), None)
        ok = {"path": "/tmp/x", "lr": 0.1, "tags": ["a", "b"], "nested": {"k": (1, 2.5, None, True), "s": {1, 2}, "b": b"\x00"}}
        self.assertEqual(check_func_args(record, ok), repr(ok))
        self.refused(record, "must be a dict", "func_args={", func_args=[1, 2])
        self.refused(record, "keys must be parameter names", func_args={1: 2})
        self.refused(record, "'lr' (object", "Python literals", func_args={"path": "p", "lr": object(), "tags": []})
        self.refused(record, "'lr' (float: nan)", "no nan", func_args={"path": "p", "lr": float("nan"), "tags": []})
        self.refused(record, "'tags' (SimpleNamespace", func_args={"path": "p", "lr": 1, "tags": types.SimpleNamespace()})
        self.refused(record, "do not fit record(path, lr, tags, nested=None)", "missing a required argument: 'tags'", func_args={"path": "p", "lr": 1})
        self.refused(record, "unexpected keyword argument 'epochs'", func_args={"path": "p", "lr": 1, "tags": [], "epochs": 2})
        with self.assertRaisesRegex(ValueError, "missing a required argument: 'n'"):
            check_func_args(uses_constant, None)


class CommandTest(unittest.TestCase):
    def test_torch(self):
        command, args = trainer_command(trainer(record, {"path": "out.json", "lr": 0.5, "tags": ["x"]}), "torch")
        self.assertEqual(args, [])
        self.assertEqual(command[:2], ["bash", "-c"])
        self.assertEqual(len(command), 3)
        script = command[2]
        self.assertIn("cat > test_function.py <<'KILN_TRAIN_FUNC_EOF'\ndef record(path, lr, tags, nested=None):\n", script)
        self.assertIn("\nrecord(**{'path': 'out.json', 'lr': 0.5, 'tags': ['x']})\nKILN_TRAIN_FUNC_EOF\n", script)
        self.assertTrue(script.endswith("exec torchrun test_function.py\n"), script)
        self.assertNotIn("pip", script)

    def test_mpi(self):
        for framework in ("mpi", "deepspeed", "mlx"):
            command, args = trainer_command(trainer(plain), framework)
            self.assertEqual(command[:5], ["mpirun", "--hostfile", "/etc/mpi/hostfile", "bash", "-c"])
            self.assertEqual(args, [])
            self.assertIn("cat > /home/mpiuser/test_function.py <<'KILN_TRAIN_FUNC_EOF'\n", command[5])
            self.assertIn("\nplain()\n", command[5])
            self.assertTrue(command[5].endswith('exec "$PY" /home/mpiuser/test_function.py\n'))

    def test_python(self):
        for framework in ("jax", "xgboost", "", None):
            command, _ = trainer_command(trainer(plain), framework)
            self.assertEqual(command[:2], ["bash", "-c"])
            self.assertIn('PY=python; command -v python >/dev/null 2>&1 || PY=python3\n', command[2])
            self.assertTrue(command[2].endswith('exec "$PY" test_function.py\n'))

    def test_torchtune_refused(self):
        with self.assertRaisesRegex(ValueError, "BuiltinTrainer"):
            trainer_command(trainer(plain), "torchtune")

    def test_packages(self):
        t = trainer(plain, packages_to_install=["numpy", "transformers[torch]>=4.40"], pip_index_urls=["https://a.example/simple", "https://b.example/simple"])
        script = trainer_command(t, "torch")[0][2]
        self.assertIn("KILN_PACKAGES=(numpy 'transformers[torch]>=4.40')", script)
        self.assertIn("KILN_PIP_OPTS=(--index-url https://a.example/simple --extra-index-url https://b.example/simple)", script)
        self.assertIn('KILN_PIP_LOG="${TMPDIR:-/tmp}/kiln-pip-install.log"', script)
        self.assertLess(script.index("pip install"), script.index("cat > "))  # installed first
        mpi = trainer_command(t, "mpi")[0][5]
        self.assertIn("KILN_PIP_LOG=/home/mpiuser/kiln-pip-install.log", mpi)
        # No index given: pip's own configuration decides.
        script = trainer_command(trainer(plain, packages_to_install=["numpy"]), "torch")[0][2]
        self.assertIn("KILN_PIP_OPTS=()", script)
        with self.assertRaisesRegex(ValueError, "list of requirements"):
            trainer_command(trainer(plain, packages_to_install="numpy"), "torch")
        with self.assertRaisesRegex(ValueError, "list of URLs"):
            trainer_command(trainer(plain, packages_to_install=["numpy"], pip_index_urls="https://x"), "torch")

    def test_heredoc_delimiter_in_source(self):
        src = textwrap.dedent(
            '''\
            def tricky():
                text = """
            KILN_TRAIN_FUNC_EOF
            """
                print(len(text))
            '''
        )
        with tempfile.TemporaryDirectory() as d:
            mod = load_module(d, "tricky_mod", src)
            script = trainer_command(trainer(mod.tricky), "python")[0][2]
            self.assertIn("<<'KILN_TRAIN_FUNC_EOF_1'", script)
            out = subprocess.run(["bash", "-c", script], cwd=d, capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(out.stdout.strip(), "21")


@unittest.skipUnless(shutil.which("bash"), "bash is not installed")
class RunTest(unittest.TestCase):
    """The generated command run with bash, as the container would (python or python3 on PATH)."""

    def run_command(self, command, cwd):
        self.assertEqual(command[:2], ["bash", "-c"])
        return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)

    def test_function_runs_with_its_args(self):
        with tempfile.TemporaryDirectory() as d:
            out_path = os.path.join(d, "out.json")
            args = {"path": out_path, "lr": 0.25, "tags": ["a", "b'c", 'd"e'], "nested": {"k": (1, None)}}
            command, _ = trainer_command(trainer(record, args), "python")
            out = self.run_command(command, d)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(out.stdout, "recorded 0.25\n")
            with open(out_path) as f:
                got = json.load(f)
            self.assertEqual(got["lr"], 0.25)
            self.assertEqual(got["tags"], ["a", "b'c", 'd"e'])
            self.assertEqual(got["nested"], {"k": [1, None]})
            self.assertEqual((got["twice"], got["box"], got["file"], got["python"]), (0.5, 2, "test_function.py", 3))
            self.assertEqual(got["text"], "$HOME `date` \\n \t")
            # The file the node wrote is the program, byte for byte.
            with open(os.path.join(d, "test_function.py")) as f:
                self.assertEqual(f.read(), function_program(record, args))

    def test_failure_is_the_exit_code(self):
        with tempfile.TemporaryDirectory() as d:
            command, _ = trainer_command(trainer(uses_attributes), "python")
            self.assertEqual(self.run_command(command, d).returncode, 0)
            mod = load_module(d, "boom_mod", "def boom():\n    raise SystemExit(7)\n")
            self.assertEqual(self.run_command(trainer_command(trainer(mod.boom), "python")[0], d).returncode, 7)

    def test_packages_installed_first(self):
        with tempfile.TemporaryDirectory() as d:
            index = os.path.join(d, "empty-index")
            os.mkdir(index)
            env_tmp = os.path.join(d, "tmp")
            os.mkdir(env_tmp)
            # pip is there already: "installing" it needs no index, so this runs offline.
            t = trainer(plain, packages_to_install=["pip"], pip_index_urls=["file://" + index])
            out = subprocess.run(trainer_command(t, "python")[0], cwd=d, capture_output=True, text=True, timeout=300, env={**os.environ, "TMPDIR": env_tmp})
            if "No module named pip" in out.stderr:
                self.skipTest("this python has no pip")
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            self.assertIn("Successfully installed Python packages", out.stdout)
            self.assertIn("sqrt 4.0", out.stdout)
            # A package the index does not have: pip's log, exit 1, the function never runs.
            t = trainer(plain, packages_to_install=["kiln-no-such-package-xyz"], pip_index_urls=["file://" + index])
            out = subprocess.run(trainer_command(t, "python")[0], cwd=d, capture_output=True, text=True, timeout=300, env={**os.environ, "TMPDIR": env_tmp})
            self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
            self.assertIn("ERROR: Failed to install Python packages: kiln-no-such-package-xyz", out.stderr)
            self.assertNotIn("sqrt", out.stdout)


class HelpersTest(unittest.TestCase):
    def test_entrypoint_kind(self):
        self.assertEqual(_function.entrypoint_kind("torch"), "torchrun")
        self.assertEqual(_function.entrypoint_kind("DeepSpeed"), "mpirun")
        self.assertEqual(_function.entrypoint_kind("jax"), "python")

    def test_function_file(self):
        self.assertEqual(_function.function_file(plain), "test_function.py")
        self.assertEqual(_function.function_file(print), "train.py")


if __name__ == "__main__":
    unittest.main()
