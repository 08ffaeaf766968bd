"""The client configuration: the CLI's file and KILN_* variables, read the CLI's way."""

import json
import os
import re
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List
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
        # No URL anywhere: the cluster is asked, and this kubeconfig's CA is no certificate.
        with self.assertRaisesRegex(config.ConfigError, r"no KILN_SERVER, no Kiln configuration \(.*\), no KILN_API_SERVER, and the certificate authority of the cluster 'kind-kiln'"):
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


INFO_PATH = "/api/v1/namespaces/kube-public/configmaps/kiln-info"


class FakeKube:
    """A Kubernetes API server with (or without: status 404, or 403) the ConfigMap
    kube-public/kiln-info. It takes the bearer tokens in ``tokens`` and, over TLS, client
    certificates of the test CA, and keeps what it was sent."""

    def __init__(self, tls: Any = None) -> None:
        self.status = 200
        self.data: Dict[str, str] = {}
        self.tokens = {"alice-token"}
        self.requests: List[Dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                peer = self.connection.getpeercert() if hasattr(self.connection, "getpeercert") else None
                auth = self.headers.get("Authorization", "")
                fake.requests.append({"path": self.path, "authorization": auth, "client_certificate": bool(peer)})
                if not peer and auth not in {"Bearer " + t for t in fake.tokens}:
                    return self.answer(401, {"kind": "Status", "status": "Failure", "message": "Unauthorized", "code": 401})
                if self.path != INFO_PATH or fake.status == 404:
                    return self.answer(404, {"kind": "Status", "message": 'configmaps "kiln-info" not found', "code": 404})
                if fake.status == 403:
                    message = 'configmaps "kiln-info" is forbidden: User "alice" cannot get resource "configmaps" in the namespace "kube-public"'
                    return self.answer(403, {"kind": "Status", "message": message, "code": 403})
                meta = {"name": "kiln-info", "namespace": "kube-public"}
                self.answer(200, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": fake.data})

            def answer(self, status: int, doc: Dict[str, Any]) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"{'https' if tls is not None else 'http'}://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# kubectl's YAML, pointing at the fake cluster.
INFO_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: @SERVER@
contexts:
- name: alice
  context: {cluster: fake, user: alice, namespace: team-a}
- name: mallory
  context: {cluster: fake, user: mallory}
- name: admin
  context: {cluster: fake, user: admin}
current-context: alice
users:
- name: alice
  user:
    token: alice-token
- name: mallory
  user:
    token: stolen
- name: admin
  user:
    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t
    client-key-data: LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0t
"""


class KilnInfoTest(unittest.TestCase):
    """With no URL configured, the SDK asks the cluster: the ConfigMap kube-public/kiln-info."""

    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.kube = FakeKube()
        self.kubeconfig = os.path.join(self.dir.name, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            f.write(INFO_KUBECONFIG.replace("@SERVER@", self.kube.url))
        drop = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
        env = {k: v for k, v in os.environ.items() if not k.startswith("KILN_") and k not in drop}
        env.update({"KILN_CONFIG": os.path.join(self.dir.name, "none.yaml"), "KUBECONFIG": self.kubeconfig})
        self.env = mock.patch.dict(os.environ, env, clear=True)
        self.env.start()
        self.kube.data = {"apiServerURL": "http://127.0.0.1:8090", "apiServerInClusterURL": "http://kiln-apiserver.kiln-system.svc:8090"}

    def tearDown(self) -> None:
        self.env.stop()
        self.kube.close()
        self.dir.cleanup()

    def test_the_cluster_says_where_kiln_is(self) -> None:
        import kiln

        c = config.resolve_kubernetes()
        self.assertEqual((c.server, c.token, c.namespace, c.certificate_authority_data), ("http://127.0.0.1:8090", "alice-token", "team-a", ""))
        self.assertEqual(self.kube.requests, [{"path": INFO_PATH, "authorization": "Bearer alice-token", "client_certificate": False}])
        for client in (kiln.TrainerClient(), kiln.TrainerClient(kiln.KubernetesBackendConfig())):
            self.assertEqual((client.server, client.namespace, client._transport._token), ("http://127.0.0.1:8090", "team-a", "alice-token"))
        # An https URL brings the CA that signs its certificate; an http one needs none.
        self.kube.data = {"apiServerURL": "https://kiln.example.com", "caBundle": "-----BEGIN CERTIFICATE-----\nnot one\n"}
        with self.assertRaisesRegex(config.ConfigError, r"the caBundle of the ConfigMap kube-public/kiln-info of the cluster at .* holds no PEM certificate"):
            config.resolve_kubernetes()
        self.kube.data["apiServerURL"] = "http://kiln.example.com"
        self.assertEqual(config.resolve_kubernetes().certificate_authority_data, "")

    def test_outside_the_in_cluster_url_only_if_it_resolves(self) -> None:
        import socket

        real = socket.getaddrinfo

        def getaddrinfo(host: str, *args: Any, **kwargs: Any) -> Any:
            if str(host).endswith(".svc"):
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return real(host, *args, **kwargs)

        self.kube.data = {"apiServerInClusterURL": "http://kiln-apiserver.kiln-system.svc:8090"}
        with mock.patch("socket.getaddrinfo", getaddrinfo):
            with self.assertRaisesRegex(
                config.ConfigError,
                r"has no apiServerURL and its apiServerInClusterURL http://kiln-apiserver.kiln-system.svc:8090 does not resolve from here: "
                r"set the chart's apiserver.url .* or set KILN_API_SERVER",
            ):
                config.resolve_kubernetes()
            self.kube.data = {"apiServerInClusterURL": "http://127.0.0.1:8091"}
            self.assertEqual(config.resolve_kubernetes().server, "http://127.0.0.1:8091")
        self.kube.data = {}
        with self.assertRaisesRegex(config.ConfigError, r"has no apiServerURL or apiServerInClusterURL"):
            config.resolve_kubernetes()

    def test_no_configmap_says_to_install_kiln(self) -> None:
        self.kube.status = 404
        want = (
            r"^Kiln's API server: no KILN_SERVER, no Kiln configuration \(.*none.yaml\), no KILN_API_SERVER, and the cluster at "
            + re.escape(self.kube.url)
            + r" has no ConfigMap kube-public/kiln-info \(is Kiln installed\? `helm install kiln "
        )
        with self.assertRaisesRegex(config.ConfigError, want):
            config.resolve_kubernetes()

    def test_a_user_who_may_not_read_it_is_told_so(self) -> None:
        self.kube.status = 403
        want = r"kubeconfig context 'alice' may not read the ConfigMap kube-public/kiln-info of the cluster at .* \(403: configmaps \"kiln-info\" is forbidden: .*\): .*set KILN_API_SERVER"
        with self.assertRaisesRegex(config.ConfigError, want):
            config.resolve_kubernetes()
        with self.assertRaisesRegex(config.ConfigError, r"did not accept the credentials of kubeconfig context 'mallory' \(401: Unauthorized\)"):
            config.resolve_kubernetes(context="mallory")

    def test_kiln_api_server_wins_over_the_cluster(self) -> None:
        os.environ["KILN_API_SERVER"] = "https://kiln.example.com"
        self.assertEqual(config.resolve_kubernetes().server, "https://kiln.example.com")
        self.assertEqual(config.resolve_kubernetes(server="http://127.0.0.1:9").server, "http://127.0.0.1:9")
        self.assertEqual(self.kube.requests, [])

    def test_a_client_certificate_cannot_call_kiln(self) -> None:
        want = (
            r"kubeconfig context 'admin' authenticates with a client certificate, which Kiln's API server does not take "
            r"\(it authenticates bearer tokens\): give its user a token, e.g. `kubectl create token SERVICEACCOUNT .*, or use a Kiln context"
        )
        with self.assertRaisesRegex(config.ConfigError, want):
            config.resolve_kubernetes(context="admin")
        os.environ["KILN_API_SERVER"] = "https://kiln.example.com"
        with self.assertRaisesRegex(config.ConfigError, want):
            config.resolve_kubernetes(context="admin")
        self.assertEqual(self.kube.requests, [])

    def test_nothing_to_ask(self) -> None:
        os.environ["KUBECONFIG"] = os.path.join(self.dir.name, "missing")
        want = r"no KILN_API_SERVER, and no kubeconfig \(KUBECONFIG, ~/.kube/config\) and no pod ServiceAccount to ask a cluster with: set KILN_API_SERVER"
        with self.assertRaisesRegex(config.ConfigError, want):
            config.resolve_kubernetes()

    def test_a_cluster_that_does_not_answer(self) -> None:
        import socket

        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(1)
            with open(self.kubeconfig, "w") as f:
                f.write(INFO_KUBECONFIG.replace("@SERVER@", f"http://127.0.0.1:{silent.getsockname()[1]}"))
            with mock.patch.object(config, "DISCOVERY_TIMEOUT", 0.2), self.assertRaisesRegex(config.ConfigError, r"did not answer in 0.2 s"):
                config.resolve_kubernetes()


def _test_certificates(path: str) -> None:
    """A CA, and a server (127.0.0.1) and a client certificate it signs, as files in path."""
    import subprocess

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=path, check=True, capture_output=True, timeout=60)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "3650", "-subj", "/CN=kiln-test-ca",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    for n, (who, usage) in enumerate((("server", "serverAuth\nsubjectAltName=IP:127.0.0.1"), ("client", "clientAuth")), 2):
        with open(os.path.join(path, who + ".ext"), "w") as f:
            f.write(f"basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nauthorityKeyIdentifier=keyid\nextendedKeyUsage={usage}\n")
        run("req", *ec, "-keyout", who + ".key", "-out", who + ".csr", "-subj", "/CN=" + who)
        run("x509", "-req", "-in", who + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-set_serial", str(n), "-days", "3650",
            "-out", who + ".crt", "-extfile", who + ".ext")


class KilnInfoTLSTest(unittest.TestCase):
    """The cluster over TLS, as clusters are: in a pod, and with a kubeconfig's client certificate."""

    certs: "tempfile.TemporaryDirectory[str]"

    @classmethod
    def setUpClass(cls) -> None:
        import shutil
        import subprocess

        if not shutil.which("openssl"):
            raise unittest.SkipTest("no openssl to make the test certificates with")
        cls.certs = tempfile.TemporaryDirectory()
        try:
            _test_certificates(cls.certs.name)
        except (OSError, subprocess.SubprocessError) as e:
            cls.certs.cleanup()
            raise unittest.SkipTest(f"openssl cannot make the test certificates: {e}")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.certs.cleanup()

    def setUp(self) -> None:
        import ssl

        self.dir = tempfile.TemporaryDirectory()
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(self.cert("server.crt"), self.cert("server.key"))
        tls.load_verify_locations(self.cert("ca.crt"))
        tls.verify_mode = ssl.CERT_OPTIONAL
        self.kube = FakeKube(tls)
        drop = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
        env = {k: v for k, v in os.environ.items() if not k.startswith("KILN_") and k not in drop}
        env["KILN_CONFIG"] = os.path.join(self.dir.name, "none.yaml")
        self.env = mock.patch.dict(os.environ, env, clear=True)
        self.env.start()
        with open(self.cert("ca.crt")) as f:
            self.ca = f.read()

    def tearDown(self) -> None:
        self.env.stop()
        self.kube.close()
        self.dir.cleanup()

    def cert(self, name: str) -> str:
        return os.path.join(self.certs.name, name)

    def test_in_a_pod_the_in_cluster_url_and_its_ca(self) -> None:
        import kiln

        sa = os.path.join(self.dir.name, "serviceaccount")
        os.makedirs(sa)
        for name, text in (("token", "pod-token"), ("namespace", "jobs"), ("ca.crt", self.ca)):
            with open(os.path.join(sa, name), "w") as f:
                f.write(text)
        self.kube.tokens = {"pod-token"}
        self.kube.data = {
            "apiServerURL": "https://kiln.example.com",
            "apiServerInClusterURL": "https://kiln-apiserver.kiln-system.svc:8443",
            "caBundle": self.ca,
        }
        os.environ.update({"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": self.kube.url.rsplit(":", 1)[1]})
        with mock.patch.object(config, "SERVICE_ACCOUNT_DIR", sa):
            c = config.resolve_kubernetes()
            self.assertEqual((c.server, c.token_file, c.namespace), ("https://kiln-apiserver.kiln-system.svc:8443", os.path.join(sa, "token"), "jobs"))
            self.assertEqual(c.certificate_authority_data, self.ca.strip())
            self.assertEqual(self.kube.requests[0]["authorization"], "Bearer pod-token")
            client = kiln.TrainerClient()
            self.assertIn("kiln-test-ca", str(client._transport._ssl.get_ca_certs()))
            # KILN_CA_FILE, or ca_file, names the CA instead.
            self.assertEqual(kiln.TrainerClient(ca_file=self.cert("ca.crt"))._transport._ssl.get_ca_certs()[0]["subject"], ((("commonName", "kiln-test-ca"),),))
            os.environ["KILN_CA_FILE"] = "/etc/kiln/ca.crt"
            c = config.resolve_kubernetes()
            self.assertEqual((c.certificate_authority, c.certificate_authority_data), ("/etc/kiln/ca.crt", ""))
            del os.environ["KILN_CA_FILE"]
            # A release that publishes only the outside URL.
            self.kube.data = {"apiServerURL": "https://kiln.example.com"}
            self.assertEqual(config.resolve_kubernetes().server, "https://kiln.example.com")

    def kubeconfig(self, ca: bool = True) -> None:
        import base64

        def data(name: str) -> str:
            with open(self.cert(name), "rb") as f:
                return base64.b64encode(f.read()).decode()

        cluster: Dict[str, Any] = {"server": self.kube.url}
        if ca:
            cluster["certificate-authority-data"] = data("ca.crt")
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "tls", "cluster": cluster}],
            "contexts": [{"name": "admin", "context": {"cluster": "tls", "user": "admin", "namespace": "ops"}}],
            "current-context": "admin",
            "users": [{"name": "admin", "user": {"client-certificate-data": data("client.crt"), "client-key-data": data("client.key")}}],
        }
        path = os.path.join(self.dir.name, "kubeconfig.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        os.environ["KUBECONFIG"] = path

    def test_a_client_certificate_reads_it_for_a_token_from_elsewhere(self) -> None:
        import stat

        self.kubeconfig()
        self.kube.data = {"apiServerURL": "http://127.0.0.1:8090"}
        os.environ["KILN_TOKEN"] = "kiln-token"
        made: List[str] = []
        real = tempfile.mkstemp

        def mkstemp(*args: Any, **kwargs: Any) -> Any:
            fd, path = real(*args, **kwargs)
            made.append(path)
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
            return fd, path

        with mock.patch.object(tempfile, "mkstemp", mkstemp):
            c = config.resolve_kubernetes()
        self.assertEqual((c.server, c.token, c.namespace), ("http://127.0.0.1:8090", "kiln-token", "ops"))
        self.assertEqual(self.kube.requests, [{"path": INFO_PATH, "authorization": "", "client_certificate": True}])
        self.assertEqual(len(made), 2)  # the certificate and the key, removed once loaded
        self.assertEqual([p for p in made if os.path.exists(p)], [])

    def test_a_cluster_certificate_the_kubeconfig_does_not_trust(self) -> None:
        self.kubeconfig(ca=False)
        os.environ["KILN_TOKEN"] = "kiln-token"
        with self.assertRaisesRegex(config.ConfigError, r"presented a certificate that the certificate authority of kubeconfig context 'admin' does not sign"):
            config.resolve_kubernetes()


if __name__ == "__main__":
    unittest.main()
