"""laguna_kit/boxtools/release/drain.py: behind a router, a restart is drained first and undrained
by its passing gate; a failed gate stays drained; an operator's drain outlives a deploy."""

import os

from laguna_kit.boxtools.release import activate, drain, validate

from .on_disk import incoming


def test_a_restart_behind_a_router_is_drained_first_and_undrained_by_its_gate(
    fleet_box, monkeypatch
):
    incoming(fleet_box)
    activate.install_incoming(fleet_box)
    # the running requests were waited for with the marker in place, before the restart
    assert fleet_box.seen and all(r == "release 1 starting" for r in fleet_box.seen)
    assert fleet_box.drained()["by"] == "kit"
    monkeypatch.setattr(validate, "gate", lambda store, force=False: True)
    assert validate.validate(fleet_box, auto_rollback=True)
    assert fleet_box.drained() is None


def test_a_failed_gate_stays_drained_and_an_operators_drain_outlives_a_deploy(
    fleet_box, monkeypatch
):
    incoming(fleet_box)
    activate.install_incoming(fleet_box)
    monkeypatch.setattr(validate, "gate", lambda store, force=False: False)
    assert not validate.validate(fleet_box, auto_rollback=False)
    assert fleet_box.drained()["reason"] == "release 1 failed its gate"
    drain.drain(fleet_box, "maintenance", by="operator")
    monkeypatch.setattr(validate, "gate", lambda store, force=False: True)
    assert validate.validate(fleet_box, auto_rollback=False)
    assert fleet_box.drained()["by"] == "operator"  # a passed gate does not end it
    drain.undrain(fleet_box, by="operator")
    assert fleet_box.drained() is None


def test_without_a_router_nothing_is_drained(box):
    incoming(box)
    activate.install_incoming(box)
    assert box.drained() is None and not os.path.exists(os.path.join(box.kit_dir, "router-drain"))


def test_vllms_running_and_waiting_requests_are_what_is_in_flight(monkeypatch):
    class Answer:
        def __init__(self, text):
            self.text = text

        def read(self):
            return self.text.encode()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    page = (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="laguna"} 2.0\n'
        'vllm:num_requests_waiting{model_name="laguna"} 1.0\nvllm:other 9\n'
    )
    monkeypatch.setattr(drain.urllib.request, "urlopen", lambda url, timeout: Answer(page))
    assert drain.in_flight(8080) == 3

    def refused(url, timeout):
        raise OSError("connection refused")

    monkeypatch.setattr(drain.urllib.request, "urlopen", refused)
    assert drain.in_flight(8080) == 0


def test_the_drain_waits_for_the_routers_own_checks_not_any_connection(box, monkeypatch, capsys):
    """Issue 37 #7: a local user connecting to the agent raises the socket's accepted count,
    never the router's checks the agent counts: the wait is not cut short by them."""
    import os

    from laguna_kit.boxtools.release import drain

    counted = os.path.join(box.kit_dir, "1.checks")
    os.makedirs(box.kit_dir, exist_ok=True)
    with open(counted, "w") as fh:
        fh.write("7")
    agent = {"api_port": 8080, "socket": "a.socket", "checks": counted, "check_interval_ms": 100}
    clock = {"t": 0.0}
    monkeypatch.setattr(drain.time, "monotonic", lambda: clock["t"])
    monkeypatch.setattr(drain, "accepted", lambda unit: int(clock["t"] * 1000))  # anyone's
    monkeypatch.setattr(drain.time, "sleep", lambda s: clock.update(t=clock["t"] + s))
    drain.wait_for_the_router(agent)
    assert clock["t"] >= drain.ROUTER_WAIT_S and "did not ask" in capsys.readouterr().err

    def router_asks(s):
        clock["t"] += s
        with open(counted, "w") as fh:
            fh.write(str(7 + int(clock["t"] * 10)))

    clock["t"] = 0.0
    monkeypatch.setattr(drain.time, "sleep", router_asks)
    drain.wait_for_the_router(agent)
    assert clock["t"] < 1 and "did not ask" not in capsys.readouterr().err
