"""The client configuration every Kiln client reads: the CLI's file and environment variables.

The file (``KILN_CONFIG``, else ``$XDG_CONFIG_HOME/kiln/config.yaml``, i.e.
``~/.config/kiln/config.yaml``) is the one ``make up`` and ``kiln config`` write::

    current-context: local
    contexts:
    - name: local
      server: https://127.0.0.1:18443
      certificate-authority: /path/to/ca.crt
      token: eyJhbGciOi...
      namespace: default

``KILN_SERVER``, ``KILN_TOKEN``, ``KILN_TOKEN_FILE``, ``KILN_NAMESPACE`` and ``KILN_CA_FILE``
override the current context; ``KILN_CONTEXT`` picks another one. The rules are the CLI's
(``api/clientconfig``), so a notebook and a terminal call the same server as the same user.

A user with only a kubeconfig (the Kubeflow SDK's ``KubernetesBackendConfig``) needs no Kiln
file: :func:`resolve_kubernetes` takes the bearer token (``token``, ``tokenFile`` or an exec
plugin) and the namespace of a kubeconfig context, or in a pod its ServiceAccount's, and the API
server's URL from ``KILN_SERVER`` or ``KILN_API_SERVER``, else from the cluster: the ConfigMap
``kube-public/kiln-info`` that Kiln's chart and ``make up`` publish, which every authenticated
user may read::

    apiServerURL: https://kiln.example.com                                # from outside the cluster
    apiServerInClusterURL: http://kiln-apiserver.kiln-system.svc:8090     # from a pod
    caBundle: "-----BEGIN CERTIFICATE-----..."                            # optional: the CA of an https URL

It is read through the Kubernetes API with the same credentials (the kubeconfig context's
cluster, CA and user, or the pod's in-cluster configuration), once per client; nothing is cached.
A pod takes ``apiServerInClusterURL`` (else ``apiServerURL``), anything else ``apiServerURL``
(else ``apiServerInClusterURL`` if its host resolves from here).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

__all__ = [
    "Context",
    "ConfigError",
    "KubeCluster",
    "KubeCredentials",
    "default_path",
    "discover_api_server",
    "kube_credentials",
    "load",
    "parse_yaml",
    "resolve",
    "resolve_kubernetes",
]

ENV_CONFIG = "KILN_CONFIG"
ENV_CONTEXT = "KILN_CONTEXT"
ENV_SERVER = "KILN_SERVER"
ENV_TOKEN = "KILN_TOKEN"
ENV_TOKEN_FILE = "KILN_TOKEN_FILE"
ENV_NAMESPACE = "KILN_NAMESPACE"
ENV_CA_FILE = "KILN_CA_FILE"
#: The API server's URL for a client configured from a kubeconfig alone (KILN_SERVER wins).
ENV_API_SERVER = "KILN_API_SERVER"

#: Where a pod's ServiceAccount token, CA certificate and namespace are mounted.
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"

#: The ConfigMap where a cluster says where Kiln's API server is (Kiln's chart and `make up`
#: publish it), and the keys of its data.
INFO_NAMESPACE = "kube-public"
INFO_NAME = "kiln-info"
INFO_URL = "apiServerURL"
INFO_IN_CLUSTER_URL = "apiServerInClusterURL"
INFO_CA_BUNDLE = "caBundle"
#: Seconds the Kubernetes API server has to answer the read of that ConfigMap.
DISCOVERY_TIMEOUT = 5.0

_KEYS = {"name", "server", "certificate-authority", "token", "token-file", "namespace"}


class ConfigError(ValueError):
    """The Kiln configuration is missing, unreadable or wrong; the message says what to do."""


@dataclass
class Context:
    """One API server and the credentials to call it with."""

    name: str = ""
    server: str = ""
    certificate_authority: str = ""
    token: str = ""
    token_file: str = ""
    namespace: str = ""
    #: PEM of CAs trusted, with the system's, for an https server: the ``caBundle`` a cluster
    #: publishes with the URL (``certificate_authority``, a file, is used alone and wins).
    certificate_authority_data: str = ""


def default_path() -> str:
    """Where the configuration lives unless ``KILN_CONFIG`` says otherwise."""
    if os.environ.get(ENV_CONFIG):
        return os.environ[ENV_CONFIG]
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "kiln", "config.yaml")


def load(path: Optional[str] = None) -> Dict[str, Any]:
    """The configuration file as ``{"current-context": str, "contexts": [dict]}``; a missing
    file is an empty configuration."""
    path = path or default_path()
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {"current-context": "", "contexts": []}
    except OSError as e:
        raise ConfigError(f"reading Kiln configuration: {e}") from None
    return _parse(text, path)


def resolve(path: Optional[str] = None, context: Optional[str] = None, *, require_server: bool = True) -> Context:
    """The context a client uses: ``context`` (else ``KILN_CONTEXT``, else the file's current
    context) with the ``KILN_*`` variables applied over it. Without ``require_server`` a
    configuration that names no server is an empty context, not an error."""
    path = path or default_path()
    cfg = load(path)
    name = context or os.environ.get(ENV_CONTEXT) or cfg.get("current-context", "")
    out = Context()
    if name:
        found = [c for c in cfg["contexts"] if c.get("name") == name]
        if not found and not os.environ.get(ENV_SERVER):
            raise ConfigError(f"context {name!r} is not in the Kiln configuration {path}: list them with `kiln config get-contexts`")
        if found:
            c = found[0]
            out = Context(
                name=c.get("name", ""),
                server=c.get("server", ""),
                certificate_authority=c.get("certificate-authority", ""),
                token=c.get("token", ""),
                token_file=c.get("token-file", ""),
                namespace=c.get("namespace", ""),
            )
    if os.environ.get(ENV_TOKEN_FILE):
        out.token, out.token_file = "", os.environ[ENV_TOKEN_FILE]
    for env, attr in ((ENV_SERVER, "server"), (ENV_TOKEN, "token"), (ENV_NAMESPACE, "namespace"), (ENV_CA_FILE, "certificate_authority")):
        if os.environ.get(env):
            setattr(out, attr, os.environ[env])
    if not out.server and require_server:
        raise ConfigError(f"no Kiln API server configured: run `kiln config set-context` or set {ENV_SERVER} (configuration file: {path})")
    return out


# The file is YAML; Python's standard library reads none, so this reads the subset the CLI
# writes (and people write by hand): a mapping of scalars and one list of flat mappings,
# with plain, 'single' or "double" quoted scalars and comments. Anything else is refused
# with its line, never guessed at.

_LINE = re.compile(r"^(?P<indent> *)(?P<dash>- +)?(?P<key>[A-Za-z0-9_-]+):(?: +(?P<value>.*?))?\s*$")


def _parse(text: str, path: str) -> Dict[str, Any]:
    cfg: Dict[str, Any] = {"current-context": "", "contexts": []}
    contexts: List[Dict[str, str]] = cfg["contexts"]
    in_contexts = False
    item: Optional[Dict[str, str]] = None
    item_indent = -1
    for n, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw)
        if not line.strip() or line.strip() == "---":
            continue
        if "\t" in line[: len(line) - len(line.lstrip())]:
            raise ConfigError(f"{path}:{n}: tabs are not allowed for indentation in YAML")
        m = _LINE.match(line)
        if not m:
            raise ConfigError(f"{path}:{n}: cannot read {raw.strip()!r}: write `key: value` (the CLI writes this file with `kiln config set-context`)")
        indent, dash, key, value = len(m.group("indent")), m.group("dash"), m.group("key"), m.group("value")
        if indent == 0 and not dash:
            in_contexts, item = False, None
            if key == "contexts":
                if value not in (None, "", "[]"):
                    raise ConfigError(f"{path}:{n}: contexts: want a list of contexts, one `- name: ...` each")
                in_contexts = True
            elif key == "current-context":
                cfg["current-context"] = _scalar(value or "", path, n)
            else:
                raise ConfigError(f"{path}:{n}: unknown key {key!r} (want current-context or contexts)")
            continue
        if not in_contexts:
            raise ConfigError(f"{path}:{n}: unexpected indentation")
        if dash:
            item = {}
            contexts.append(item)
            item_indent = indent + len(dash)
        elif item is None or indent != item_indent:
            raise ConfigError(f"{path}:{n}: unexpected indentation in contexts")
        if key not in _KEYS:
            raise ConfigError(f"{path}:{n}: unknown context key {key!r} (want one of {', '.join(sorted(_KEYS))})")
        item[key] = _scalar(value or "", path, n)
    return cfg


def _strip_comment(line: str) -> str:
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line


def _scalar(value: str, path: str, n: int) -> str:
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] == "'":
        return v[1:-1].replace("''", "'")
    if len(v) >= 2 and v[0] == v[-1] == '"':
        try:
            import json

            return str(json.loads(v))
        except ValueError:
            raise ConfigError(f"{path}:{n}: cannot read the quoted value {v}") from None
    if v[:1] in ("[", "{", "|", ">", "&", "*", "!"):
        raise ConfigError(f"{path}:{n}: {v!r}: want a plain or quoted string")
    return v


# -- kubeconfig: the Kubeflow SDK's KubernetesBackendConfig ------------------------------------


@dataclass
class KubeCluster:
    """How to call a Kubernetes API server: a kubeconfig context's cluster (its server and CA)
    with its user's client certificate, or a pod's in-cluster configuration. ``*_data`` are the
    kubeconfig's base64 values; paths are as the kubeconfig resolves them."""

    server: str = ""
    name: str = ""
    certificate_authority: str = ""
    certificate_authority_data: str = ""
    insecure_skip_tls_verify: bool = False
    client_certificate: str = ""
    client_certificate_data: str = ""
    client_key: str = ""
    client_key_data: str = ""
    in_cluster: bool = False

    def has_client_certificate(self) -> bool:
        return bool(self.client_certificate or self.client_certificate_data)


