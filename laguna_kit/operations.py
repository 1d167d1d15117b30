"""Operations pyinfra lacks, written like its own: read facts, yield only what is needed."""

from __future__ import annotations

import io
import json

from pyinfra import host
from pyinfra.api import OperationError, operation
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.files import FileContents
from pyinfra.facts.server import Command
from pyinfra.operations import files

APT_ENV = "DEBIAN_FRONTEND=noninteractive"
APT_INSTALL = ("apt-get install -y -q --no-install-recommends "
               "-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold")


def deep_merge(base: dict, wanted: dict) -> dict:
    """`wanted` laid over `base`: nested dicts merge, anything else is replaced."""
    out = dict(base)
    for key, value in wanted.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def read_json(path: str):
    lines = host.get_fact(FileContents, path=path)
    if lines is None:
        return None
    text = "\n".join(lines)
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OperationError(f"{path} on {host.name} is not valid JSON ({exc}); fix or remove it, "
                             f"the kit merges into it and will not overwrite it") from None


@operation()
def json_merged(path: str, wanted: dict, mode: str = "644"):
    """Merge `wanted` into the JSON object at `path`, keeping every key others wrote there."""
    current = read_json(path)
    if current is not None and not isinstance(current, dict):
        raise OperationError(f"{path} on {host.name} holds JSON that is not an object")
    merged = deep_merge(current or {}, wanted)
    if current is not None and merged == current:
        host.noop(f"{path} already holds {sorted(wanted)}")
        return
    yield from files.put._inner(src=io.StringIO(json.dumps(merged, indent=4) + "\n"), dest=path, mode=mode)


def _missing(packages: list[str]) -> list[str]:
    """Packages (optionally `name=version`) not installed at the wanted version."""
    installed = host.get_fact(DebPackages)
    out = []
    for spec in packages:
        name, _, version = spec.partition("=")
        if name not in installed or (version and version not in installed[name]):
            out.append(spec)
    return out


@operation()
def apt_present(packages: list[str], hold: bool = False):
    """Install what is missing, refreshing the index only then (so a converged box runs nothing).

    `hold` pins the installed versions (apt-mark hold) so unattended upgrades cannot swap a driver
    or runtime under running GPU containers.
    """
    missing = _missing(packages)
    if missing:
        yield f"{APT_ENV} apt-get update -q"
        yield f"{APT_ENV} {APT_INSTALL} {' '.join(missing)}"
    if hold:
        names = [p.partition("=")[0] for p in packages]
        held = set((host.get_fact(Command, command="apt-mark showhold") or "").split())
        todo = [n for n in names if n not in held]
        if todo:
            yield f"apt-mark hold {' '.join(todo)}"
    if not missing and not hold:
        host.noop(f"installed: {', '.join(packages)}")
