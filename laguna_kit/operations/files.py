"""Files the kit shares with others on the box: merged into, never replaced."""

from __future__ import annotations

import io
import json

from pyinfra import host
from pyinfra.api import OperationError, operation
from pyinfra.facts.files import FileContents
from pyinfra.operations import files as pyinfra_files


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
    """The JSON at `path` on the box: None when the file is missing, {} when it is empty."""
    lines = host.get_fact(FileContents, path=path)
    if lines is None:
        return None
    text = "\n".join(lines)
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OperationError(
            f"{path} on {host.name} is not valid JSON ({exc}); fix or remove it, "
            f"the kit merges into it and will not overwrite it"
        ) from None


@operation()
def json_merged(path: str, wanted: dict, mode: str = "644"):
    """
    Merge `wanted` into the JSON object at `path`, keeping every key others wrote there.

    + path: the JSON file (created when missing; invalid JSON is refused, never overwritten)
    + wanted: keys to lay over it (nested objects merge)
    + mode: the file's mode when written

    **Example:**

    .. code:: python

        json_merged(name="daemon.json", path="/etc/docker/daemon.json",
                    wanted={"log-driver": "journald"})
    """
    current = read_json(path)
    if current is not None and not isinstance(current, dict):
        raise OperationError(f"{path} on {host.name} holds JSON that is not an object")
    merged = deep_merge(current or {}, wanted)
    if current is not None and merged == current:
        host.noop(f"{path} already holds {sorted(wanted)}")
        return
    yield from pyinfra_files.put._inner(
        src=io.StringIO(json.dumps(merged, indent=4) + "\n"), dest=path, mode=mode
    )