@dataclass
class KubeCredentials:
    """What a kubeconfig context (or a pod) gives a Kiln client: a bearer token or a file that
    holds one, and a namespace. ``source`` says where they came from, for messages; ``cluster``
    is the Kubernetes API server they are for (None without a kubeconfig or a pod)."""

    token: str = ""
    token_file: str = ""
    namespace: str = ""
    source: str = ""
    cluster: Optional[KubeCluster] = field(default=None, compare=False, repr=False)


def in_pod() -> bool:
    """Whether this process runs in a Kubernetes pod with a ServiceAccount token."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(os.path.join(SERVICE_ACCOUNT_DIR, "token"))


def kube_credentials(config_file: Optional[str] = None, context: Optional[str] = None, *, token: bool = True) -> KubeCredentials:
    """The credentials the Kubeflow SDK would use: a kubeconfig's (``config_file``, else
    ``KUBECONFIG``'s files, else ``~/.kube/config``; ``context``, else its current context) when
    one is named or this is not a pod, else the pod's ServiceAccount token and namespace. Kiln's
    API server takes bearer tokens only: a context that authenticates with a client certificate
    gives no token (and ``namespace`` alone; its ``cluster`` has the certificate). ``token=False``
    reads the namespace only (no credential plugin runs)."""
    if config_file or context or not in_pod():
        paths = [os.path.expanduser(config_file)] if config_file else _kubeconfig_paths()
        found = [p for p in paths if os.path.exists(p)]
        if config_file and not found:
            raise ConfigError(f"kubeconfig {config_file}: no such file")
        if found:
            return _from_kubeconfig(found, context, token)
        if context:
            raise ConfigError(f"kubeconfig context {context!r}: no kubeconfig found (KUBECONFIG, ~/.kube/config)")
    if in_pod():
        ns = ""
        try:
            with open(os.path.join(SERVICE_ACCOUNT_DIR, "namespace"), encoding="utf-8") as f:
                ns = f.read().strip()
        except OSError:
            pass
        host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"  # IPv6
        cluster = KubeCluster(
            server=f"https://{host}:{os.environ.get('KUBERNETES_SERVICE_PORT') or '443'}",
            name="in-cluster",
            certificate_authority=os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt"),
            in_cluster=True,
        )
        return KubeCredentials(token_file=os.path.join(SERVICE_ACCOUNT_DIR, "token"), namespace=ns, source="the pod's ServiceAccount", cluster=cluster)
    return KubeCredentials()


def resolve_kubernetes(
    namespace: Optional[str] = None,
    config_file: Optional[str] = None,
    context: Optional[str] = None,
    client_configuration: Any = None,
    *,
    kiln_config: Optional[str] = None,
    kiln_context: Optional[str] = None,
    server: Optional[str] = None,
    need_token: bool = True,
) -> Context:
    """The context of a client made from a Kubeflow ``KubernetesBackendConfig``.

    The API server is ``server``, else ``KILN_SERVER`` or the Kiln configuration's (as
    :func:`resolve` reads it), else ``KILN_API_SERVER``, else the one the cluster publishes in
    the ConfigMap ``kube-public/kiln-info`` (:func:`discover_api_server`), read with the
    kubeconfig context's credentials or the pod's; its ``caBundle`` is trusted for an https URL
    unless ``KILN_CA_FILE`` names a CA.
    The token is ``KILN_TOKEN``/``KILN_TOKEN_FILE``'s; else, when the backend configuration names
    a kubeconfig (``config_file`` or ``context``) or a ``client_configuration``, or the Kiln
    configuration has no token, that of ``client_configuration``, the kubeconfig context (its
    token, token file or exec plugin) or the pod's ServiceAccount; else the Kiln configuration's.
    A kubeconfig context that has only a client certificate is refused: Kiln takes bearer tokens.
    The namespace is ``namespace``, else ``KILN_NAMESPACE`` or the Kiln context's, else the
    kubeconfig context's (or the pod's), else ``default``.
    """
    ctx = resolve(kiln_config, kiln_context, require_server=False)
    if server:
        ctx.server = server
    if not ctx.server and os.environ.get(ENV_API_SERVER):
        ctx.server = os.environ[ENV_API_SERVER]
    # No URL given: the cluster of the kubeconfig (or the pod) says where Kiln is.
    discover = not ctx.server
    explicit = bool(config_file or context or client_configuration is not None)
    from_env = bool(os.environ.get(ENV_TOKEN) or os.environ.get(ENV_TOKEN_FILE))
    # need_token=False: the caller brings its own (TrainerClient(token=...)).
    want_token = need_token and not from_env and (explicit or not (ctx.token or ctx.token_file))
    creds = KubeCredentials()
    if want_token and client_configuration is not None:
        creds.token = _configuration_token(client_configuration)
    want_token = want_token and not creds.token
    kc = KubeCredentials()
    if want_token or discover or not (namespace or ctx.namespace):
        try:
            # Discovery reads the cluster with the kubeconfig's credentials, whatever calls Kiln.
            kc = kube_credentials(config_file, context, token=want_token or discover)
        except ConfigError:
            # A kubeconfig nobody asked for, read for a namespace only, may be broken at no cost.
            if config_file or context or want_token or discover:
                raise
        creds.namespace = kc.namespace
        if want_token:
            creds.token, creds.token_file, creds.source = kc.token, kc.token_file, kc.source
            if not (kc.token or kc.token_file) and kc.cluster is not None and kc.cluster.has_client_certificate():
                raise ConfigError(
                    f"{kc.source} authenticates with a client certificate, which Kiln's API server does not take "
                    "(it authenticates bearer tokens): give its user a token, e.g. `kubectl create token SERVICEACCOUNT "
                    f"--namespace NAMESPACE` as the user's `token:` or in {ENV_TOKEN}, or use a Kiln context (`kiln config set-context`)"
                )
    if creds.token or creds.token_file:
        ctx.token, ctx.token_file = creds.token, creds.token_file
    ctx.namespace = namespace or ctx.namespace or creds.namespace or "default"
    if discover:
        path = kiln_config or default_path()
        kiln_cfg = f"no server in the Kiln configuration {path}" if os.path.exists(path) else f"no Kiln configuration ({path})"
        ctx.server, ca = discover_api_server(kc, f"Kiln's API server: no {ENV_SERVER}, {kiln_cfg}, no {ENV_API_SERVER}, and ")
        if ca and ctx.server.startswith("https:") and not ctx.certificate_authority:
            ctx.certificate_authority_data = ca
    return ctx


def discover_api_server(creds: KubeCredentials, tried: str = "") -> Tuple[str, str]:
    """Kiln's API server URL and the PEM of its CA (or ``""``) as the cluster of ``creds``
    publishes them: the ConfigMap ``kube-public/kiln-info``, read with ``creds`` (its token, or
    its cluster's client certificate) in at most ``DISCOVERY_TIMEOUT`` seconds. In a pod (the
    in-cluster configuration) its ``apiServerInClusterURL``, else ``apiServerURL``; elsewhere its
    ``apiServerURL``, else ``apiServerInClusterURL`` if its host resolves. ``tried`` begins every
    error's message, which ends with the fix."""
    import ssl

    prefix = tried or "finding Kiln's API server: "
    fix = f"set {ENV_API_SERVER} to its URL"
    cluster = creds.cluster
    if cluster is None:
        raise ConfigError(
            f"{prefix}no kubeconfig (KUBECONFIG, ~/.kube/config) and no pod ServiceAccount to ask a cluster with: "
            f"{fix}, e.g. https://kiln.example.com, or run `kiln config set-context`"
        )
    if not cluster.server:
        raise ConfigError(f"{prefix}the cluster {cluster.name!r} of {creds.source} has no server: {fix}")
    cm = f"ConfigMap {INFO_NAMESPACE}/{INFO_NAME}"
    at = f"the cluster at {cluster.server}"
    status, body = _get_info(creds, prefix, at)
    if status != 200:
        detail = f"{status}: {_status_message(body)}"
        if status == 404:
            raise ConfigError(
                f"{prefix}{at} has no {cm} (is Kiln installed? `helm install kiln ./charts/kiln --namespace kiln-system "
                f"--create-namespace`; a Kiln that does not publish it needs {ENV_API_SERVER}, set to its URL)"
            )
        if status == 403:
            raise ConfigError(
                f"{prefix}{creds.source or 'this client'} may not read the {cm} of {at} ({detail}): Kiln's chart lets every "
                f"authenticated user read it; ask the cluster's admin, or {fix}"
            )
        if status == 401:
            raise ConfigError(
                f"{prefix}{at} did not accept the credentials of {creds.source or 'this client'} ({detail}): renew them "
                f"(`kubectl get configmap {INFO_NAME} --namespace {INFO_NAMESPACE}` checks them), or {fix}"
            )
        raise ConfigError(f"{prefix}reading the {cm} of {at} failed ({detail}): {fix}")
    try:
        doc = json.loads(body.decode("utf-8"))
        data = doc.get("data") or {}
        if not isinstance(data, dict):
            raise ValueError("its data is not a mapping")
    except (UnicodeDecodeError, ValueError, AttributeError) as e:
        raise ConfigError(f"{prefix}{at} answered the read of its {cm} with no ConfigMap ({e}): {fix}") from None
    outside = str(data.get(INFO_URL) or "").strip()
    inside = str(data.get(INFO_IN_CLUSTER_URL) or "").strip()
    if cluster.in_cluster:
        key, url = (INFO_IN_CLUSTER_URL, inside) if inside else (INFO_URL, outside)
    else:
        key, url = (INFO_URL, outside) if outside or not _resolves(inside) else (INFO_IN_CLUSTER_URL, inside)
    if not url:
        why = f"and its {INFO_IN_CLUSTER_URL} {inside} does not resolve from here" if inside else f"or {INFO_IN_CLUSTER_URL}"
        raise ConfigError(
            f"{prefix}the {cm} of {at} has no {INFO_URL} {why}: set the chart's apiserver.url to the URL Kiln is "
            f"reached at from outside the cluster (`helm upgrade kiln ./charts/kiln --reuse-values --set apiserver.url=https://...`), or {fix}"
        )
    if not _is_url(url):
        raise ConfigError(f"{prefix}the {key} of the {cm} of {at} is {url!r}, not an http(s) URL: fix it in the chart's values, or {fix}")
    ca = str(data.get(INFO_CA_BUNDLE) or "").strip() if url.startswith("https:") else ""
    if ca:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=ca)
        except (ssl.SSLError, ValueError) as e:
            raise ConfigError(f"{prefix}the {INFO_CA_BUNDLE} of the {cm} of {at} holds no PEM certificate ({e}): fix it, or set {ENV_CA_FILE}") from None
    return url, ca


