"""laguna_kit/boxtools/rejoin.py: a router (or monitor) a deploy could not reach is let back in by
the firewall watch from the box's own tailnet status (issue 37 #13), and only that host.

The status is shaped as Tailscale's `tailscale status --json` (ipn/ipnstate: Status.Peer maps node
keys to PeerStatus{PublicKey, HostName, DNSName, TailscaleIPs, Online}); the set files are what
the kit's own operation writes (its fixtures)."""

import json

from laguna_kit.boxtools import firewall, rejoin
from tests.unit.fixtures import case, uploads

OP = "firewall.fleet_peers_allowed"
KEY = "nodekey:" + "ab" * 32


def peer(name, ips, key=KEY, online=True):
    return {"PublicKey": key, "HostName": name, "TailscaleIPs": ips, "Online": online}


def status(*peers):
    return {"Self": {"HostName": "gpu-1"}, "Peer": {p["PublicKey"]: p for p in peers}}


def written_by_the_op(name):
    doc = case(f"{OP}/{name}.json")
    return doc["args"]["peers_file"], uploads(OP, doc)[doc["args"]["peers_file"]].decode()


def test_the_router_back_is_written_exactly_as_the_next_deploy_writes_it(tmp_path):
    path, gone = written_by_the_op("router-not-found-empties-the-set-an-old-router-held")
    _, known = written_by_the_op("router-on-the-tailnet-opens-the-api-to-it")
    assert "add element" not in gone and f"key={KEY}" in gone  # the key an earlier deploy saw
    f = tmp_path / "fleet-router.nft"
    f.write_text(gone)
    waiting = rejoin.wanted([str(f)])
    assert list(waiting.values())[0][:3] == ("fleet_router", "router-old", KEY)
    back = status(peer("router", ["100.90.9.2", "fd7a:115c:a1e0::90:9"]))
    new = rejoin.written(waiting, back)[str(f)]
    # the router's known-case file names it by its status now; after the watch the next deploy
    # writes the same elements, header and key
    assert [ln for ln in new.splitlines() if not ln.startswith("# rejoin")] == [
        ln for ln in known.splitlines() if not ln.startswith("# rejoin")
    ]
    f.write_text(new)
    assert rejoin.wanted([str(f)]) == {}  # a set with its elements waits for nothing


def test_only_the_host_named_is_let_in_and_only_with_tailnet_addresses(tmp_path):
    f = tmp_path / "fleet-router.nft"
    f.write_text(
        "# Managed by the laguna kit: the fleet router rt\n"
        f"{rejoin.UNKNOWN}\n" + rejoin.rejoin_line("fleet_router", "rt", "-") + "\n"
    )
    waiting = rejoin.wanted([str(f)])
    # by name (no key known): one online peer of that name, nothing else
    assert rejoin.written(waiting, status(peer("other", ["100.90.9.3"]))) == {}
    assert rejoin.written(waiting, status(peer("rt", ["100.90.9.2"], online=False))) == {}
    two = status(peer("rt", ["100.90.9.2"]), peer("RT", ["100.90.9.4"], key="nodekey:" + "cd" * 32))
    assert rejoin.written(waiting, two) == {}  # a second peer took its name: not told apart
    forged = status(peer("rt", ["0.0.0.0/0 } ; flush ruleset"]))
    assert rejoin.written(waiting, forged) == {}
    assert rejoin.written(waiting, status(peer("rt", ["8.8.8.8"]))) == {}
    ok = rejoin.written(waiting, status(peer("rt", ["100.90.9.2"])))[str(f)]
    assert "add element inet laguna_kit fleet_router_v4 { 100.90.9.2 }\n" in ok
    assert rejoin.UNKNOWN not in ok
    # by key: a peer with the router's name but not its key is not the router
    f.write_text(f.read_text().replace("key=-", f"key={KEY}"))
    waiting = rejoin.wanted([str(f)])
    impostor = peer("rt", ["100.90.9.5"], key="nodekey:" + "ee" * 32)
    assert rejoin.written(waiting, status(impostor)) == {}
    renamed = peer("rt-new-name", ["100.90.9.2"])
    assert "100.90.9.2" in rejoin.written(waiting, status(renamed))[str(f)]


def test_no_line_is_written_for_a_name_or_key_that_is_not_one():
    assert rejoin.rejoin_line("fleet_router", "rt; flush ruleset", "-") is None
    assert rejoin.rejoin_line("fleet_router", "rt", "nodekey:zz") is None
    assert rejoin.rejoin_line("fleet_router", "rt", "") == "# rejoin fleet_router name=rt key=-"


def test_the_watch_loads_and_confirms_the_rules_after_writing_the_set(tmp_path, monkeypatch):
    d = tmp_path / "firewall.d"
    d.mkdir()
    rules = tmp_path / "firewall.nft"
    rules.write_text("table inet laguna_kit {}\n")
    f = d / "fleet-router.nft"
    f.write_text(f"# head\n{rejoin.UNKNOWN}\n# rejoin fleet_router name=rt key=-\n")
    calls = []
    monkeypatch.setattr(firewall, "state", lambda r: {"table": "loaded"})
    monkeypatch.setattr(
        firewall,
        "nft",
        lambda *a, check=True: calls.append(a) or type("P", (), {"returncode": 0})(),
    )
    monkeypatch.setattr(firewall, "confirm", lambda r: calls.append(("confirm", r)))
    monkeypatch.setattr(
        firewall,
        "tailscale_status",
        lambda: json.loads(json.dumps(status(peer("rt", ["100.90.9.2"])))),
    )
    said = firewall.rejoined(str(rules))
    assert said and "let in again" in said
    assert calls == [("-c", "-f", str(rules)), ("-f", str(rules)), ("confirm", str(rules))]
    assert "fleet_router_v4 { 100.90.9.2 }" in f.read_text()
    calls.clear()
    assert firewall.rejoined(str(rules)) is None and calls == []  # nothing waits any more
