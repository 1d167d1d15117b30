"""The kit's knobs as group_data/all.py declares them (`name: <shape> = value  # why`): one
declaration per knob holds its value, its shape and its why, so the defaults, the checks and the
docs cannot drift. For code that runs outside pyinfra (the checks, the harness, docs rendering,
scripts); inside a deploy, read the values from ``host.data``."""

from __future__ import annotations

import ast
import io
import runpy
import tokenize
from dataclasses import dataclass
from functools import cache

from .. import KIT_ROOT
from .shapes import Check, integer

GROUP_DATA = KIT_ROOT / "group_data" / "all.py"
# Per-run operator inputs (`--data rollback_to=3`, a hosts file): knobs with no default.
PER_RUN: dict[str, tuple[type, Check]] = {
    "rollback_to": (int, integer(1, 1 << 30)),
    "log_lines": (int, integer(1, 1 << 20)),
    "replica": (int, integer(1, 8)),  # tasks/drain.py, tasks/undrain.py: one replica of a box
}


@dataclass(frozen=True)
class Knob:
    name: str
    value: object  # the recipe's value (group_data's default)
    shape: Check  # what any value of it must be
    why: str  # its one-line why (its trailing comment)


@cache
def declared() -> dict[str, Knob]:
    """Every knob of group_data/all.py, in its order."""
    module = runpy.run_path(str(GROUP_DATA))
    shapes = module["__annotations__"]
    why = _comments()
    return {
        name: Knob(name, module[name], shapes[name], why.get(name, ""))
        for name in _names_in_order()
    }


def _names_in_order() -> list[str]:
    tree = ast.parse(GROUP_DATA.read_text())
    return [
        node.target.id
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    ]


def _comments() -> dict[str, str]:
    """Each knob's why: the comment on the first line of its declaration."""
    text = GROUP_DATA.read_text()
    first_line = {
        node.lineno: node.target.id
        for node in ast.parse(text).body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        name = first_line.get(tok.start[0])
        if tok.type == tokenize.COMMENT and name and name not in out:
            out[name] = tok.string.lstrip("#").strip()
    return out


def defaults() -> dict:
    """Every knob's value as group_data/all.py declares it (a fresh copy each call)."""
    import copy

    return {name: copy.deepcopy(k.value) for name, k in declared().items()}


def knob_docs() -> dict[str, str]:
    """Each knob's one-line why, for docs/reference.md and error messages."""
    return {name: k.why for name, k in declared().items()}


def shape_of(name: str) -> Check | None:
    """The shape a value of knob `name` must fit (None: no knob of that name)."""
    if name in PER_RUN:
        return PER_RUN[name][1]
    knob = declared().get(name)
    return knob.shape if knob else None


def knobs_of(data) -> dict:
    """Every knob's value for one host (pyinfra host.data), as a plain dict for rendering."""
    return {name: data.get(name) for name in declared()}


def checkpoint_pairs(data) -> list[tuple[str, str]]:
    """(repo, revision) of the target and its drafter, pinned together (host.data or a knobs
    dict)."""
    return [
        (data.get("target_repo"), data.get("target_revision")),
        (data.get("drafter_repo"), data.get("drafter_revision")),
    ]


def fetch_arguments(data) -> dict:
    """The box-side download's knobs, as checkpoint_fetch_started/checkpoint_synced take them."""
    return dict(
        endpoint=data.hf_endpoint,
        token_var=data.hf_token_env,
        kit_dir=data.kit_dir,
        workers=data.download_workers,
        margin_mib=data.checkpoint_free_margin_gib * 1024,
        rehash=data.checkpoint_rehash,
        mirror=data.checkpoint_mirror,
        retries=data.download_retries,
        backoff_max_s=data.download_backoff_max_s,
        read_timeout_s=data.download_read_timeout_s,
    )
