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
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

__all__ = ["Context", "ConfigError", "default_path", "load", "resolve"]

ENV_CONFIG = "KILN_CONFIG"
ENV_CONTEXT = "KILN_CONTEXT"
ENV_SERVER = "KILN_SERVER"
ENV_TOKEN = "KILN_TOKEN"
ENV_TOKEN_FILE = "KILN_TOKEN_FILE"
ENV_NAMESPACE = "KILN_NAMESPACE"
ENV_CA_FILE = "KILN_CA_FILE"

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


def resolve(path: Optional[str] = None, context: Optional[str] = None) -> Context:
    """The context a client uses: ``context`` (else ``KILN_CONTEXT``, else the file's current
    context) with the ``KILN_*`` variables applied over it."""
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
    if not out.server:
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
