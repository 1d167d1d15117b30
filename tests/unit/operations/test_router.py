"""laguna_kit/operations/router.py: what the router and the boxes are given, and a converged router
left alone (the harness tier runs them for real: tests/test_fleet_router.py)."""

import hashlib

import pytest
from pyinfra.api import OperationError

from ..fixtures import case, operation_output, run_operation, uploads


def key_one():
    return case("router.router_configured/first-deploy-writes-and-checks-its-files.json")["env"][
        "LAGUNA_API_KEYS"
    ]


def test_router_config_names_the_boxes_on_the_tailnet_and_only_key_hashes(monkeypatch):
    doc = case("router.router_configured/first-deploy-writes-and-checks-its-files.json")
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
    doc = case("router.router_configured/first-deploy-writes-and-checks-its-files.json")
    monkeypatch.setenv("LAGUNA_API_KEYS", doc["env"]["LAGUNA_API_KEYS"])
    files = uploads("router.router_configured", doc)
    (fact_key,) = doc["facts"]["systemd.UnitFiles"]
    modes = {
        "/etc/laguna-kit/router-api-keys.sha256": "600",
        "/etc/laguna-kit/router-metrics-key.sha256": "600",
    }
    state = doc["facts"]["systemd.UnitFiles"][fact_key]
    state["files"] = {  # every file as this run would write it, before the router last started
        path: {
            "sha256": hashlib.sha256(data).hexdigest(),
            "mode": modes.get(path, "644"),
            "mtime": 1,
        }
        for path, data in files.items()
    }
    state["units"]["laguna-router.service"] = {
        "loaded": True,
        "active": True,
        "need_daemon_reload": False,
        "since": 2.0,
    }
    commands, noops = run_operation("router.router_configured", doc)
    assert commands == [] and noops[-1].endswith("are current"), (commands, noops)
    # a new key: only the key file changes (on stdin, never an upload), and the router reloads
    monkeypatch.setenv("LAGUNA_API_KEYS", f"{key_one()},key-two-0123456789abcdef")
    commands, _ = run_operation("router.router_configured", doc)
    written = "umask 077 && cat > /etc/laguna-kit/router-api-keys.sha256.laguna-new"
    assert {"command": written, "stdin": True} in commands
    assert not any(
        c.get("upload", "").startswith("/etc/laguna-kit/router-api")
        for c in commands
        if isinstance(c, dict)
    )
    assert {"upload": "/etc/laguna-kit/haproxy.cfg.laguna-new"} not in commands
    assert commands[-1].startswith("systemctl reload laguna-router.service && ")


def test_the_box_firewall_lets_in_the_router_addresses_read_now():
    doc = case("firewall.fleet_peers_allowed/router-on-the-tailnet-opens-the-api-to-it.json")
    text = uploads("firewall.fleet_peers_allowed", doc)[doc["args"]["peers_file"]].decode()
    assert "add element inet laguna_kit fleet_router_v4 { 100.90.9.2 }" in text
    assert "add element inet laguna_kit fleet_router_v6 { fd7a:115c:a1e0::90:9 }" in text


def test_the_router_listens_on_its_tailnet_addresses_and_guards_its_metrics(monkeypatch):
    doc = case("router.router_configured/first-deploy-writes-and-checks-its-files.json")
    monkeypatch.setenv("LAGUNA_API_KEYS", doc["env"]["LAGUNA_API_KEYS"])
    cfg = uploads("router.router_configured", doc)["/etc/laguna-kit/haproxy.cfg"].decode()
    binds = [line.strip() for line in cfg.splitlines() if line.strip().startswith("bind ")]
    assert binds == [
        "bind ipv4@100.90.9.2:8090 transparent",
        "bind ipv6@fd7a:115c:a1e0::90:9:8090 transparent",
        "bind ipv4@100.90.9.2:8405 transparent",
        "bind ipv6@fd7a:115c:a1e0::90:9:8405 transparent",
    ]
    metrics = cfg[cfg.index("frontend metrics") :]
    guard = metrics.index("http-request return status 401")
    assert guard < metrics.index("prometheus-exporter") and guard < metrics.index("stats enable")


def test_a_router_off_the_tailnet_gets_no_configuration(monkeypatch):
    doc = case("router.router_configured/first-deploy-writes-and-checks-its-files.json")
    monkeypatch.setenv("LAGUNA_API_KEYS", doc["env"]["LAGUNA_API_KEYS"])
    doc["facts"]["network.TailscaleStatus"] = {"BackendState": "NeedsLogin"}
    with pytest.raises(OperationError, match="not on the tailnet"):
        operation_output("router.router_configured", doc)


def test_the_monitors_key_opens_the_metrics_page_alone(monkeypatch):
    """Issue 37 #2: Prometheus gets a metrics-only key, never a client key; the API never takes
    it (its ACL reads the client keys' file alone)."""
    from laguna_kit.domain import fleet

    doc = case("router.router_configured/first-deploy-writes-and-checks-its-files.json")
    monkeypatch.setenv("LAGUNA_API_KEYS", doc["env"]["LAGUNA_API_KEYS"])
    files = uploads("router.router_configured", doc)
    cfg = files["/etc/laguna-kit/haproxy.cfg"].decode()
    api, metrics = cfg.split("frontend metrics")
    clients, monitor = (
        "/etc/laguna-kit/router-api-keys.sha256",
        "/etc/laguna-kit/router-metrics-key.sha256",
    )
    assert clients in api and monitor not in api.split("backend laguna")[0]
    assert f"-f {clients} -f {monitor}" in metrics
    key = fleet.metrics_key([key_one()])
    assert key != key_one() and key_one() not in key
    want = hashlib.sha256(f"Bearer {key}".encode()).hexdigest() + "\n"
    assert files[monitor].decode() == want
    assert files[clients].decode() != want
