"""Binaries of an older Debian release, for the oldest tool versions the kit meets elsewhere.

Ubuntu 22.04's archive is not reachable here, but several of its tools are the very upstream
versions an older Debian release ships: bullseye's nginx 1.18.0 is jammy's nginx 1.18.0. This
fetches a few bullseye debs from Debian's own archive (deb.debian.org, the Packages index's
Filename and SHA256), once, into the harness cache, and unpacks them into one folder, so a test can
run the kit's exact invocation against that binary (with the folder's libraries).
"""

from __future__ import annotations

import hashlib
import lzma
import subprocess
import urllib.request
from pathlib import Path

from .errors import HarnessError
from .paths import build_lock, cache_dir

ARCHIVE = "http://deb.debian.org/debian"
SUITE = "bullseye"


def _index() -> dict[str, dict[str, str]]:
    url = f"{ARCHIVE}/dists/{SUITE}/main/binary-amd64/Packages.xz"
    with urllib.request.urlopen(url, timeout=120) as resp:
        text = lzma.decompress(resp.read()).decode()
    out = {}
    for stanza in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " "
        )
        if "Package" in fields:
            out[fields["Package"]] = fields
    return out


def unpacked(packages: list[str]) -> Path:
    """A folder with `packages` (bullseye's, amd64) unpacked in it, fetched once."""
    root = cache_dir() / f"{SUITE}-{'+'.join(sorted(packages))}"
    if (root / ".done").exists():
        return root
    with build_lock():
        if (root / ".done").exists():
            return root
        debs = cache_dir() / f"{SUITE}-debs"
        debs.mkdir(exist_ok=True)
        index = _index()
        root.mkdir(exist_ok=True)
        for name in packages:
            entry = index.get(name)
            if entry is None:
                raise HarnessError(f"{SUITE} has no package {name}")
            deb = debs / Path(entry["Filename"]).name
            if not deb.exists():
                with urllib.request.urlopen(f"{ARCHIVE}/{entry['Filename']}", timeout=300) as r:
                    data = r.read()
                if hashlib.sha256(data).hexdigest() != entry["SHA256"]:
                    raise HarnessError(f"{deb.name}: not the bytes Debian's index names")
                deb.write_bytes(data)
            subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
        (root / ".done").touch()
    return root


def library_path(root: Path) -> str:
    return ":".join(str(root / d) for d in ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu"))
