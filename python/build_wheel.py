#!/usr/bin/env python3
"""Build the jupyter-collab-mcp wheel with the standard library only (no build backend, no network).

    python3 python/build_wheel.py --binary bin/static/jupyter-collab-mcp --version 0.1.0 --out dist

The wheel holds the jupyter_collab_mcp package, the static binary (jupyter_collab_mcp/bin/, mode
0755), the data file that enables the server extension
(<name>.data/data/etc/jupyter/jupyter_server_config.d/jupyter_collab_mcp.json), a console script,
and a RECORD with sha256 digests. The binary must be a static ELF for the target architecture: it
has no libc dependency, so one wheel serves manylinux and musllinux alike.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import struct
import sys
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DIST_NAME = "jupyter-collab-mcp"
PKG = "jupyter_collab_mcp"
SUMMARY = "An MCP server that works on live Jupyter notebooks as a real-time collaborator, as a jupyter-server extension"
REQUIRES = ["jupyter_server>=2.4,<3", "jupyter-collaboration>=5.0,<6"]
DATA_FILE = "etc/jupyter/jupyter_server_config.d/jupyter_collab_mcp.json"
# GOARCH -> (ELF e_machine, wheel platform tags)
ARCHES = {
    "amd64": (62, ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "musllinux_1_1_x86_64"]),
    "arm64": (183, ["manylinux_2_17_aarch64", "manylinux2014_aarch64", "musllinux_1_1_aarch64"]),
}
PT_INTERP = 3


def check_static_elf(path: Path, goarch: str) -> None:
    """Refuse anything but a 64-bit little-endian ELF for goarch without a program interpreter."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        sys.exit(f"{path}: not a 64-bit little-endian ELF executable")
    machine = struct.unpack_from("<H", data, 0x12)[0]
    want = ARCHES[goarch][0]
    if machine != want:
        sys.exit(f"{path}: ELF machine {machine}, expected {want} for GOARCH={goarch}")
    phoff = struct.unpack_from("<Q", data, 0x20)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        if struct.unpack_from("<I", data, phoff + i * phentsize)[0] == PT_INTERP:
            sys.exit(f"{path}: dynamically linked (has PT_INTERP); build with CGO_ENABLED=0")


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def metadata(version: str) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {DIST_NAME}",
        f"Version: {version}",
        f"Summary: {SUMMARY}",
        "Requires-Python: >=3.9",
        *(f"Requires-Dist: {r}" for r in REQUIRES),
        "Classifier: Framework :: Jupyter",
        "Classifier: Operating System :: POSIX :: Linux",
        "Description-Content-Type: text/markdown",
    ]
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    return "\n".join(lines) + "\n\n" + readme


def build(binary: Path, version: str, goarch: str, out: Path) -> Path:
    if not re.fullmatch(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[a-z0-9.]+)?", version):
        sys.exit(f"version {version!r} is not a PEP 440 version")
    if goarch not in ARCHES:
        sys.exit(f"GOARCH {goarch!r} not supported (one of {', '.join(ARCHES)})")
    check_static_elf(binary, goarch)
    tags = ARCHES[goarch][1]
    wheel_name = f"{PKG}-{version}-py3-none-{'.'.join(tags)}.whl"
    dist_info = f"{PKG}-{version}.dist-info"
    data_dir = f"{PKG}-{version}.data"

    files: list[tuple[str, bytes, int]] = []  # (archive path, content, unix mode)
    for src in sorted((HERE / PKG).glob("*.py")):
        if src.name == "_version.py":
            continue
        files.append((f"{PKG}/{src.name}", src.read_bytes(), 0o644))
    files.append((f"{PKG}/_version.py", f'__version__ = "{version}"\n'.encode(), 0o644))
    files.append((f"{PKG}/bin/jupyter-collab-mcp", binary.read_bytes(), 0o755))
    config = HERE / "jupyter-config" / "jupyter_server_config.d" / "jupyter_collab_mcp.json"
    files.append((f"{data_dir}/data/{DATA_FILE}", config.read_bytes(), 0o644))
    files.append((f"{dist_info}/METADATA", metadata(version).encode(), 0o644))
    wheel_meta = ["Wheel-Version: 1.0", "Generator: jupyter-collab-mcp build_wheel.py", "Root-Is-Purelib: false"]
    wheel_meta += [f"Tag: py3-none-{t}" for t in tags]
    files.append((f"{dist_info}/WHEEL", ("\n".join(wheel_meta) + "\n").encode(), 0o644))
    files.append(
        (
            f"{dist_info}/entry_points.txt",
            f"[console_scripts]\njupyter-collab-mcp = {PKG}.__main__:main\n".encode(),
            0o644,
        )
    )
    files.append((f"{dist_info}/top_level.txt", f"{PKG}\n".encode(), 0o644))

    record = [f"{name},{record_hash(data)},{len(data)}" for name, data, _ in files]
    record.append(f"{dist_info}/RECORD,,")
    files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))

    # Reproducible: fixed timestamps (SOURCE_DATE_EPOCH when set), fixed order.
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    stamp = max(epoch, 315532800)
    date_time = time.gmtime(stamp)[:6]
    out.mkdir(parents=True, exist_ok=True)
    target = out / wheel_name
    tmp = target.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in files:
            info = zipfile.ZipInfo(name, date_time=date_time)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    tmp.replace(target)
    return target


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", required=True, type=Path, help="static jupyter-collab-mcp binary")
    ap.add_argument("--version", required=True, help="PEP 440 version of the wheel")
    ap.add_argument("--goarch", default="amd64", help="architecture of the binary (amd64, arm64)")
    ap.add_argument("--out", default=Path("dist"), type=Path, help="output directory")
    args = ap.parse_args()
    print(build(args.binary, args.version, args.goarch, args.out))


if __name__ == "__main__":
    main()
