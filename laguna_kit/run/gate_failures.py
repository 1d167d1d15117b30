"""A roll (`--serial`) stops at its first failed gate, failed host or lost router, whatever
pyinfra's prompt is answered.

Without `-y`, pyinfra 3.10 asks "One of more hosts failed, continue?" after a host fails and
Enter goes on to the next box (pyinfra_cli/cli.py `_set_fail_prompts`): a release that failed its
gate on one box would be rolled onto the next. The run remembers each box whose gate failed (a
state callback on the gate operation's error), and every later box refuses at its first operation.
So does a box after any host of the run failed (pyinfra's own failed hosts), and a box behind a
router that this run reached and now cannot (rebooted mid-roll): restarted then, the box would
come back with a firewall that has no router in it (fleet_peers_allowed fails closed).
"""

from __future__ import annotations

from pyinfra.api.state import BaseStateCallback

from ..domain import fleet

# The gate operations' names start so (tasks/validate.py, tasks/rollback.py).
GATE_OP = "Validation gate"


def failed_gates(state) -> list[str]:
    return sorted(getattr(state, "laguna_failed_gates", set()))


class GateFailures(BaseStateCallback):
    @staticmethod
    def operation_host_error(state, host, op_hash, retry_count=0, max_retries=0):
        try:
            names = state.get_op_meta(op_hash).names
        except (KeyError, AttributeError):
            return
        # pyinfra names an included task's operations "<task file> | <name>"
        if any(name.rsplit(" | ", 1)[-1].startswith(GATE_OP) for name in names):
            if not hasattr(state, "laguna_failed_gates"):
                state.laguna_failed_gates = set()
            state.laguna_failed_gates.add(host.name)


def roll_stoppers(state, host, router) -> list[str]:
    """Why the roll must not touch `host` now: one line per cause, [] when it may go on."""
    why = []
    lost = (
        router is not None
        and router is not host
        and router in getattr(state, "activated_hosts", ())
        and router not in state.failed_hosts
        and not reachable(router)
    )
    if lost:
        why.append(f"the router {router.name} cannot be reached now (it could at the start)")
    gates = [name for name in failed_gates(state) if name != host.name]
    why += [f"the gate failed on {name}" for name in gates]
    why += [
        f"{h.name} failed"
        for h in sorted(state.failed_hosts, key=lambda h: h.name)
        if h is not host and h.name not in gates and not (lost and h is router)
    ]
    return why


def reachable(other) -> bool:
    """`other` answers a command now (its tailnet status read fresh; a lost connection, a reboot,
    fails it in pyinfra's state too)."""
    try:
        fleet.tailnet_ips(other)
    except Exception:  # noqa: BLE001 - any failure to read is "not reachable"
        return False
    return other not in other.state.failed_hosts


def watch(state) -> None:
    """Register the callback once per run."""
    handlers = getattr(state, "callback_handlers", None)
    if handlers is not None and not any(isinstance(h, GateFailures) for h in handlers):
        state.add_callback_handler(GateFailures())
