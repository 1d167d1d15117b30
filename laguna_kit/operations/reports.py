"""Operator views: they report, never change."""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.api import operation
from pyinfra.facts.server import Command

from ..boxtools.layout import FIREWALL_RULES, ROUTER_ADMIN_SOCKET, ROUTER_UNIT
from ..domain import fleet, replicas
from ..facts.checkpoints import DownloadProgress
from ..facts.network import FirewallState, TailscaleStatus
from ..facts.releases import ReleaseState
from ..facts.reports import ServingStatus
from ..facts.router import RouterStatus
from ..facts.server import FreeSpaceMiB
from ..run import download_progress, memo, status_table, summary

FIREWALL_PROBLEMS = {
    "missing": "the kit's firewall table inet laguna_kit is MISSING: the API and vLLM's other "
    "ports may "
    f"answer off the tailnet; load it now: nft -f {FIREWALL_RULES} (then re-run deploy.py)",
    "altered": "the kit's firewall table inet laguna_kit was ALTERED since the kit loaded it: "
    "re-run "
    "deploy.py to load the kit's rules again",
    "unrecorded": "the kit's firewall table inet laguna_kit is loaded but the kit has no record of "
    "it: "
    "re-run deploy.py",
}


def perf_line(perf: dict | None, recipe: dict) -> str:
    """The running release's figures (from its first passing gate) beside the recipe's."""
    if not perf:
        return "figures: none recorded for this release (it has not passed a gate with this kit)"
    acc = perf.get("acceptance")
    return (
        f"figures of release {perf.get('release')} ({perf.get('time')}): decode "
        f"{summary._figure(perf.get('decode_tok_s'), 'tok/s')} (recipe "
        f"{summary._figure(recipe.get('decode_tok_s'), 'tok/s')}), time to first token at the "
        f"gate's long prompt {summary._figure(perf.get('ttft_s'), 's')}"
        + (f", DFlash acceptance {acc:.1%}" if acc is not None else "")
    )


def serving_lines(st: dict, rel: dict, unit: str, recipe: dict | None = None) -> list[str]:
    """The status report's lines, from the ServingStatus and ReleaseState facts."""
    cur, gate, drain = rel["current"] or {}, rel["gate"] or {}, rel.get("drain")
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
        f"GPU memory used, total MiB, °C: {st.get('gpu_mem') or 'nvidia-smi unavailable'}",
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
        perf_line(rel.get("perf"), recipe or {}),
    ] + (
        [
            f"drained at the fleet router since {drain.get('time')}: {drain.get('reason')}"
            + (" (undrain: tasks/undrain.py --limit BOX)" if drain.get("by") == "operator" else "")
        ]
        if drain
        else []
    )


def download_lines(records: list[dict]) -> list[str]:
    """A line per checkpoint download running, or ended without its files verified."""
    out = []
    for rec in records:
        if rec.get("unit") in ("active", "activating"):
            out.append(f"download running: {download_progress.line(rec)}")
        elif rec.get("state") != "verified":
            out.append(
                f"PROBLEM: download ended unfinished: {download_progress.line(rec)}; re-run "
                "deploy.py to resume (the bytes received are kept)"
            )
    return out


@operation()
def serving_reported(
    kit_dir: str,
    unit: str,
    port: int,
    rules: str = FIREWALL_RULES,
    recipe: dict | None = None,
    state_dir: str | None = None,
    replica: int = 1,
    model_dir: str = "",
):
    """
    Log unit state, release, digest, GPU memory, endpoint health, the last gate result, the
    firewall table's state (a missing or altered table is logged as a problem, by name) and a
    checkpoint download in progress (bytes done / total, rate, ETA) or ended unfinished.

    + kit_dir: the kit's folder on the box
    + unit: the serving unit
    + port: the API port (asked on 127.0.0.1)
    + rules: the kit's firewall rules file
    + recipe: the recipe's figures for the serving mode (``decode_tok_s``), shown beside the
      release's
    + state_dir: a replica's own releases (None: kit_dir, replica 1)
    + replica, model_dir: its row in the fleet's table (run/status_table.py): which replica, and
      where the free space is read ("": not read)

    **Example:**

    .. code:: python

        serving_reported(name="Serving status", kit_dir="/opt/laguna-kit",
                         unit="laguna-vllm.service", port=8080)
    """
    status = host.get_fact(ServingStatus, unit=unit, port=port)
    releases = host.get_fact(
        ReleaseState, kit_dir=kit_dir, unit=unit, **replicas.own_state(kit_dir, state_dir)
    )
    lines = serving_lines(status, dict(releases), unit, recipe)
    table = host.get_fact(FirewallState, kit_dir=kit_dir, rules=rules)["table"]
    problem = FIREWALL_PROBLEMS.get(table)
    lines.append(f"PROBLEM: {problem}" if problem else "firewall table inet laguna_kit: loaded")
    lines += download_lines(host.get_fact(DownloadProgress))
    free = host.get_fact(FreeSpaceMiB, paths=[model_dir])[model_dir]["mib"] if model_dir else None
    status_table.ROWS[(host.name, replica)] = status_table.row(
        host.name, replica, status, dict(releases), recipe or {}, free
    )
    for line in lines:
        (logger.warning if line.startswith("PROBLEM") else logger.info)(f"[{host.name}] {line}")
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


