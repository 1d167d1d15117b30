"""The fleet's monitor (issue 26) on harness boxes: two serving boxes, one of them also the fleet's
router (roles = ["gpu", "router"]), and a monitor host of its own (roles = ["monitor"]), deployed
by one `pyinfra inventory.py deploy.py`, with Debian's real Prometheus 2.42, Alertmanager 0.25
and node exporter 1.5 (bookworm's archive) and real packets (the router and monitor on one host:
tests/test_fleet_router.py).

- Prometheus on the tailnet sees every target up (vLLM's /metrics of each box through its relay,
  node exporter on every host with the kit's GPU and release metrics, HAProxy's exporter, itself,
  Alertmanager);
- node exporter and the relay answer the monitor's Prometheus alone (no other tailnet peer, no
  other user there), never the API; Prometheus and Alertmanager answer the operators alone
  (monitor_operators); the box that is the router serves its clients with a key;
- a box's container killed hard (and its unit stopped, so it stays down): LagunaBoxDown is firing
  in Alertmanager within 60 s and reaches the webhook receiver (a tailnet peer); back up, it
  resolves.
"""

import hashlib
import json
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from laguna_kit import KIT_ROOT
from laguna_kit.boxtools.layout import TEXTFILE_DIR
from laguna_kit.knobs.declared import defaults
from tests.harness import box as boxmod
from tests.harness.deployrun import run_deploy
from tests.harness.paths import run_dir, slot
from tests.harness.probes import none_answer
from tests.harness.sandbox import ROUTER_KEYS

KNOBS = defaults()
HOOK_PORT = 18970 + slot()  # the webhook receiver, a tailnet peer (this worker's)
OPERATOR = boxmod.TAILNET_OPERATOR_V4
PROM = f"{TEXTFILE_DIR}/laguna.prom"  # the kit's textfile (tasks/metrics.py)
# Faster than a real fleet's (15 s, 30 s), so the drill's 60 s holds on a loaded 2-core machine.
DATA = {
    "monitor_scrape_interval_s": 5,
    "alert_box_down_for_s": 10,
    # a token in the receiver's URL, as a Slack webhook's path has: a secret on the monitor host
    "alert_webhook_url": f"http://{boxmod.TAILNET_PEER_V4}:{HOOK_PORT}/hook/s3cr3t-hook",
    "monitor_operators": [OPERATOR],
}


def tailnet(*cmd, check=False, **kw):
    return boxmod.sh("ip", "netns", "exec", boxmod.TAILNET_NS, *cmd, check=check, **kw)


class Hook(BaseHTTPRequestHandler):
    """An alert receiver: appends each notification as one JSON line to hook_file()."""

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with hook_file().open("a") as fh:
            fh.write(json.dumps(json.loads(body or b"{}")) + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


@pytest.fixture(scope="module")
def watched(sandbox):
    boxes = [sandbox.add_box("mo1", roles=["gpu", "router"]), sandbox.add_box("mo2")]
    edge = sandbox.add_box("moedge", roles=["monitor"])
    start = time.monotonic()
    first = run_deploy(sandbox, [*boxes, edge], data=DATA, timeout=1500)
    wall = time.monotonic() - start
    (run_dir() / "monitor-first-deploy.log").write_text(first.output)
    assert first.ok, first.explain()
    # the webhook receiver: a tailnet peer (a process in the tailnet namespace)
    hook_file().unlink(missing_ok=True)
    hook = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            boxmod.TAILNET_NS,
            sys.executable,
            "-c",
            "from tests.test_monitor import serve_hook; serve_hook()",
        ],
        cwd=KIT_ROOT,
    )
    yield boxes, edge, first, wall, hook
    hook.terminate()
    for b in [*boxes, edge]:
        sandbox.remove_box(b)


def serve_hook():
    """Run in the tailnet namespace (a tailnet peer's address)."""
    HTTPServer((boxmod.TAILNET_PEER_V4, HOOK_PORT), Hook).serve_forever()