def _get_info(creds: KubeCredentials, prefix: str, at: str) -> Tuple[int, bytes]:
    """The status and body of GET kube-public/kiln-info from the cluster of ``creds``."""
    import http.client
    import socket
    import ssl
    import urllib.parse

    from kiln._connect import USER_AGENT

    assert creds.cluster is not None
    cluster = creds.cluster
    server = cluster.server if "://" in cluster.server else "https://" + cluster.server
    if not _is_url(server):
        raise ConfigError(
            f"{prefix}the cluster {cluster.name!r} of {creds.source} has the server {cluster.server!r}, not an http(s) URL: "
            f"fix the kubeconfig, or set {ENV_API_SERVER} to Kiln's URL"
        )
    u = urllib.parse.urlsplit(server)
    host, port = u.hostname or "", u.port
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    token = creds.token
    if not token and creds.token_file:
        try:
            with open(creds.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as e:
            raise ConfigError(f"{prefix}reading the token of {creds.source}: {e}; fix it, or set {ENV_API_SERVER} to Kiln's URL") from None
    if token:
        headers["Authorization"] = "Bearer " + token
    conn: http.client.HTTPConnection
    if u.scheme == "https":
        conn = http.client.HTTPSConnection(host, port or 443, timeout=DISCOVERY_TIMEOUT, context=_kube_tls(creds, prefix))
    else:
        conn = http.client.HTTPConnection(host, port or 80, timeout=DISCOVERY_TIMEOUT)
    try:
        conn.request("GET", f"{u.path.rstrip('/')}/api/v1/namespaces/{INFO_NAMESPACE}/configmaps/{INFO_NAME}", headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read(1 << 20)
    except (socket.timeout, TimeoutError):
        raise ConfigError(f"{prefix}{at} did not answer in {DISCOVERY_TIMEOUT:g} s (the read of its ConfigMap {INFO_NAMESPACE}/{INFO_NAME}): set {ENV_API_SERVER} to Kiln's URL") from None
    except ssl.SSLCertVerificationError as e:
        raise ConfigError(
            f"{prefix}{at} presented a certificate that the certificate authority of {creds.source} does not sign "
            f"({e.verify_message}): fix the kubeconfig, or set {ENV_API_SERVER} to Kiln's URL"
        ) from None
    except (OSError, http.client.HTTPException) as e:
        raise ConfigError(f"{prefix}{at} cannot be reached (to read its ConfigMap {INFO_NAMESPACE}/{INFO_NAME}): {e}; set {ENV_API_SERVER} to Kiln's URL") from None
    finally:
        conn.close()


def _kube_tls(creds: KubeCredentials, prefix: str) -> Any:
    """The ssl.SSLContext kubectl would call the cluster of ``creds`` with: its CA (or none
    checked, with insecure-skip-tls-verify) and its user's client certificate. The certificate
    and key given as data go through private temporary files, removed once loaded."""
    import ssl
    import tempfile

    assert creds.cluster is not None
    c = creds.cluster
    what = "the pod's in-cluster configuration" if c.in_cluster else f"the cluster {c.name!r} of {creds.source}"
    try:
        if c.insecure_skip_tls_verify:
            tls = ssl.create_default_context()
            tls.check_hostname = False
            tls.verify_mode = ssl.CERT_NONE
        elif c.certificate_authority_data:
            tls = ssl.create_default_context(cadata=_decode_pem(c.certificate_authority_data, "certificate-authority-data", text=True))
        elif c.certificate_authority:
            tls = ssl.create_default_context(cafile=c.certificate_authority)
        else:
            tls = ssl.create_default_context()
    except (OSError, ssl.SSLError, ValueError) as e:
        raise ConfigError(f"{prefix}the certificate authority of {what}: {e}; fix the kubeconfig, or set {ENV_API_SERVER} to Kiln's URL") from None
    # As kubectl (Go's crypto/x509) checks a cluster's certificate, not Python 3.13's stricter way.
    tls.verify_flags &= ~ssl.VERIFY_X509_STRICT
    if c.has_client_certificate():
        temporary: List[str] = []

        def private_file(data: str, key: str) -> str:
            fd, path = tempfile.mkstemp(prefix="kiln-kube-", suffix=".pem")  # mode 0600
            temporary.append(path)
            with os.fdopen(fd, "wb") as f:
                f.write(_decode_pem(data, key))
            return path

        try:
            cert = c.client_certificate or private_file(c.client_certificate_data, "client-certificate-data")
            key = c.client_key or (private_file(c.client_key_data, "client-key-data") if c.client_key_data else None)
            tls.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError, ValueError) as e:
            raise ConfigError(f"{prefix}the client certificate of {creds.source}: {e}; fix the kubeconfig, or set {ENV_API_SERVER} to Kiln's URL") from None
        finally:
            for path in temporary:
                try:
                    os.remove(path)
                except OSError:
                    pass
    return tls


def _decode_pem(data: str, key: str, text: bool = False) -> Any:
    """A kubeconfig's base64 ``*-data`` value: PEM (str with ``text``), or DER bytes."""
    import base64
    import binascii

    try:
        raw = base64.b64decode(data)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"{key}: not base64: {e}") from None
    if text and b"-----BEGIN" in raw:
        return raw.decode("ascii", "replace")
    return raw


