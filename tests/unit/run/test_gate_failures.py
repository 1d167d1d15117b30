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


class _Host:  # pyinfra's hosts are compared and kept in sets by identity
    def __init__(self, name, state):
        self.name, self.state = name, state


def _host(name, state=None):
    return _Host(name, state)


def test_a_roll_stops_after_any_failed_host_or_a_router_lost_mid_roll(monkeypatch):
    """Issue 37 #13: the roll restarted the next box while the router was rebooting, and that box
    came back with a firewall without its router."""
    state = State({})
    state.failed_hosts, state.activated_hosts = set(), set()
    box1, box2, router = _host("gpu-1", state), _host("gpu-2", state), _host("rt", state)
    state.activated_hosts |= {box1, box2, router}
    alive = {"rt": True}

    def read(other):  # what pyinfra does when a fact cannot be read: the host fails
        if not alive[other.name]:
            state.failed_hosts.add(other)
        return ["100.64.0.9"] if alive[other.name] else None

    monkeypatch.setattr(gate_failures.fleet, "tailnet_ips", read)
    assert gate_failures.roll_stoppers(state, box2, router) == []
    assert gate_failures.roll_stoppers(state, box2, None) == []
    assert gate_failures.roll_stoppers(state, router, router) == []
    alive["rt"] = False
    assert gate_failures.roll_stoppers(state, box2, router) == [
        "the router rt cannot be reached now (it could at the start)"
    ]
    assert gate_failures.roll_stoppers(state, box2, router) == ["rt failed"]  # already known
    # a host that failed for any reason stops the roll; a box never stops itself
    state.failed_hosts = {box1}
    assert gate_failures.roll_stoppers(state, box2, None) == ["gpu-1 failed"]
    assert gate_failures.roll_stoppers(state, box1, None) == []
    # a router not reached at the start (outside --limit, down before the run) is not "lost"
    state.failed_hosts, state.activated_hosts = set(), {box1, box2}
    assert gate_failures.roll_stoppers(state, box2, router) == []


def test_a_router_that_raises_is_not_reachable(monkeypatch):
    state = State({})
    state.failed_hosts, state.activated_hosts = set(), set()
    router = _host("rt", state)

    def broken(other):
        raise OSError("Socket is closed")

    monkeypatch.setattr(gate_failures.fleet, "tailnet_ips", broken)
    assert not gate_failures.reachable(router)
