"""A PEP 517 build backend for kiln-sdk, standard library only.

It builds a pure-Python wheel of the ``kiln`` package (and an sdist, and an editable
install), reading the project's name, version, description and Python requirement from
pyproject.toml. The archives are reproducible: fixed timestamps, sorted entries.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "kiln"
EPOCH = (1980, 1, 1, 0, 0, 0)


def _project() -> Dict[str, str]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        data = f.read()
    try:
        import tomllib  # Python 3.11+

        return {k: v for k, v in tomllib.loads(data.decode())["project"].items() if isinstance(v, str)}
    except ImportError:
        # Older Pythons: the [project] table's `key = "string"` lines are all this needs.
        out, section = {}, ""
        for line in data.decode().splitlines():
            m = re.match(r"^\[(.+)\]\s*$", line)
            if m:
                section = m.group(1)
                continue
            m = re.match(r'^([A-Za-z0-9_-]+)\s*=\s*"(.*)"\s*$', line)
            if section == "project" and m:
                out[m.group(1)] = m.group(2)
        return out


def _names() -> Tuple[str, str, str]:
    p = _project()
    name, version = p["name"], p["version"]
    return name, version, re.sub(r"[-_.]+", "_", name).lower()


def _metadata() -> str:
    p = _project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
        f"Summary: {p.get('description', '')}",
        f"Requires-Python: {p.get('requires-python', '>=3.9')}",
        f"License: {p.get('license', '')}",
    ]
    readme = os.path.join(ROOT, p.get("readme", "README.md"))
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _package_files() -> List[str]:
    files = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, PACKAGE)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith(".py") or fn == "py.typed":
                files.append(os.path.relpath(os.path.join(dirpath, fn), ROOT))
    return files


def _wheel(wheel_directory: str, entries: List[Tuple[str, bytes]]) -> str:
    name, version, dist = _names()
    info = f"{dist}-{version}.dist-info"
    entries = entries + [
        (f"{info}/METADATA", _metadata().encode()),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: kiln_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (f"{info}/top_level.txt", (PACKAGE + "\n").encode()),
    ]
    record = []
    for path, data in entries:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    filename = f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in entries:
            zi = zipfile.ZipInfo(path, EPOCH)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return filename


def _read(rel: str) -> bytes:
    with open(os.path.join(ROOT, rel), "rb") as f:
        return f.read()


# -- PEP 517 -------------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[dict] = None) -> str:
    _, version, dist = _names()
    info = f"{dist}-{version}.dist-info"
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    with open(os.path.join(metadata_directory, info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return info


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    return _wheel(wheel_directory, [(rel, _read(rel)) for rel in _package_files()])


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    # PEP 660: a .pth file that puts this tree on sys.path.
    return _wheel(wheel_directory, [("kiln_sdk_editable.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    name, version, dist = _names()
    base = f"{dist}-{version}"
    files = _package_files() + ["pyproject.toml", "README.md"] + [
        os.path.relpath(os.path.join(ROOT, "_build", f), ROOT) for f in sorted(os.listdir(os.path.join(ROOT, "_build"))) if f.endswith(".py")
    ]
    filename = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        entries = [(f"{base}/PKG-INFO", _metadata().encode())] + [(f"{base}/{rel}", _read(rel)) for rel in files if os.path.exists(os.path.join(ROOT, rel))]
        for path, data in entries:
            ti = tarfile.TarInfo(path)
            ti.size, ti.mtime, ti.mode = len(data), 0, 0o644
            tar.addfile(ti, io.BytesIO(data))
    return filename
