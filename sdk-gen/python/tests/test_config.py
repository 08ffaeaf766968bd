"""The client configuration: the CLI's file and KILN_* variables, read the CLI's way."""

import os
import tempfile
import unittest
from unittest import mock

from kiln import config

# As api/clientconfig's Save writes it (sigs.k8s.io/yaml), plus what people add by hand.
FILE = """\
# written by kiln config set-context
contexts:
- certificate-authority: /etc/kiln/ca.crt
  name: local
  namespace: default
  server: https://127.0.0.1:18443
  token: abc.def
- name: prod   # the shared cluster
  server: "https://kiln.example.com"
  token-file: '/var/run/secrets/kiln/token'
  namespace: team-a
current-context: local
"""


class ConfigTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "config.yaml")
        with open(self.path, "w") as f:
            f.write(FILE)
        env = {k: v for k, v in os.environ.items() if not k.startswith("KILN_")}
        self.env = mock.patch.dict(os.environ, env, clear=True)
        self.env.start()

    def tearDown(self) -> None:
        self.env.stop()
        self.dir.cleanup()

    def test_current_context(self) -> None:
        c = config.resolve(self.path)
        self.assertEqual(c, config.Context("local", "https://127.0.0.1:18443", "/etc/kiln/ca.crt", "abc.def", "", "default"))

    def test_other_context_and_quotes(self) -> None:
        c = config.resolve(self.path, "prod")
        self.assertEqual((c.server, c.token_file, c.namespace, c.token), ("https://kiln.example.com", "/var/run/secrets/kiln/token", "team-a", ""))
        os.environ["KILN_CONTEXT"] = "prod"
        self.assertEqual(config.resolve(self.path).name, "prod")

    def test_environment_overrides(self) -> None:
        os.environ.update({"KILN_SERVER": "http://127.0.0.1:18090", "KILN_NAMESPACE": "ml", "KILN_TOKEN_FILE": "/tok"})
        c = config.resolve(self.path)
        self.assertEqual((c.server, c.namespace, c.token, c.token_file), ("http://127.0.0.1:18090", "ml", "", "/tok"))
        os.environ["KILN_TOKEN"] = "env-token"
        self.assertEqual(config.resolve(self.path).token, "env-token")

    def test_environment_alone(self) -> None:
        os.environ["KILN_SERVER"] = "https://kiln.example.com"
        c = config.resolve(os.path.join(self.dir.name, "missing.yaml"))
        self.assertEqual(c.server, "https://kiln.example.com")

    def test_default_path(self) -> None:
        os.environ["XDG_CONFIG_HOME"] = "/cfg"
        self.assertEqual(config.default_path(), "/cfg/kiln/config.yaml")
        os.environ["KILN_CONFIG"] = "/elsewhere.yaml"
        self.assertEqual(config.default_path(), "/elsewhere.yaml")

    def test_errors_say_what_to_do(self) -> None:
        with self.assertRaisesRegex(config.ConfigError, r"no Kiln API server configured: run `kiln config set-context` or set KILN_SERVER"):
            config.resolve(os.path.join(self.dir.name, "missing.yaml"))
        with self.assertRaisesRegex(config.ConfigError, r"context 'nope' is not in the Kiln configuration"):
            config.resolve(self.path, "nope")
        for text, want in (
            ("contexts:\n- name: a\n  servr: https://x\n", r"config.yaml:3: unknown context key 'servr'"),
            ("current-context: a\nfoo: bar\n", r"config.yaml:2: unknown key 'foo'"),
            ("contexts:\n  - name: a\n     server: x\n", r"config.yaml:3: unexpected indentation in contexts"),
            ("contexts: {a: b}\n", r"config.yaml:1: contexts: want a list"),
            ("just text\n", r"config.yaml:1: cannot read 'just text'"),
        ):
            with self.subTest(text), open(self.path, "w") as f:
                f.write(text)
            with self.subTest(text), self.assertRaisesRegex(config.ConfigError, want):
                config.load(self.path)


if __name__ == "__main__":
    unittest.main()
