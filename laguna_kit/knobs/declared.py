"""The kit's knobs as data, read from group_data/all.py for code that runs outside pyinfra
(the harness, docs rendering, scripts). Inside a deploy, read them from ``host.data``."""

from __future__ import annotations

import ast

from .. import KIT_ROOT

GROUP_DATA = KIT_ROOT / "group_data" / "all.py"


def defaults() -> dict:
    """The literal assignments of group_data/all.py (it holds only literals, by design)."""
    tree = ast.parse(GROUP_DATA.read_text())
    out = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def knob_docs() -> dict[str, str]:
    """Each knob's one-line why (its trailing comment), for DEPLOYMENT.md and error messages."""
    docs = {}
    for line in GROUP_DATA.read_text().splitlines():
        if "=" in line and "#" in line and not line.startswith((" ", "#")):
            name = line.split("=", 1)[0].strip()
            docs[name] = line.split("#", 1)[1].strip()
    return docs


def knobs_of(data) -> dict:
    """Every knob's value for one host (pyinfra host.data), as a plain dict for rendering."""
    return {name: data.get(name) for name in defaults()}


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
