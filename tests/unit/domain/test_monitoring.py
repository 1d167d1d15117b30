"""laguna_kit/domain/monitoring.py and the firewall's monitor rules: Prometheus scrapes every host
by its parsed tailnet address, the alerts the issue lists exist with the knobs' thresholds, and on a
box the monitor alone of the tailnet peers reaches node exporter and /metrics."""

from laguna_kit.domain import monitoring
from laguna_kit.knobs import declared

from ..files.test_laguna_firewall_nft import rules

KNOBS = declared.defaults()


def config(router=True):
    boxes = [
        {"name": "gpu-1", "address": "100.90.1.2", "api_port": 8080, "relay_port": 9180},
        {"name": "gpu-2", "address": "fd7a:115c:a1e0::90:2", "api_port": 8080, "relay_port": 9180},
    ]
    return monitoring.prometheus_config(
        boxes,
        {"name": "edge", "address": "100.90.9.2"} if router else None,
        [{"name": "edge", "address": "100.90.9.2"}],
        "100.90.9.2",
        KNOBS,
        "/etc/laguna-kit/monitor/laguna-alerts.yml",
        "/etc/laguna-kit/monitor/router-metrics-key",
    )


def job(cfg, name):
    return next(j for j in cfg["scrape_configs"] if j["job_name"] == name)


def test_every_box_and_exporter_is_scraped_by_its_tailnet_address():
    cfg = config()
    # vLLM's /metrics through each box's relay, never its API port (issue 37 #1)
    assert [c["targets"] for c in job(cfg, "vllm")["static_configs"]] == [
        ["100.90.1.2:9180"],
        ["[fd7a:115c:a1e0::90:2]:9180"],
    ]
    assert [c["labels"]["instance"] for c in job(cfg, "vllm")["static_configs"]] == [
        "100.90.1.2:8080",
        "[fd7a:115c:a1e0::90:2]:8080",
    ]
    assert ["100.90.9.2:9100"] in [c["targets"] for c in job(cfg, "node")["static_configs"]]
    assert job(cfg, "router")["authorization"]["credentials_file"].endswith("router-metrics-key")
    assert cfg["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == [
        "100.90.9.2:9093"
    ]
    assert "router" not in [j["job_name"] for j in config(router=False)["scrape_configs"]]


def test_each_replica_of_an_eight_card_box_is_scraped_on_its_own_port():
    cfg = monitoring.prometheus_config(
        [
            {
                "name": "gpu-8",
                "address": "100.90.1.2",
                "api_port": 8080,
                "ports": [8080, 8081],
                "relay_port": 9180,
            }
        ],
        None,
        [],
        "100.90.9.2",
        KNOBS,
        "/etc/laguna-kit/monitor/laguna-alerts.yml",
        "/etc/laguna-kit/monitor/router-metrics-key",
    )
    relay = "100.90.1.2:9180"
    assert job(cfg, "vllm")["static_configs"] == [
        {
            "targets": [relay],
            "labels": {
                "box": "gpu-8",
                "instance": "100.90.1.2:8080",
                "__metrics_path__": "/metrics/1",
            },
        },
        {
            "targets": [relay],
            "labels": {
                "box": "gpu-8",
                "replica": "2",
                "instance": "100.90.1.2:8081",
                "__metrics_path__": "/metrics/2",
            },
        },
    ]
    assert [c["targets"] for c in job(cfg, "node")["static_configs"]] == [["100.90.1.2:9100"]]


def test_the_alerts_the_fleet_needs_with_the_knobs_thresholds():
    rules_ = {r["alert"]: r for r in monitoring.alert_rules(KNOBS, True)["groups"][0]["rules"]}
    assert {
        "LagunaBoxDown",
        "LagunaGateFailed",
        "LagunaNoBoxBehindRouter",
        "LagunaKVCacheFull",
        "LagunaRequestsWaiting",
        "LagunaGPUHot",
        "LagunaGPUMemoryFull",
        "LagunaGPUXid",
        "LagunaDiskLow",
        "LagunaDecodeSlow",
    } <= set(rules_)
    assert rules_["LagunaKVCacheFull"]["expr"] == "vllm:kv_cache_usage_perc > 0.95"
    assert rules_["LagunaKVCacheFull"]["for"] == "300s"
    assert rules_["LagunaGPUHot"]["expr"].endswith("> 85")
    assert "0.7 * max by (box) (laguna_release_decode_tok_s)" in rules_["LagunaDecodeSlow"]["expr"]
    assert rules_["LagunaDecodeSlow"]["for"] == "900s"
    # per token, not per engine step: under DFlash a step gives several tokens (issue 38 #2)
    assert "vllm:request_time_per_output_token_seconds" in rules_["LagunaDecodeSlow"]["expr"]
    assert "inter_token" not in rules_["LagunaDecodeSlow"]["expr"]
    # a collector that stopped is noticed: node exporter would serve its last file forever
    stale = rules_["LagunaMetricsStale"]["expr"]
    assert stale.startswith("time() - node_textfile_mtime_seconds{") and stale.endswith("> 300")
    hot = dict(KNOBS, alert_gpu_temp_c=80)
    hot_rules = monitoring.alert_rules(hot, False)["groups"][0]["rules"]
    assert next(r for r in hot_rules if r["alert"] == "LagunaGPUHot")["expr"].endswith("> 80")
    assert "LagunaRouterDown" not in str(monitoring.alert_rules(KNOBS, False))


