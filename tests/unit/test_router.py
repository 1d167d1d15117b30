"""The fleet router's pieces without a host: what the router and the boxes are given, and that a
converged router is left alone (the harness tier runs them for real: tests/test_router.py)."""

import hashlib
import json

import pytest
from pyinfra.api import FileUploadCommand, OperationError

from laguna_kit import fleet
from laguna_kit.boxtools import firewall
from laguna_kit.operations.files import kit_file

from .fixtures import HERE, operation_output, run_operation

CASES = HERE / "operations"


def case(name):
    return json.loads((CASES / name).read_text())


def uploads(name, doc):
    """{dest: bytes} of an operation's uploads."""
    commands, _ = operation_output(name, doc)
    return {
        c.dest.removesuffix(".laguna-new"): c.src.getvalue()
        for c in commands
        if isinstance(c, FileUploadCommand)
    }


def key_one():
    return case("router.router_configured/first-deploy-writes-checks-then-reloads.json")["env"][
        "LAGUNA_API_KEYS"
    ]


def test_router_config_names_the_boxes_on_the_tailnet_and_only_key_hashes(monkeypatch):
    doc = case("router.router_configured/first-deploy-writes-checks-then-reloads.json")
    monkeypatch.setenv("LAGUNA_API_KEYS", doc["env"]["LAGUNA_API_KEYS"])
    files = uploads("router.router_configured", doc)
    cfg = files["/etc/laguna-kit/haproxy.cfg"].decode()
    assert "server gpu-1 100.90.1.2:8080 maxconn 4" in cfg  # the champion's max_num_seqs
    assert "gpu-2" not in cfg  # not on the tailnet yet: left out, not guessed
    assert "balance hdr(X-Session-Id)" in cfg and "hash-type consistent" in cfg
    assert "agent-check agent-port 8091" in cfg and "prometheus-exporter" in cfg
    keys = files["/etc/laguna-kit/router-api-keys.sha256"].decode()
    key = doc["env"]["LAGUNA_API_KEYS"]
    assert key not in keys and key not in cfg
    assert keys == hashlib.sha256(f"Bearer {key}".encode()).hexdigest() + "\n"


def test_a_converged_router_is_left_alone(monkeypatch):
    doc = case("router.router_configured/first-deploy-writes-checks-then-reloads.json")
    monkeypatch.setenv("LAGUNA_API_KEYS", doc["env"]["LAGUNA_API_KEYS"])
    files = uploads("router.router_configured", doc)
    (fact_key,) = doc["facts"]["files.FileHashes"]
    modes = {"/etc/laguna-kit/haproxy.cfg": "644", "/etc/laguna-kit/router-api-keys.sha256": "600"}
    doc["facts"]["files.FileHashes"][fact_key] = {
        path: {"sha256": hashlib.sha256(data).hexdigest(), "mode": modes[path]}
        for path, data in files.items()
    }
    commands, noops = run_operation("router.router_configured", doc)
    assert commands == [] and noops[-1].endswith("are current"), (commands, noops)
    # a new key: only the key file changes, and the router reloads
    monkeypatch.setenv("LAGUNA_API_KEYS", f"{key_one()},key-two-0123456789abcdef")
    commands, _ = run_operation("router.router_configured", doc)
    assert {"upload": "/etc/laguna-kit/router-api-keys.sha256.laguna-new"} in commands
    assert {"upload": "/etc/laguna-kit/haproxy.cfg.laguna-new"} not in commands
    assert commands[-1].startswith("if systemctl is-active --quiet laguna-router.service")


def test_the_box_firewall_lets_in_the_router_addresses_read_now():
    doc = case("router.router_peers_allowed/router-on-the-tailnet-opens-the-api-to-it.json")
    text = uploads("router.router_peers_allowed", doc)[doc["args"]["peers_file"]].decode()
    assert "add element inet laguna_kit fleet_router_v4 { 100.90.9.2 }" in text
    assert "add element inet laguna_kit fleet_router_v6 { fd7a:115c:a1e0::90:9 }" in text


def test_rules_with_a_router_close_the_api_to_other_tailnet_peers():
    base = dict(ssh_port=22, open_tcp=[], open_udp=[], agent_port=8091, api_port=8080)
    base.update(peers_glob="/etc/laguna-kit/firewall.d/*.nft", ssh_tailnet_only=False)
    alone = kit_file("files/laguna-firewall.nft.j2", **base, fleet_router=False).decode()
    routed = kit_file("files/laguna-firewall.nft.j2", **base, fleet_router=True).decode()
    assert "fleet_router" not in alone and 'include "' not in alone
    lines = [line.strip() for line in routed.splitlines()]
    drop = 'iifname "tailscale0" tcp dport { 8080, 8091 } counter drop'
    accept_all = 'iifname "tailscale0" ip saddr 100.64.0.0/10 accept'
    # the router's accept and the drop for every other peer come before the tailnet's accept-all
    assert lines.index(drop) < lines.index(accept_all)
    assert 'include "/etc/laguna-kit/firewall.d/*.nft"' in lines


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


def test_api_keys_from_the_environment_and_a_file(tmp_path):
    f = tmp_path / "keys"
    f.write_text("# the fleet's keys\nkey-from-file-0123456789 # laptop\n\n")
    env = {"K": "key-one-0123456789abcdef, key-two-0123456789abcdef key-one-0123456789abcdef"}
    assert fleet.api_keys("K", str(f), env) == [
        "key-from-file-0123456789",
        "key-one-0123456789abcdef",
        "key-two-0123456789abcdef",
    ]
    with pytest.raises(OperationError, match="set K=<key>"):
        fleet.api_keys("K", "", {})
    with pytest.raises(OperationError, match="router_api_keys_file"):
        fleet.api_keys("K", str(tmp_path / "missing"), env)
