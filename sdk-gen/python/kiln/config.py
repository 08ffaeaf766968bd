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
server's URL from ``KILN_SERVER`` or ``KILN_API_SERVER`` (the cluster does not advertise it).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["Context", "ConfigError", "KubeCredentials", "default_path", "kube_credentials", "load", "parse_yaml", "resolve", "resolve_kubernetes"]

ENV_CONFIG = "KILN_CONFIG"
ENV_CONTEXT = "KILN_CONTEXT"
ENV_SERVER = "KILN_SERVER"
ENV_TOKEN = "KILN_TOKEN"
ENV_TOKEN_FILE = "KILN_TOKEN_FILE"
ENV_NAMESPACE = "KILN_NAMESPACE"
ENV_CA_FILE = "KILN_CA_FILE"
#: The API server's URL for a client configured from a kubeconfig alone (KILN_SERVER wins).
ENV_API_SERVER = "KILN_API_SERVER"

#: Where a pod's ServiceAccount token and namespace are mounted.
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"

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
class KubeCredentials:
    """What a kubeconfig context (or a pod) gives a Kiln client: a bearer token or a file that
    holds one, and a namespace. ``source`` says where they came from, for messages."""

    token: str = ""
    token_file: str = ""
    namespace: str = ""
    source: str = ""


def in_pod() -> bool:
    """Whether this process runs in a Kubernetes pod with a ServiceAccount token."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(os.path.join(SERVICE_ACCOUNT_DIR, "token"))


def kube_credentials(config_file: Optional[str] = None, context: Optional[str] = None, *, token: bool = True) -> KubeCredentials:
    """The credentials the Kubeflow SDK would use: a kubeconfig's (``config_file``, else
    ``KUBECONFIG``'s files, else ``~/.kube/config``; ``context``, else its current context) when
    one is named or this is not a pod, else the pod's ServiceAccount token and namespace. Kiln's
    API server takes bearer tokens only: a context that authenticates with a client certificate
    gives no token (and ``namespace`` alone). ``token=False`` reads the namespace only (no
    credential plugin runs)."""
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
        return KubeCredentials(token_file=os.path.join(SERVICE_ACCOUNT_DIR, "token"), namespace=ns, source="the pod's ServiceAccount")
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
    :func:`resolve` reads it), else ``KILN_API_SERVER``: a cluster does not advertise Kiln's URL.
    The token is ``KILN_TOKEN``/``KILN_TOKEN_FILE``'s; else, when the backend configuration names
    a kubeconfig (``config_file`` or ``context``) or a ``client_configuration``, or the Kiln
    configuration has no token, that of ``client_configuration``, the kubeconfig context (its
    token, token file or exec plugin) or the pod's ServiceAccount; else the Kiln configuration's.
    The namespace is ``namespace``, else ``KILN_NAMESPACE`` or the Kiln context's, else the
    kubeconfig context's (or the pod's), else ``default``.
    """
    ctx = resolve(kiln_config, kiln_context, require_server=False)
    if server:
        ctx.server = server
    if not ctx.server and os.environ.get(ENV_API_SERVER):
        ctx.server = os.environ[ENV_API_SERVER]
    explicit = bool(config_file or context or client_configuration is not None)
    from_env = bool(os.environ.get(ENV_TOKEN) or os.environ.get(ENV_TOKEN_FILE))
    # need_token=False: the caller brings its own (TrainerClient(token=...)).
    want_token = need_token and not from_env and (explicit or not (ctx.token or ctx.token_file))
    creds = KubeCredentials()
    if want_token and client_configuration is not None:
        creds.token = _configuration_token(client_configuration)
    want_token = want_token and not creds.token
    if want_token or not (namespace or ctx.namespace):
        try:
            kc = kube_credentials(config_file, context, token=want_token)
        except ConfigError:
            # A kubeconfig nobody asked for, read for a namespace only, may be broken at no cost.
            if config_file or context or want_token:
                raise
            kc = KubeCredentials()
        creds.namespace = kc.namespace
        if want_token:
            creds.token, creds.token_file, creds.source = kc.token, kc.token_file, kc.source
    if creds.token or creds.token_file:
        ctx.token, ctx.token_file = creds.token, creds.token_file
    ctx.namespace = namespace or ctx.namespace or creds.namespace or "default"
    if not ctx.server:
        raise ConfigError(
            f"no Kiln API server configured: set {ENV_API_SERVER} (or {ENV_SERVER}) to its URL, e.g. https://kiln.example.com, "
            "or run `kiln config set-context`; a Kubernetes cluster does not tell where Kiln's API server is"
        )
    return ctx


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
    current = ""
    named: Dict[str, Dict[str, Dict[str, Any]]] = {"contexts": {}, "users": {}}
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                doc = parse_yaml(f.read(), path)
        except OSError as e:
            raise ConfigError(f"reading kubeconfig: {e}") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{path}: not a kubeconfig (want a mapping with contexts and users)")
        current = current or str(doc.get("current-context") or "")
        for kind, inner in (("contexts", "context"), ("users", "user")):
            for entry in doc.get(kind) or []:
                if isinstance(entry, dict) and entry.get("name") and entry["name"] not in named[kind]:
                    named[kind][entry["name"]] = entry.get(inner) or {}
    name = context or current
    where = ", ".join(paths)
    if not name:
        raise ConfigError(f"kubeconfig {where}: no current-context; name one with KubernetesBackendConfig(context=...)")
    ctx = named["contexts"].get(name)
    if ctx is None:
        raise ConfigError(f"kubeconfig {where}: no context {name!r} (it has {', '.join(sorted(named['contexts'])) or 'none'})")
    user = named["users"].get(str(ctx.get("user") or ""), {})
    out = KubeCredentials(namespace=str(ctx.get("namespace") or ""), source=f"kubeconfig context {name!r}")
    if not token:
        return out
    if user.get("token"):
        out.token = str(user["token"])
    elif user.get("tokenFile"):
        out.token_file = os.path.expanduser(str(user["tokenFile"]))
    elif isinstance(user.get("exec"), dict):
        out.token = _exec_token(user["exec"], name)
    return out


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
