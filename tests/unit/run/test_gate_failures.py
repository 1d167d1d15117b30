"""laguna_kit/run/gate_failures.py: the run remembers a failed gate, so a roll stops there whatever
pyinfra's prompt is answered (the harness drives the prompt itself: tests/test_proof.py)."""

from types import SimpleNamespace

from laguna_kit.run import gate_failures


class State:
    def __init__(self, names):
        self.callback_handlers = []
        self.meta = {h: SimpleNamespace(names=set(n)) for h, n in names.items()}

    def add_callback_handler(self, handler):
        self.callback_handlers.append(handler)

    def get_op_meta(self, op_hash):
        return self.meta[op_hash]


def test_a_failed_gate_is_remembered_and_nothing_else_is():
    state = State(
        {
            "gate": [f"tasks/validate.py | {gate_failures.GATE_OP}: readiness"],
            "apt": ["tasks/docker.py | Install the Docker engine"],
        }
    )
    gate_failures.watch(state)
    gate_failures.watch(state)  # once per run
    (handler,) = state.callback_handlers
    handler.operation_host_error(state, SimpleNamespace(name="gpu-1"), "apt")
    assert gate_failures.failed_gates(state) == []
    handler.operation_host_error(state, SimpleNamespace(name="gpu-2"), "gate")
    handler.operation_host_error(state, SimpleNamespace(name="gpu-1"), "unknown-op")
    assert gate_failures.failed_gates(state) == ["gpu-2"]
