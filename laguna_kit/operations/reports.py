"""Operator views: they report, never change."""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.api import operation
from pyinfra.facts.server import Command

from ..facts.releases import ReleaseState
from ..facts.reports import ServingStatus


def serving_lines(st: dict, rel: dict, unit: str) -> list[str]:
    """The status report's lines, from the ServingStatus and ReleaseState facts."""
    cur, gate = rel["current"] or {}, rel["gate"] or {}
    spec = cur.get("spec") or {}
    lc = gate.get("long_context") or {}
    return [
        f"unit {unit}: {st.get('unit') or 'unknown'}; /health: HTTP "
        f"{st.get('health') or 'no answer'}",
        f"release {cur.get('number', 'none')} ({spec.get('mode', '-')}) since "
        f"{cur.get('created', '-')}: "
        f"{spec.get('image', '-')} {spec.get('image_digest') or ''}",
        f"target {str(spec.get('target_revision'))[:12]}, drafter "
        f"{str(spec.get('drafter_revision'))[:12]}",
        f"GPU memory used/total MiB: {st.get('gpu_mem') or 'nvidia-smi unavailable'}",
        (
            "last gate: "
            + ("passed" if gate.get("passed") else f"FAILED ({gate.get('error')})")
            + f" on release {gate.get('release')} at {gate.get('time')}"
            + (
                f": {lc.get('prompt_tokens')} prompt tokens in {lc.get('elapsed_s')} s"
                if lc
                else ""
            )
        )
        if gate
        else "last gate: none recorded",
    ]


@operation()
def serving_reported(kit_dir: str, unit: str, port: int):
    """
    Log unit state, release, digest, GPU memory, endpoint health and the last gate result.

    + kit_dir: the kit's folder on the box
    + unit: the serving unit
    + port: the API port (asked on 127.0.0.1)

    **Example:**

    .. code:: python

        serving_reported(name="Serving status", kit_dir="/opt/laguna-kit",
        unit="laguna-vllm.service", port=8080)
    """
    lines = serving_lines(
        host.get_fact(ServingStatus, unit=unit, port=port),
        host.get_fact(ReleaseState, kit_dir=kit_dir, unit=unit),
        unit,
    )
    for line in lines:
        logger.info(f"[{host.name}] {line}")
    host.noop("; ".join(lines))
    yield from ()


@operation()
def journal_reported(unit: str, lines: int):
    """
    Log the unit's journal: vLLM's own output (a crash loop's first failure is in here).

    + unit: the serving unit
    + lines: how many of the last lines

    **Example:**

    .. code:: python

        journal_reported(name="Journal", unit="laguna-vllm.service", lines=200)
    """
    text = (
        host.get_fact(
            Command, command=f"journalctl -u {unit} --no-pager -n {int(lines)} 2>&1 || true"
        )
        or ""
    )
    for line in text.splitlines():
        logger.info(f"[{host.name}] {line}")
    host.noop(f"{len(text.splitlines())} journal lines of {unit}")
    yield from ()