def _status_message(body: bytes) -> str:
    """The message of a Kubernetes Status, else the start of the body."""
    try:
        doc = json.loads(body.decode("utf-8"))
        if isinstance(doc, dict) and doc.get("message"):
            return str(doc["message"])
    except (UnicodeDecodeError, ValueError):
        pass
    return body.decode("utf-8", "replace").strip()[:300] or "no message"


def _is_url(url: str) -> bool:
    import urllib.parse

    try:
        u = urllib.parse.urlsplit(url)
        return u.scheme in ("http", "https") and bool(u.hostname) and (u.port or 0) >= 0
    except ValueError:
        return False


def _resolves(url: str) -> bool:
    """Whether the host of ``url`` has an address from here (an in-cluster URL, outside)."""
    import socket
    import urllib.parse

    if not url:
        return False
    try:
        u = urllib.parse.urlsplit(url)
        if not u.hostname:
            return False
        socket.getaddrinfo(u.hostname, u.port or (443 if u.scheme == "https" else 80), type=socket.SOCK_STREAM)
        return True
    except (OSError, ValueError, UnicodeError):
        return False


def _configuration_token(cfg: Any) -> str:
    """The bearer token of a ``kubernetes.client.Configuration`` (its ``api_key``), read by
    attribute so that the kubernetes package need not be installed."""
    keys = getattr(cfg, "api_key", None) or {}
    prefixes = getattr(cfg, "api_key_prefix", None) or {}
    for name in ("authorization", "BearerToken"):
        value = keys.get(name) if isinstance(keys, dict) else None
        if value:
            value = str(value)
            prefix = prefixes.get(name, "") if isinstance(prefixes, dict) else ""
            if value.lower().startswith("bearer "):
                return value[len("bearer ") :].strip()
            if not prefix or prefix.lower() == "bearer":
                return value.strip()
    return ""


