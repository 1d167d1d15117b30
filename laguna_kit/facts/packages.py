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
