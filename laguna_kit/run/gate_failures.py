"""A roll (`--serial`) stops at its first failed gate, whatever pyinfra's prompt is answered.

Without `-y`, pyinfra 3.10 asks "One of more hosts failed, continue?" after a host fails and
Enter goes on to the next box (pyinfra_cli/cli.py `_set_fail_prompts`): a release that failed its
gate on one box would be rolled onto the next. The run remembers each box whose gate failed (a
state callback on the gate operation's error), and every later box refuses at its first operation.
"""

from __future__ import annotations

from pyinfra.api.state import BaseStateCallback

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


def watch(state) -> None:
    """Register the callback once per run."""
    handlers = getattr(state, "callback_handlers", None)
    if handlers is not None and not any(isinstance(h, GateFailures) for h in handlers):
        state.add_callback_handler(GateFailures())