def _kubeconfig_paths() -> List[str]:
    env = os.environ.get("KUBECONFIG")
    if env:
        return [os.path.expanduser(p) for p in env.split(os.pathsep) if p]
    return [os.path.join(os.path.expanduser("~"), ".kube", "config")]


def _from_kubeconfig(paths: List[str], context: Optional[str], token: bool = True) -> KubeCredentials:
    # Several files merge as kubectl merges them: the first to set a value, or name an entry, wins.
    # Relative paths in an entry are relative to the file that holds it.
    current = ""
    named: Dict[str, Dict[str, Tuple[Dict[str, Any], str]]] = {"contexts": {}, "users": {}, "clusters": {}}
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                doc = parse_yaml(f.read(), path)
        except OSError as e:
            raise ConfigError(f"reading kubeconfig: {e}") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{path}: not a kubeconfig (want a mapping with contexts and users)")
        current = current or str(doc.get("current-context") or "")
        base = os.path.dirname(os.path.abspath(path))
        for kind, inner in (("contexts", "context"), ("users", "user"), ("clusters", "cluster")):
            for entry in doc.get(kind) or []:
                if isinstance(entry, dict) and entry.get("name") and entry["name"] not in named[kind]:
                    value = entry.get(inner)
                    named[kind][entry["name"]] = (value if isinstance(value, dict) else {}, base)
    name = context or current
    where = ", ".join(paths)
    if not name:
        raise ConfigError(f"kubeconfig {where}: no current-context; name one with KubernetesBackendConfig(context=...)")
    if name not in named["contexts"]:
        raise ConfigError(f"kubeconfig {where}: no context {name!r} (it has {', '.join(sorted(named['contexts'])) or 'none'})")
    ctx = named["contexts"][name][0]
    user, user_base = named["users"].get(str(ctx.get("user") or ""), ({}, ""))
    cluster_name = str(ctx.get("cluster") or "")
    cl, cl_base = named["clusters"].get(cluster_name, ({}, ""))
    cluster = KubeCluster(
        server=str(cl.get("server") or ""),
        name=cluster_name,
        certificate_authority=_kube_path(cl.get("certificate-authority"), cl_base),
        certificate_authority_data=str(cl.get("certificate-authority-data") or ""),
        insecure_skip_tls_verify=cl.get("insecure-skip-tls-verify") in (True, "true"),
        client_certificate=_kube_path(user.get("client-certificate"), user_base),
        client_certificate_data=str(user.get("client-certificate-data") or ""),
        client_key=_kube_path(user.get("client-key"), user_base),
        client_key_data=str(user.get("client-key-data") or ""),
    )
    out = KubeCredentials(namespace=str(ctx.get("namespace") or ""), source=f"kubeconfig context {name!r}", cluster=cluster)
    if not token:
        return out
    if user.get("token"):
        out.token = str(user["token"])
    elif user.get("tokenFile"):
        out.token_file = _kube_path(user["tokenFile"], user_base)
    elif isinstance(user.get("exec"), dict):
        out.token = _exec_token(user["exec"], name)
    return out