def api(edge, port, path, source=OPERATOR):
    """The monitor's API as an operator's laptop calls it (monitor_operators)."""
    url = f"http://{edge.tailnet_v4}:{port}{path}"
    proc = tailnet("curl", "-sf", "--max-time", "5", "--interface", source, url)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def prom(edge, query):
    from urllib.parse import quote

    out = api(edge, KNOBS["prometheus_port"], f"/api/v1/query?query={quote(query)}")
    return (out or {}).get("data", {}).get("result", [])


def until_n(edge, query, n, seconds):
    """The query's series once there are n of them (the textfile timer and the scrapes take a
    moment after a deploy), else what there is."""
    return until(
        lambda: (lambda r: r if len(r) >= n else None)(prom(edge, query)), seconds
    ) or prom(edge, query)


def until(what, seconds, every=1.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(every)
    return what()


def test_prometheus_sees_every_target_up_with_gpu_vllm_and_release_metrics(watched, sandbox):
    boxes, edge, first, wall, _ = watched
    print(f"fleet first deploy (2 boxes, one the router, and a monitor): {wall:.0f} s")
    gate = json.loads(boxes[0].run("cat /opt/laguna-kit/state/last-gate.json").stdout)
    bench = gate["benchmark"]
    print(
        f"the gate's benchmark: {bench['output_tokens']} tokens in {bench['wall_s']} s "
        f"({bench['decode_tok_s']} tok/s) + a streamed 8-token request ({bench['short_ttft_s']} s "
        "to its first token)"
    )

    def all_up():
        targets = (api(edge, KNOBS["prometheus_port"], "/api/v1/targets") or {}).get("data", {})
        active = targets.get("activeTargets", [])
        jobs = sorted({t["labels"]["job"] for t in active})
        return (jobs, active) if active and all(t["health"] == "up" for t in active) else None

    got = until(all_up, 60)
    assert got, api(edge, KNOBS["prometheus_port"], "/api/v1/targets")
    jobs, active = got
    assert jobs == ["alertmanager", "node", "prometheus", "router", "vllm"], jobs
    assert len([t for t in active if t["labels"]["job"] == "vllm"]) == 2
    assert len([t for t in active if t["labels"]["job"] == "node"]) == 3
    assert {r["metric"].get("box") for r in prom(edge, "up == 1")} >= {b.name for b in boxes}
    # the kit's textfile metrics: every card of both boxes, each box's release and its figure
    temps = until_n(edge, "laguna_gpu_temperature_celsius", 8, 40)
    assert len(temps) == 8 and {r["metric"]["name"] for r in temps} == {"NVIDIA GeForce RTX 3090"}
    # (the timer writes them every gpu_metrics_interval_s: the gate may have ended since)
    decode = until_n(edge, "laguna_release_decode_tok_s", 2, 40)
    assert len(decode) == 2 and all(float(r["value"][1]) > 100 for r in decode), (
        decode,
        boxes[0]
        .run(
            "cat /var/lib/prometheus/node-exporter/laguna.prom; "
            "systemctl status laguna-gpu-metrics.service",
            check=False,
        )
        .stdout,
    )
    assert len(until_n(edge, "laguna_gate_passed == 1", 2, 20)) == 2
    # the age of the kit's textfile as Debian's node exporter names it: the stale-metrics alert's
    # selector matches every box's file (issue 38 #7)
    files = {r["metric"].get("file") for r in prom(edge, "node_textfile_mtime_seconds")}
    ages = prom(edge, r'time() - node_textfile_mtime_seconds{file=~"(.*/)?laguna\\.prom"}')
    assert len(ages) == 2 and all(float(r["value"][1]) < 120 for r in ages), (files, ages)
    assert len(prom(edge, "vllm:kv_cache_usage_perc")) == 2
    both_up = 'sum(haproxy_server_status{proxy="laguna",state="UP"})'
    # (a scrape taken while the router's checks still came up says 1: wait for the second box)
    up = until(
        lambda: (lambda r: r if r and r[0]["value"][1] == "2" else None)(prom(edge, both_up)), 30
    )
    up = up or prom(edge, both_up)
    assert up and up[0]["value"][1] == "2", (
        up,
        [
            line
            for line in tailnet(
                "curl",
                "-s",
                "-m",
                "5",
                "-H",
                f"Authorization: Bearer {ROUTER_KEYS[0]}",
                f"http://{boxes[0].tailnet_v4}:{KNOBS['router_metrics_port']}/metrics",
            ).stdout.splitlines()
            if "active_servers" in line or "haproxy_server_status" in line and " 1" in line
        ],
    )
    # a converged re-run changes nothing on any of the three hosts
    again = run_deploy(sandbox, [*boxes, edge], data=DATA, timeout=900)
    assert again.ok and again.changed() == [], again.changed()


def reaches(where, user, address, port, path="/") -> bool:
    """A TCP connection and an HTTP answer from `user` on host `where` (any status)."""
    url = f"http://{address}:{port}{path}"
    out = where.run(
        f"runuser -u {user} -- curl -s -o /dev/null -w '%{{http_code}}' --max-time 3 {url}",
        check=False,
    )
    return out.stdout.strip() not in ("", "000")


def peer_reaches(address, port, source=boxmod.TAILNET_PEER_V4) -> bool:
    out = tailnet("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "3",
                  "--interface", source, f"http://{address}:{port}/")  # fmt: skip
    return out.stdout.strip() not in ("", "000")


def listening(h) -> set[int]:
    """The TCP ports a host listens on beyond loopback, as ss reads them."""
    ports = set()
    for line in h.run("ss -Hltn", check=False).stdout.splitlines():
        local = line.split()[3]
        if not local.startswith(("127.", "[::1]")):
            ports.add(int(local.rsplit(":", 1)[1]))
    return ports


def test_the_exporters_answer_the_monitor_alone_and_the_monitor_the_operators_alone(watched):
    """Issue 37 #1 and #3, with real packets: Prometheus (its user on the monitor host) gets a
    box's /metrics through the relay and nothing else of the API; no other user there reaches a
    box at all; another tailnet peer reaches neither the boxes' exporters nor the monitor's
    ports; the operator reaches Prometheus and Alertmanager."""
    boxes, edge, *_ = watched
    node, relay = KNOBS["node_exporter_port"], KNOBS["metrics_relay_port"]
    prom_port, am_port = KNOBS["prometheus_port"], KNOBS["alertmanager_port"]
    b = boxes[1]
    as_prom = edge.run(
        f"runuser -u prometheus -- curl -sf --max-time 3 http://{b.tailnet_v4}:{relay}/metrics/1",
        check=False,
    )
    assert as_prom.returncode == 0 and "vllm:num_requests_running" in as_prom.stdout
    seen = edge.run(f"curl -sf --max-time 3 http://{b.tailnet_v4}:{node}/metrics", check=False)
    assert "laguna_gpu_query_ok 1" in seen.stdout
    # Prometheus no further than /metrics: the relay serves nothing else, the API port is shut
    assert not reaches(edge, "prometheus", b.tailnet_v4, KNOBS["api_port"], "/v1/models")
    got = edge.run(
        f"runuser -u prometheus -- curl -s -o /dev/null -w '%{{http_code}}' --max-time 3 "
        f"http://{b.tailnet_v4}:{relay}/v1/models",
        check=False,
    )
    assert got.stdout == "404", got.stdout
    probes = {}
    # any other process on the monitor host: not even the exporters
    for port in (KNOBS["api_port"], KNOBS["api_port"] + 1, relay, node, KNOBS["router_agent_port"]):
        probes[f"nobody on the monitor host to {b.name}:{port}"] = lambda port=port: reaches(
            edge, "nobody", b.tailnet_v4, port
        )
    # nor the monitor's own Alertmanager and Prometheus (silences, receivers)
    for port in (prom_port, am_port, node):
        probes[f"nobody on the monitor host to its :{port}"] = lambda port=port: reaches(
            edge, "nobody", edge.tailnet_v4, port
        )
    # another tailnet peer: nothing of the monitor's, nothing of a box's but what it serves
    for port in (prom_port, am_port, node):
        probes[f"a tailnet peer to the monitor's :{port}"] = lambda port=port: peer_reaches(
            edge.tailnet_v4, port
        )
    for port in (node, relay, KNOBS["api_port"], 29500):
        probes[f"a tailnet peer to {b.name}:{port}"] = lambda port=port: peer_reaches(
            b.tailnet_v4, port
        )
    # the operator: not node exporter
    probes["the operator to node exporter"] = lambda: peer_reaches(edge.tailnet_v4, node, OPERATOR)
    # Prometheus and Alertmanager: on the tailnet address, not on the host's ordinary one
    for port in (prom_port, am_port):
        off = f"http://{edge.address}:{port}/"
        probes[f"{off} off the tailnet"] = lambda off=off: (
            boxmod.sh("curl", "-s", "--max-time", "3", off, check=False).returncode == 0
        )
    none_answer(probes)
    assert reaches(edge, "prometheus", edge.tailnet_v4, am_port, "/-/ready")
    # the operator: Prometheus and Alertmanager
    assert peer_reaches(edge.tailnet_v4, prom_port, OPERATOR)
    assert api(edge, am_port, "/api/v2/status") is not None
    listen = edge.run("ss -Hltn", check=False).stdout
    assert f"{edge.tailnet_v4}:{prom_port}" in listen and f"0.0.0.0:{prom_port}" not in listen


def test_the_box_that_is_the_router_serves_its_clients_and_nothing_else(watched):
    """Issue 37 #6: roles = ["gpu", "router"] serves tailnet clients with a key (its own API
    and the other box's behind it), and every other listener of every host answers no other
    tailnet peer."""
    boxes, edge, *_ = watched
    router = boxes[0]
    url = f"http://{router.tailnet_v4}:{KNOBS['router_port']}/v1/models"
    key = f"Authorization: Bearer {ROUTER_KEYS[0]}"
    models = tailnet("curl", "-sf", "--max-time", "10", "-H", key, url)
    assert models.returncode == 0 and '"laguna"' in models.stdout, models.stderr
    no_key = tailnet("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", url)
    assert no_key.stdout == "401"
    metrics = f"http://{router.tailnet_v4}:{KNOBS['router_metrics_port']}/stats"
    assert tailnet("curl", "-sf", "--max-time", "5", "-H", key, metrics).returncode == 0
    clients = {KNOBS["router_port"], KNOBS["router_metrics_port"]}
    none_answer(
        {
            f"{h.name}:{port} from a tailnet peer": lambda h=h, port=port: peer_reaches(
                h.tailnet_v4, port
            )
            for h in [*boxes, edge]
            for port in sorted(listening(h) - {22} - (clients if h is router else set()))
        }
    )


def test_the_monitors_secrets_rest_for_its_services_alone(watched):
    """Issue 37 #2 and #3: the receiver's URL and the router's metrics key are readable by
    root and Prometheus's group alone; the key opens the router's metrics page, never its API;
    no client key rests on the monitor host."""
    boxes, edge, *_ = watched
    folder = "/etc/laguna-kit/monitor"
    for name in ("alertmanager.yml", "router-metrics-key"):
        st = edge.run(f"stat -c '%a %U:%G' {folder}/{name}").stdout.strip()
        assert st == "640 root:prometheus", (name, st)
    assert "s3cr3t-hook" in edge.run(f"cat {folder}/alertmanager.yml").stdout
    assert edge.run(f"runuser -u nobody -- cat {folder}/alertmanager.yml", check=False).returncode
    held = edge.run(f"cat {folder}/router-metrics-key").stdout.strip()
    assert held not in ROUTER_KEYS and not any(
        k in edge.run(f"cat {folder}/*").stdout for k in ROUTER_KEYS
    )
    auth = f"Authorization: Bearer {held}"
    base = f"http://{boxes[0].tailnet_v4}"

    def code(url):
        out = tailnet(
            "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "5", "-H", auth, url
        )
        return out.stdout

    assert code(f"{base}:{KNOBS['router_metrics_port']}/metrics") == "200"
    assert code(f"{base}:{KNOBS['router_port']}/v1/models") == "401"


def test_a_box_down_fires_its_alert_within_60s_reaches_the_webhook_and_resolves(watched):
    boxes, edge, *_ = watched
    b = boxes[1]

    def alerts():
        got = api(edge, KNOBS["alertmanager_port"], "/api/v2/alerts?active=true") or []
        return [
            a
            for a in got
            if a["labels"].get("alertname") == "LagunaBoxDown" and a["labels"].get("box") == b.name
        ]

    assert not alerts()
    down = time.monotonic()
    b.run(f"docker kill {KNOBS['container_name']}; systemctl stop laguna-vllm", check=False)
    firing = until(alerts, 60)
    took = time.monotonic() - down
    print(f"LagunaBoxDown firing in Alertmanager {took:.0f} s after the container was killed")
    assert firing and firing[0]["status"]["state"] == "active", firing
    # the webhook hears of it while it lasts (Alertmanager waits group_wait, 30 s, to group)
    got = until(lambda: notified(hook_file(), "firing"), 60)
    print(f"webhook notified {time.monotonic() - down:.0f} s after the kill")
    assert (
        got and got[0]["receiver"] == "laguna" and got[0]["alerts"][0]["labels"]["box"] == b.name
    ), (
        hook_file().read_text() if hook_file().exists() else "no notification",
        edge.run("journalctl -u prometheus-alertmanager --no-pager -n 20", check=False).stdout,
    )
    b.run("systemctl start laguna-vllm")
    resolved = until(lambda: not alerts(), 90)
    print(f"resolved {time.monotonic() - down:.0f} s after the kill")
    assert resolved  # (the webhook hears of that at the group's next interval, 5 min)


def hook_file():
    return run_dir() / f"monitor-webhook-{HOOK_PORT}.jsonl"


def notified(path, status) -> list[dict]:
    if not path.exists():
        return []
    out = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [
        n
        for n in out
        if n.get("status") == status
        and any(a["labels"].get("alertname") == "LagunaBoxDown" for a in n.get("alerts", []))
    ]


def test_prometheus_memory_and_cpu_with_two_boxes_scraped(watched):
    """A figure for BENCHMARKS.md, printed (not a timed assertion)."""
    _, edge, *_ = watched
    pid = edge.run("systemctl show -p MainPID --value prometheus").stdout.strip()
    rss = edge.run(f"awk '/VmRSS/ {{print $2}}' /proc/{pid}/status").stdout.strip()
    ticks = edge.run(f"cut -d' ' -f14,15 /proc/{pid}/stat").stdout.split()
    up_s = float(edge.run(f"ps -o etimes= -p {pid}").stdout.strip())
    cpu_s = (int(ticks[0]) + int(ticks[1])) / 100
    print(
        f"prometheus on the monitor host: RSS {int(rss) / 1024:.0f} MiB, CPU {cpu_s:.1f} s over "
        f"{up_s:.0f} s up ({100 * cpu_s / up_s:.1f} % of a core), 2 boxes + router scraped every "
        f"{DATA['monitor_scrape_interval_s']} s"
    )
    assert int(rss) > 0


def test_the_alert_expressions_fire_on_the_series_they_describe(watched):
    """`promtool test rules` (the monitor host's, Debian's 2.42) on the kit's own rules file:
    a box decoding at 10 tok/s against a recorded 280 is LagunaDecodeSlow after 15 min, a DFlash
    box at 280 (5 tokens per engine step) is not; a serving box without GPU metrics is
    LagunaGPUMetricsMissing, one with them is not; KV cache at 0.97 alerts after 5 min, at 0.90
    never; an 8-card box's second replica down is LagunaBoxDown naming that replica, its first
    replica up is not."""
    _, edge, *_ = watched
    rules = {
        r["alert"]: r
        for r in json.loads(edge.run("cat /etc/laguna-kit/monitor/laguna-alerts.yml").stdout)[
            "groups"
        ][0]["rules"]
    }

    def expect(name, box, value, **labels):
        summary = rules[name]["annotations"]["summary"]
        who = box + (f" replica {labels['replica']}" if "replica" in labels else "")
        for template, text in (
            ("{{ $labels.box }}{{ with $labels.replica }} replica {{ . }}{{ end }}", who),
            ("{{ $labels.box }}", box),
            ("{{ $value | humanize }}", value),
            ("{{ $value | humanizePercentage }}", value),
            ("{{ $value | humanizeDuration }}", value),
        ):
            summary = summary.replace(template, text)
        if "replica" in labels:
            # said here, not read from the rule: the alert names the replica, not only the box
            summary = f"{who}: {summary.split(': ', 1)[1]}"
        return {
            "exp_labels": dict(box=box, severity=rules[name]["labels"]["severity"], **labels),
            "exp_annotations": {"summary": summary},
        }

    series = [
        # b1 decodes at 10 tok/s: 6 requests a minute, each 0.1 s per output token; b2 (DFlash,
        # k=7, 5 tokens per engine step) at 280 tok/s: 30 requests a minute of 1/280 s per token,
        # and vLLM's inter-token latency counts its steps (56 a second of 5/280 s: read as a
        # speed it says 56 "tok/s"; the rule must not: issue 38 #2, vllm/v1/metrics/stats.py)
        ('vllm:request_time_per_output_token_seconds_count{box="b1",job="vllm"}', "0+6x40"),
        ('vllm:request_time_per_output_token_seconds_sum{box="b1",job="vllm"}', "0+0.6x40"),
        ('vllm:request_time_per_output_token_seconds_count{box="b2",job="vllm"}', "0+30x40"),
        ('vllm:request_time_per_output_token_seconds_sum{box="b2",job="vllm"}', "0+0.10714x40"),
        ('vllm:inter_token_latency_seconds_count{box="b2",job="vllm"}', "0+3360x40"),
        ('vllm:inter_token_latency_seconds_sum{box="b2",job="vllm"}', "0+60x40"),
        ('laguna_release_decode_tok_s{box="b1",job="node"}', "280x40"),
        ('laguna_release_decode_tok_s{box="b2",job="node"}', "280x40"),
        ('up{box="b1",job="vllm"}', "1x40"),
        ('up{box="b2",job="vllm"}', "1x40"),
        ('laguna_gpu_query_ok{box="b2",job="node"}', "1x40"),
        ('vllm:kv_cache_usage_perc{box="b1",job="vllm"}', "0.97x40"),
        ('vllm:kv_cache_usage_perc{box="b2",job="vllm"}', "0.90x40"),
        # an 8-card box whose second replica is down: the alert names the replica
        ('up{box="b3",job="vllm"}', "1x40"),
        ('up{box="b3",job="vllm",replica="2"}', "0x40"),
        ('laguna_gpu_query_ok{box="b3",job="node"}', "1x40"),
        # the router sees no box UP; a box's own textfile series of the same name (job="node")
        # must not hide it (issue 37 #9)
        ('haproxy_server_status{job="router",proxy="laguna",server="b1",state="UP"}', "0x40"),
        ('haproxy_server_status{job="node",proxy="laguna",server="b1",state="UP"}', "1x40"),
        # b1's collector stopped at t=0 (node exporter goes on serving its last file); b2's
        # file is rewritten every minute (issue 38 #7)
        (f'node_textfile_mtime_seconds{{box="b1",job="node",file="{PROM}"}}', "0x40"),
        (f'node_textfile_mtime_seconds{{box="b2",job="node",file="{PROM}"}}', "0+60x40"),
    ]
    doc = {
        "rule_files": ["/etc/laguna-kit/monitor/laguna-alerts.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                "alert_rule_test": [
                    {"eval_time": "10m", "alertname": "LagunaDecodeSlow", "exp_alerts": []},
                    {
                        "eval_time": "20m",
                        "alertname": "LagunaDecodeSlow",
                        "exp_alerts": [expect("LagunaDecodeSlow", "b1", "10")],
                    },
                    {
                        "eval_time": "5m",
                        "alertname": "LagunaGPUMetricsMissing",
                        "exp_alerts": [expect("LagunaGPUMetricsMissing", "b1", "1", job="vllm")],
                    },
                    {
                        "eval_time": "8m",
                        "alertname": "LagunaBoxDown",
                        "exp_alerts": [expect("LagunaBoxDown", "b3", "0", job="vllm", replica="2")],
                    },
                    {
                        "eval_time": "5m",
                        "alertname": "LagunaNoBoxBehindRouter",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": rules["LagunaNoBoxBehindRouter"]["labels"][
                                        "severity"
                                    ]
                                },
                                "exp_annotations": rules["LagunaNoBoxBehindRouter"]["annotations"],
                            }
                        ],
                    },
                    {
                        "eval_time": "10m",
                        "alertname": "LagunaMetricsStale",
                        "exp_alerts": [
                            expect("LagunaMetricsStale", "b1", "10m 0s", job="node", file=PROM)
                        ],
                    },
                    {
                        "eval_time": "8m",
                        "alertname": "LagunaKVCacheFull",
                        "exp_alerts": [expect("LagunaKVCacheFull", "b1", "97%", job="vllm")],
                    },
                ],
            }
        ],
    }
    edge.run(f"cat > /tmp/laguna-rules-test.yml <<'EOF'\n{json.dumps(doc)}\nEOF")
    out = edge.run("promtool test rules /tmp/laguna-rules-test.yml", check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_run_cut_after_writing_a_file_reacts_on_the_next_run(watched, sandbox):
    """Issue 36: a run killed between writing a unit's file and reacting to it leaves the old
    configuration running until the next run, not for good. The router's API keys (HAProxy holds
    them in memory: a reload takes a new one) and the metrics timer's unit (systemd reads it at a
    daemon-reload, the timer restarts on it), each cut right after the write; the next run makes
    the reaction from the box's state, and the one after changes nothing. Runs last: it leaves the
    fleet on a third key and another timer interval."""
    from tests.harness.cut_runs import cut_after_write

    boxes, edge, *_ = watched
    router, box = boxes
    key = "lgk-harness-key-three-0a1b2c3d4e5f6789"
    keys = {"LAGUNA_API_KEYS": ",".join([*ROUTER_KEYS, key])}
    data = dict(DATA, gpu_metrics_interval_s=KNOBS["gpu_metrics_interval_s"] + 4)
    timer = "laguna-gpu-metrics.timer"

    def answers(k) -> int:
        url = f"http://{router.tailnet_v4}:{KNOBS['router_port']}/v1/models"
        auth = f"Authorization: Bearer {k}"
        out = tailnet("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", auth, url)
        return int(out.stdout or 0)

    def timer_state() -> tuple[str, bool]:
        """(systemd's NeedDaemonReload, whether the timer runs since its unit file changed)."""
        show = box.run(
            f"systemctl show -p NeedDaemonReload -p ActiveEnterTimestamp --timestamp=unix {timer}"
        ).stdout
        props = dict(line.split("=", 1) for line in show.splitlines() if "=" in line)
        written = int(box.run(f"stat -c %Y /etc/systemd/system/{timer}").stdout)
        return props["NeedDaemonReload"], int(props["ActiveEnterTimestamp"][1:]) >= written

    fleet = [*boxes, edge]
    both = ["--limit", box.name, "--limit", router.name]
    written = hashlib.sha256(f"Bearer {key}".encode()).hexdigest()
    assert answers(key) == 401
    # the router's key file written, its reload cut: the new key is refused
    cut_after_write(
        sandbox, fleet, router, r"^reload laguna-router", env=keys, data=DATA,
        args=["--limit", router.name],
    )  # fmt: skip
    assert written in router.run("cat /etc/laguna-kit/router-api-keys.sha256").stdout
    assert answers(key) == 401
    # the timer's unit written, systemd's reload cut; the router's reload made by this run
    cut_after_write(sandbox, fleet, box, r"^daemon-reload", env=keys, data=data, args=both)
    assert answers(key) == 200, "the router still runs the key file of before the cut"
    assert timer_state()[0] == "yes"
    # the next run reloads systemd and restarts the timer on its new unit ...
    again = run_deploy(sandbox, fleet, data=data, env=keys, args=both, timeout=900)
    assert again.ok, again.explain()
    assert timer_state() == ("no", True)
    unit = box.run(f"systemctl cat {timer}").stdout
    assert f"OnUnitActiveSec={data['gpu_metrics_interval_s']}s" in unit
    # ... and the one after changes nothing
    last = run_deploy(sandbox, fleet, data=data, env=keys, args=both, timeout=900)
    assert last.ok and last.changed() == [], last.changed()
