"""laguna_kit/boxtools/firewall.py: the kit's table loaded with a self-revert, its state named, the
watch loading a flushed or hand-changed table again, and the included sets part of the table."""

from laguna_kit.boxtools import firewall


def test_firewall_revert_restores_the_previous_table_or_the_fallback(tmp_path, monkeypatch):
    calls, live = [], {"table": "table inet laguna_kit {\n  chain input {}\n}\n"}

    def fake_nft(*args, check=True):
        calls.append(("nft", *args))
        out = live["table"] if args[:2] == ("-s", "list") else ""
        rc = 0 if out or args[:2] != ("-s", "list") else 1
        return firewall.subprocess.CompletedProcess(args, rc, out, "")

    monkeypatch.setattr(firewall, "nft", fake_nft)
    monkeypatch.setattr(firewall.subprocess, "run", lambda cmd, **kw: calls.append(tuple(cmd)))
    rules, fallback = tmp_path / "fw.nft", tmp_path / "open.nft"
    rules.write_text("new rules\n")
    fallback.write_text("ssh open rules\n")
    firewall.load(str(rules), 60, str(fallback))
    saved = (tmp_path / "fw.nft.previous").read_text()
    assert saved.startswith("table inet laguna_kit\ndelete table inet laguna_kit\n")
    assert saved.endswith(live["table"])  # the table loaded before, never an empty one
    run = next(c for c in calls if c[0] == "systemd-run")
    assert "--on-active=60" in run and f"/usr/sbin/nft -f {rules}.previous" in run[-1]
    assert calls[-1] == ("nft", "-f", str(rules))
    live["table"] = ""  # nothing loaded before: the revert falls back to the SSH-open rules
    firewall.load(str(rules), 60, str(fallback))
    assert (tmp_path / "fw.nft.previous").read_text() == "ssh open rules\n"
    calls.clear()
    firewall.load(str(rules), None, None)  # rules that cannot cut SSH: no revert armed
    assert not any(c[0] == "systemd-run" for c in calls)


def test_firewall_state_names_a_missing_or_altered_table(tmp_path, monkeypatch):
    live = {"table": "T1"}
    monkeypatch.setattr(firewall, "live_table", lambda: live["table"] or None)
    monkeypatch.setattr(firewall.subprocess, "run", lambda *a, **k: None)
    rules = tmp_path / "fw.nft"
    rules.write_text("rules\n")
    assert firewall.state(str(rules)) == {"table": "unrecorded"}
    firewall.confirm(str(rules))
    assert firewall.state(str(rules)) == {"table": "loaded"}
    live["table"] = "T2"
    assert firewall.state(str(rules)) == {"table": "altered"}
    live["table"] = ""
    assert firewall.state(str(rules)) == {"table": "missing"}


def test_firewall_watch_loads_a_flushed_or_hand_changed_table_again(tmp_path, monkeypatch):
    """The watch between deploys: a table gone or changed by hand is loaded from the rules; a
    deploy or a self-revert under way (rules not confirmed yet) is left alone; a table that cannot
    be loaded stops serving."""
    live, stopped, loads = {"table": "T1"}, [], []

    def fake_nft(*args, check=True):
        loads.append(args)
        if live.get("broken"):
            return firewall.subprocess.CompletedProcess(args, 1, "", "syntax error")
        live["table"] = "T1"
        return firewall.subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(firewall, "live_table", lambda: live["table"] or None)
    monkeypatch.setattr(firewall, "nft", fake_nft)
    monkeypatch.setattr(  # (confirm's disarm of a revert timer is no stop of serving)
        firewall.subprocess, "run", lambda cmd, **kw: "revert" in cmd[-1] or stopped.append(cmd[-1])
    )
    rules = tmp_path / "fw.nft"
    rules.write_text("rules\n")
    assert firewall.restore(str(rules), ["laguna-vllm.service"]) is None  # unrecorded, present
    firewall.confirm(str(rules))
    assert firewall.restore(str(rules), ["laguna-vllm.service"]) is None and not loads
    live["table"] = ""  # nft flush ruleset
    assert "gone" in firewall.restore(str(rules), ["laguna-vllm.service"])
    assert loads == [("-f", str(rules))] and live["table"] == "T1" and not stopped
    live["table"] = "T2"  # nft delete rule ... by hand
    assert "changed by hand" in firewall.restore(str(rules), ["laguna-vllm.service"])
    loads.clear()
    rules.write_text("new rules, a deploy under way\n")
    live["table"] = "T3"
    assert firewall.restore(str(rules), ["laguna-vllm.service"]) is None and not loads
    firewall.confirm(str(rules))
    live.update(table="", broken=True)
    said = firewall.restore(str(rules), ["laguna-vllm.service", "laguna-router.service"])
    assert "could not be loaded again" in said and "syntax error" in said
    assert stopped == ["laguna-vllm.service", "laguna-router.service"]


def test_a_changed_include_is_a_changed_table(tmp_path):
    peers = tmp_path / "firewall.d"
    peers.mkdir()
    rules = tmp_path / "firewall.nft"
    rules.write_text(f'table inet laguna_kit {{}}\ninclude "{peers}/*.nft"\n')
    empty = firewall.sources(str(rules))
    (peers / "fleet-router.nft").write_text(
        "add element inet laguna_kit fleet_router_v4 { 1.2.3.4 }\n"
    )
    (peers / "fleet-router.nft.laguna-new").write_text("not read: not *.nft\n")
    one = firewall.sources(str(rules))
    assert one != empty and "1.2.3.4" in one and "not read" not in one