def router_lines(st: dict, unit: str, port: int) -> list[str]:
    """The router's status lines: its unit, then a line per box (a problem when none can serve)."""
    lines = [f"router {unit}: {st['unit']}; the fleet's endpoint on port {port} (tailnet)"]
    if st["unit"] != "active":
        lines.append(f"PROBLEM: the router is {st['unit']}: journalctl -u {unit}; re-run deploy.py")
    for s in st["servers"]:
        lines.append(
            f"box {s['name']}: {s['status']} (health check {s['check']}), {s['running']} running, "
            f"{s['queued']} queued, {s['served']} served"
        )
    if st["unit"] == "active" and not any(s["status"].startswith("UP") for s in st["servers"]):
        lines.append("PROBLEM: no box can take requests (each is down or drained)")
    return lines


@operation()
def router_reported(unit: str, admin_socket: str, port: int):
    """
    Log the fleet router's state and each box's as the router sees it (UP, DOWN, DRAIN, with
    running, queued and served requests); no box able to serve is logged as a problem.

    + unit: the router's systemd unit
    + admin_socket: HAProxy's admin socket
    + port: the fleet's port

    **Example:**

    .. code:: python

        router_reported(name="Router status", unit="laguna-router.service",
                        admin_socket="/run/laguna-router/admin.sock", port=8090)
    """
    state = host.get_fact(RouterStatus, unit=unit, admin_socket=admin_socket)
    status_table.ROUTER.update({s["name"]: s["status"] for s in state["servers"]})
    lines = router_lines(dict(state), unit, port)
    for line in lines:
        (logger.warning if line.startswith("PROBLEM") else logger.info)(f"[{host.name}] {line}")
    host.noop("; ".join(lines))
    yield from ()


@operation()
def deploy_summarized(
    kit_dir: str,
    unit: str,
    api_port: int,
    router_port: int,
    recipe: dict,
    served_model: str,
    keys_env: str = "",
    session_header: str = "",
    router_outside: str = "",
    replica_ports: list[int] | None = None,
):
    """
    Read, at the end of the run, what the deploy's summary shows for this host (laguna_kit/
    summary.py): its tailnet addresses, the serving release and its gate's figures; and, when the
    fleet's router is not in this run (--limit), whether it sends to this box at all.

    + kit_dir: the kit's folder on the box
    + unit: the serving unit
    + api_port: the box's API port
    + router_port: the fleet's port on the router
    + recipe: the recipe's figures for the mode ({"gate_prompt_tokens", "gate_s", "decode_tok_s"})
    + served_model: the model name clients ask for (the client snippet's)
    + keys_env, session_header: named in the router's line
    + router_outside: the router's host name when it is not in this run ("": it is, or none)
    + replica_ports: every replica's API port, replica 1's first (None: one replica)

    **Example:**

    .. code:: python

        deploy_summarized(name="Summary", kit_dir="/opt/laguna-kit", unit="laguna-vllm.service",
                          api_port=8080, router_port=8090, recipe={"decode_tok_s": 282.5},
                          served_model="laguna")
    """
    if not host.state.is_executing:
        host.noop("read at the end of the run")
        return
    roles = fleet.roles(host)
    # From this run's memory when nothing changed on the box since they were read (a converged
    # re-run asks the box nothing more for its summary); read afresh after any change.
    status = memo.fact(host, TailscaleStatus)
    running = status.get("BackendState") == "Running"
    record = {
        "gpu": "gpu" in roles,
        "router": "router" in roles,
        "tailnet": fleet.tailnet_addresses(status, host.name) if running else [],
        "api_port": api_port,
        "router_port": router_port,
        "recipe": recipe,
        "keys_env": keys_env,
        "session_header": session_header,
        "replica_ports": list(replica_ports or []),
        "model": served_model,
    }
    if record["gpu"]:
        st = memo.fact(host, ReleaseState, kit_dir=kit_dir, unit=unit)
        record.update(
            release=(st["state"] or {}).get("current"), current=st["current"], gate=st["gate"]
        )
        if router_outside:
            record.update(router_outside=router_outside, routed=_routed_by(router_outside))
    summary.RECORDS[host.name] = record
    host.noop("read for the summary")
    yield from ()


def _routed_by(router_name: str) -> bool | None:
    """Whether the router (not in this run) lists this box among its backends (None: unread)."""
    router = next((h for h in host.state.inventory if h.name == router_name), None)
    if router is None:
        return None
    try:
        st = router.get_fact(RouterStatus, unit=ROUTER_UNIT, admin_socket=ROUTER_ADMIN_SOCKET)
    except Exception as exc:  # noqa: BLE001 - an unreachable router is said, not fatal
        logger.warning(f"{router_name}: cannot read the router's backends ({exc})")
        return None
    if st.get("unit") != "active":
        return None
    return fleet.server_name(host.name) in {s["name"] for s in st["servers"]}