def _kube_path(value: Any, base: str) -> str:
    """A path of a kubeconfig entry: ``~`` expanded, relative to its file's directory."""
    if not value:
        return ""
    path = os.path.expanduser(str(value))
    return path if os.path.isabs(path) or not base else os.path.join(base, path)


def _exec_token(spec: Dict[str, Any], context: str) -> str:
    """The token an exec credential plugin prints (kubectl's client-go protocol): aws, gcloud,
    kubelogin and the like."""
    import json
    import subprocess

    command = spec.get("command")
    if not command:
        raise ConfigError(f"kubeconfig context {context!r}: exec has no command")
    env = dict(os.environ)
    for e in spec.get("env") or []:
        if isinstance(e, dict) and e.get("name"):
            env[str(e["name"])] = str(e.get("value") or "")
    api_version = str(spec.get("apiVersion") or "client.authentication.k8s.io/v1")
    env["KUBERNETES_EXEC_INFO"] = json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}})
    try:
        out = subprocess.run([str(command), *[str(a) for a in spec.get("args") or []]], env=env, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(f"kubeconfig context {context!r}: running its credential plugin {command}: {e}") from None
    if out.returncode != 0:
        raise ConfigError(f"kubeconfig context {context!r}: its credential plugin {command} failed: {out.stderr.strip()[:500]}")
    try:
        token = json.loads(out.stdout)["status"]["token"]
    except (ValueError, KeyError, TypeError):
        raise ConfigError(f"kubeconfig context {context!r}: its credential plugin {command} printed no token (Kiln needs a bearer token)") from None
    return str(token)


# A kubeconfig is YAML as kubectl writes it (block mappings and sequences, plain and quoted
# scalars, flow collections on one line) or JSON. This reads that much; a block scalar (| or >)
# or an anchor is refused with its line.

_KEY = re.compile(r"""^(?P<key>"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^'"\s#][^:#]*?)\s*:(?:\s+(?P<rest>.*))?$""")


def parse_yaml(text: str, path: str = "<yaml>") -> Any:
    """A YAML document of block mappings, block sequences and one-line scalars or flow
    collections (what kubectl writes), or JSON; the values as JSON would give them."""
    stripped = text.strip()
    if stripped.startswith("{"):
        import json

        try:
            return json.loads(stripped)
        except ValueError as e:
            raise ConfigError(f"{path}: not JSON: {e}") from None
    lines: List[Tuple[int, int, str]] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw).rstrip()
        if not line.strip() or line.strip() in ("---", "..."):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if line[indent:indent + 1] == "\t":
            raise ConfigError(f"{path}:{n}: tabs are not allowed for indentation in YAML")
        lines.append((n, indent, line[indent:]))
    if not lines:
        return None
    value, i = _block(lines, 0, lines[0][1], path)
    if i < len(lines):
        raise ConfigError(f"{path}:{lines[i][0]}: unexpected indentation")
    return value


