"""Python packages in a venv on the box (Debian packages are pyinfra's DebPackages)."""

from __future__ import annotations

import re
import shlex

from pyinfra.api import FactBase

LIST = (
    "import importlib.metadata as m\n"
    "for d in m.distributions(): print(d.metadata['Name'] + '==' + d.version)"
)


def canonical(name: str) -> str:
    """PEP 503's normalized project name: huggingface_hub and Huggingface-Hub are one project."""
    return re.sub(r"[-_.]+", "-", name).lower()


class VenvPackages(FactBase[dict[str, str] | None]):
    """``{canonical name: version}`` installed in the venv at `venv`, None when there is no venv.
    Read by the venv's own Python (importlib.metadata): one start of Python, not pip's."""

    def command(self, venv):
        python = shlex.quote(f"{venv}/bin/python")
        return f"if [ -x {python} ]; then {python} -c {shlex.quote(LIST)}; else echo __none; fi"

    def process(self, output) -> dict[str, str] | None:
        if "__none" in output:
            return None
        out: dict[str, str] = {}
        for line in output:
            name, sep, version = line.strip().partition("==")
            if sep:
                out[canonical(name)] = version
        return out


class AptSourceURLs(FactBase[dict[str, list[str]]]):
    """``{file: [URL, ...]}``: every URL each apt source file names, one-line (``deb [...] URL``)
    and deb822 (``URIs: URL``) alike, under /etc/apt/sources.list and sources.list.d; what the
    kit's repositories are checked against (the same repository with another Signed-By breaks
    every `apt-get update`)."""

    @staticmethod
    def default() -> dict[str, list[str]]:
        return {}

    def command(self):
        return (
            "grep -rHoE 'https?://[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d "
            "2>/dev/null || true"
        )

    def process(self, output) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for line in output:
            path, sep, url = line.partition(":")
            if sep and path.startswith("/etc/apt/") and url:
                found.setdefault(path, []).append(url.rstrip("/"))
        return found


def files_naming(sources: dict[str, list[str]], repo: str, but: tuple[str, ...] = ()) -> list[str]:
    """The source files (other than `but`) that name `repo` (or a URL under it)."""
    want = repo.rstrip("/")
    return sorted(
        path
        for path, urls in sources.items()
        if path not in but and any(u == want or u.startswith(want + "/") for u in urls)
    )
