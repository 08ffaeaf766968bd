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


KUBECONFIG = """\
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTi==
    server: https://127.0.0.1:6443
  name: kind-kiln
contexts:
- context:
    cluster: kind-kiln
    namespace: team-a
    user: alice
  name: kind-kiln
- context: {cluster: kind-kiln, user: robot}
  name: robot
- context:
    cluster: kind-kiln
    user: eks
  name: eks
current-context: kind-kiln
kind: Config
preferences: {}
users:
- name: alice
  user:
    token: "alice-token"
- name: robot
  user:
    tokenFile: /var/run/robot/token
- name: eks
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: @PYTHON@
      args: ["-c", "import json, os; print(json.dumps({'status': {'token': 'exec-' + os.environ['WHO']}}))"]
      env:
      - name: WHO
        value: bob
"""


class KubeconfigTest(unittest.TestCase):
    """A user with only a kubeconfig (the Kubeflow SDK's KubernetesBackendConfig) reaches Kiln."""

    def setUp(self) -> None:
        import sys

        self.dir = tempfile.TemporaryDirectory()
        self.kubeconfig = os.path.join(self.dir.name, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            f.write(KUBECONFIG.replace("@PYTHON@", sys.executable))
        env = {k: v for k, v in os.environ.items() if not k.startswith("KILN_") and k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
        env.update({"KILN_CONFIG": os.path.join(self.dir.name, "none.yaml"), "KUBECONFIG": self.kubeconfig})
        self.env = mock.patch.dict(os.environ, env, clear=True)
        self.env.start()

    def tearDown(self) -> None:
        self.env.stop()
        self.dir.cleanup()

    def test_yaml_as_kubectl_writes_it(self) -> None:
        doc = config.parse_yaml(KUBECONFIG.replace("@PYTHON@", "py"))
        self.assertEqual(doc["contexts"][1], {"context": {"cluster": "kind-kiln", "user": "robot"}, "name": "robot"})
        self.assertEqual(doc["users"][2]["user"]["exec"]["env"], [{"name": "WHO", "value": "bob"}])
        self.assertEqual((doc["preferences"], doc["current-context"]), ({}, "kind-kiln"))
        self.assertEqual(config.parse_yaml('{"a": [1, {"b": null}]}'), {"a": [1, {"b": None}]})
        self.assertEqual(config.parse_yaml("a:\n  - x\n  - [1, 'two', true]\nb: ~\n"), {"a": ["x", [1, "two", True]], "b": None})
        with self.assertRaisesRegex(config.ConfigError, r"kc:2: .*block scalars"):
            config.parse_yaml("a: 1\nb: |\n  text\n", "kc")

    def test_token_and_namespace_of_a_context(self) -> None:
        self.assertEqual(config.kube_credentials(), config.KubeCredentials("alice-token", "", "team-a", "kubeconfig context 'kind-kiln'"))
        self.assertEqual(config.kube_credentials(context="robot").token_file, "/var/run/robot/token")
        self.assertEqual(config.kube_credentials(self.kubeconfig, "eks").token, "exec-bob")
        with self.assertRaisesRegex(config.ConfigError, r"no context 'nope' \(it has eks, kind-kiln, robot\)"):
            config.kube_credentials(context="nope")
        with self.assertRaisesRegex(config.ConfigError, r"kubeconfig /missing: no such file"):
            config.kube_credentials("/missing")

    def test_the_server_from_the_environment(self) -> None:
        with self.assertRaisesRegex(config.ConfigError, r"no Kiln API server configured: set KILN_API_SERVER \(or KILN_SERVER\)"):
            config.resolve_kubernetes()
        os.environ["KILN_API_SERVER"] = "https://kiln.example.com"
        c = config.resolve_kubernetes()
        self.assertEqual((c.server, c.token, c.namespace), ("https://kiln.example.com", "alice-token", "team-a"))
        c = config.resolve_kubernetes("ml", context="eks")
        self.assertEqual((c.token, c.namespace), ("exec-bob", "ml"))
        os.environ["KILN_SERVER"] = "https://other.example.com"  # the CLI's variable wins
        self.assertEqual(config.resolve_kubernetes().server, "https://other.example.com")

    def test_a_kiln_configuration_keeps_its_token_unless_a_kubeconfig_is_named(self) -> None:
        path = os.path.join(self.dir.name, "kiln.yaml")
        with open(path, "w") as f:
            f.write("current-context: k\ncontexts:\n- name: k\n  server: https://kiln.local\n  token: kiln-token\n")
        c = config.resolve_kubernetes(kiln_config=path)
        self.assertEqual((c.server, c.token, c.namespace), ("https://kiln.local", "kiln-token", "team-a"))
        self.assertEqual(config.resolve_kubernetes(context="robot", kiln_config=path).token_file, "/var/run/robot/token")
        token = type("Configuration", (), {"api_key": {"authorization": "Bearer cfg-token"}, "api_key_prefix": {}})()
        self.assertEqual(config.resolve_kubernetes(client_configuration=token, kiln_config=path).token, "cfg-token")
        os.environ["KILN_TOKEN"] = "env-token"
        self.assertEqual(config.resolve_kubernetes(context="robot", kiln_config=path).token, "env-token")

    def test_in_a_pod_the_service_account(self) -> None:
        sa = os.path.join(self.dir.name, "sa")
        os.makedirs(sa)
        for name, text in (("token", "pod-token"), ("namespace", "jobs")):
            with open(os.path.join(sa, name), "w") as f:
                f.write(text)
        os.environ.update({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KILN_API_SERVER": "http://kiln-apiserver.kiln-system.svc:8080"})
        del os.environ["KUBECONFIG"]
        with mock.patch.object(config, "SERVICE_ACCOUNT_DIR", sa):
            c = config.resolve_kubernetes()
        self.assertEqual((c.token, c.token_file, c.namespace), ("", os.path.join(sa, "token"), "jobs"))

    def test_the_client_from_a_kubeconfig_alone(self) -> None:
        import kiln

        os.environ["KILN_API_SERVER"] = "http://127.0.0.1:9"
        c = kiln.TrainerClient(kiln.KubernetesBackendConfig(config_file=self.kubeconfig, context="robot", namespace="ml"))
        self.assertEqual((c.server, c.namespace, c._transport._token_file), ("http://127.0.0.1:9", "ml", "/var/run/robot/token"))
        c = kiln.TrainerClient()
        self.assertEqual((c.namespace, c._transport._token), ("team-a", "alice-token"))


if __name__ == "__main__":
    unittest.main()