def _block(lines: List[Tuple[int, int, str]], i: int, indent: int, path: str) -> Tuple[Any, int]:
    if lines[i][2] == "-" or lines[i][2].startswith("- "):
        return _sequence(lines, i, indent, path)
    if _KEY.match(lines[i][2]):
        return _mapping(lines, i, indent, path)
    n, _, content = lines[i]
    return _value(content, path, n), i + 1


def _sequence(lines: List[Tuple[int, int, str]], i: int, indent: int, path: str) -> Tuple[List[Any], int]:
    out: List[Any] = []
    while i < len(lines) and lines[i][1] == indent and (lines[i][2] == "-" or lines[i][2].startswith("- ")):
        n, _, content = lines[i]
        item = content[1:].lstrip(" ")
        if not item:
            if i + 1 < len(lines) and lines[i + 1][1] > indent:
                value, i = _block(lines, i + 1, lines[i + 1][1], path)
            else:
                value, i = None, i + 1
        else:
            # "- key: value" opens a mapping whose keys line up with "key".
            lines[i] = (n, indent + len(content) - len(item), item)
            value, i = _block(lines, i, lines[i][1], path)
        out.append(value)
    return out, i


def _mapping(lines: List[Tuple[int, int, str]], i: int, indent: int, path: str) -> Tuple[Dict[str, Any], int]:
    out: Dict[str, Any] = {}
    while i < len(lines) and lines[i][1] == indent:
        n, _, content = lines[i]
        m = _KEY.match(content)
        if not m or content.startswith("- "):
            raise ConfigError(f"{path}:{n}: cannot read {content!r}: want `key: value`")
        key = _value(m.group("key"), path, n)
        rest = m.group("rest")
        i += 1
        if rest:
            out[str(key)] = _value(rest, path, n)
        elif i < len(lines) and (lines[i][1] > indent or (lines[i][1] == indent and (lines[i][2] == "-" or lines[i][2].startswith("- ")))):
            out[str(key)], i = _block(lines, i, lines[i][1], path)
        else:
            out[str(key)] = None
    if i < len(lines) and lines[i][1] > indent:
        raise ConfigError(f"{path}:{lines[i][0]}: unexpected indentation")
    return out, i