def test_receivers_are_the_knobs():
    none = monitoring.alertmanager_config(KNOBS)["receivers"][0]
    assert none == {"name": "laguna"}  # alerts still listed in Alertmanager, sent nowhere
    both = monitoring.alertmanager_config(
        dict(
            KNOBS,
            alert_webhook_url="http://100.64.0.5:8000/hook",
            alert_email_to="ops@example.org",
            alert_smarthost="smtp.example.org:587",
        )
    )["receivers"][0]
    assert both["webhook_configs"][0]["url"] == "http://100.64.0.5:8000/hook"
    assert both["email_configs"][0]["smarthost"] == "smtp.example.org:587"


def test_box_rules_let_the_monitor_alone_scrape():
    lines = rules(fleet_router=True, monitor_ports=["9100", "9180"])
    allow = 'iifname "tailscale0" tcp dport { 9100, 9180 } ip saddr @fleet_monitor_v4 accept'
    drop = 'iifname "tailscale0" tcp dport { 9100, 9180 } counter drop'
    assert (
        lines.index(allow)
        < lines.index(drop)
        < lines.index('iifname "tailscale0" tcp dport { 8080, 8091 } counter drop')
    )
    assert 'include "/etc/laguna-kit/firewall.d/fleet-monitor*.nft"' in lines
    # without a router the tailnet reaches the API as before, but node exporter only the monitor
    alone = rules(fleet_router=False, monitor_ports=["9100", "9180"])
    assert alone.index(drop) < alone.index('iifname "tailscale0" ip saddr 100.64.0.0/10 accept')
    assert not any("fleet_monitor" in line for line in rules(fleet_router=False))


def test_the_dashboard_file_is_the_scripts_output_and_uses_only_names_that_exist():
    import re
    import runpy
    from pathlib import Path

    from laguna_kit.boxtools import gpumetrics

    root = Path(__file__).resolve().parents[3]
    script = runpy.run_path(str(root / "scripts/render_dashboard.py"))
    assert (root / "files/grafana-laguna.json").read_text() == script["text"](), (
        "run .venv/bin/python scripts/render_dashboard.py"
    )
    exprs = [t["expr"] for p in script["dashboard"]()["panels"] for t in p["targets"]]
    exprs += [r["expr"] for r in monitoring.alert_rules(KNOBS, True)["groups"][0]["rules"]]
    # what exists: the kit's collector, the stand-in's vLLM V1 names (its source names vLLM's),
    # HAProxy's exporter and Prometheus's own series
    kit = {m for m, _, _ in gpumetrics.FIELDS.values()} | set(
        re.findall(
            r"(laguna_[a-z_]+)[{ ]",
            "".join(
                (root / f"laguna_kit/boxtools/{m}.py").read_text()
                for m in ("gpumetrics", "fetch/scrub")
            ),
        )
    )
    standin = (root / "tests/harness/standin_vllm/vllm_standin.py").read_text()
    vllm = set(re.findall(r"(vllm:[a-z_]+)", standin))
    vllm |= {f"{h}_{s}" for h in vllm for s in ("bucket", "sum", "count")}
    known = kit | vllm | {"up", "ALERTS", "haproxy_server_status"}
    names = set()
    for e in exprs:
        e = re.sub(r"\{[^}]*\}", "", e)
        names |= set(re.findall(r"(?<![\w:])((?:vllm:|laguna_|haproxy_)[a-z_:]+|up|ALERTS)\b", e))
    assert len(names) > 15 and names <= known, sorted(names - known)


def test_the_routers_alerts_read_the_routers_series_alone():
    """Issue 37 #9: a box's textfile series of the same name (job="node") must not silence the
    router's alert (promtool proves it on the monitor host: tests/test_monitor.py)."""
    rules_ = {r["alert"]: r for r in monitoring.alert_rules(KNOBS, True)["groups"][0]["rules"]}
    for name, rule in rules_.items():
        if "haproxy_" in rule["expr"]:
            assert 'job="router"' in rule["expr"], name


def test_the_monitor_task_passes_every_knob_the_rules_file_names():
    """A knob the rules file names but tasks/monitor.py does not pass is an UndefinedError on the
    monitor host at deploy time (LagunaMetricsStale's threshold did so in the harness)."""
    import ast
    import re

    from laguna_kit import KIT_ROOT

    named = set(re.findall(r"<<\s*(\w+)\s*>>", (KIT_ROOT / monitoring.RULES_FILE).read_text()))
    tree = ast.parse((KIT_ROOT / "tasks/monitor.py").read_text())
    passed = next(
        ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "KNOBS"
    )
    assert named and named <= set(passed), sorted(named - set(passed))