def _value(text: str, path: str, n: int) -> Any:
    v = text.strip()
    if v[:1] in ("|", ">", "&", "*", "!"):
        raise ConfigError(f"{path}:{n}: {v!r}: block scalars, anchors and tags are not read here; write the value on one line or use JSON")
    if v[:1] in "[{":
        return _flow(v, path, n)
    if len(v) >= 2 and v[0] == v[-1] == "'":
        return v[1:-1].replace("''", "'")
    if len(v) >= 2 and v[0] == v[-1] == '"':
        import json

        try:
            return json.loads(v)
        except ValueError:
            raise ConfigError(f"{path}:{n}: cannot read the quoted value {v}") from None
    if v in ("true", "True", "TRUE"):
        return True
    if v in ("false", "False", "FALSE"):
        return False
    if v in ("null", "Null", "NULL", "~", ""):
        return None
    if re.fullmatch(r"[-+]?[0-9]+", v):
        return int(v)
    return v


def _flow(v: str, path: str, n: int) -> Any:
    """A one-line flow collection: [a, b], {k: v}, nested, of plain or quoted scalars."""
    pos = 0

    def skip() -> None:
        nonlocal pos
        while pos < len(v) and v[pos] == " ":
            pos += 1

    def item(stops: str) -> Any:
        nonlocal pos
        skip()
        if pos < len(v) and v[pos] in "[{":
            return collection()
        start = pos
        quote = v[pos] if pos < len(v) and v[pos] in "'\"" else ""
        if quote:
            pos += 1
            while pos < len(v) and not (v[pos] == quote and v[pos - 1] != "\\"):
                pos += 1
            pos += 1
        else:
            while pos < len(v) and v[pos] not in stops:
                pos += 1
        return _value(v[start:pos], path, n)

    def collection() -> Any:
        nonlocal pos
        opening = v[pos]
        pos += 1
        closing = "]" if opening == "[" else "}"
        out: Any = [] if opening == "[" else {}
        skip()
        if pos < len(v) and v[pos] == closing:
            pos += 1
            return out
        while pos < len(v):
            if opening == "[":
                out.append(item(",]"))
            else:
                key = item(":,}")
                skip()
                if pos < len(v) and v[pos] == ":":
                    pos += 1
                    out[str(key)] = item(",}")
                else:
                    out[str(key)] = None
            skip()
            if pos < len(v) and v[pos] == ",":
                pos += 1
                continue
            if pos < len(v) and v[pos] == closing:
                pos += 1
                return out
            break
        raise ConfigError(f"{path}:{n}: cannot read the flow collection {v!r}")

    value = collection()
    skip()
    if pos != len(v):
        raise ConfigError(f"{path}:{n}: cannot read {v!r}")
    return value
