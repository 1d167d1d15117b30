"""What the monitor host runs, as data: Prometheus's scrape configuration, the alert rules and
Alertmanager's routes, built from the fleet's tailnet addresses (parsed: fleet.tailnet_addresses)
and the knobs (typed: knobtypes). Written as JSON, which Prometheus and Alertmanager read as the
YAML it is a subset of: no value is ever pasted into YAML text.

Metric names: vLLM's V1 engine (vllm/v1/metrics/loggers.py, docs/design/metrics.md, v0.25.1):
vllm:num_requests_running/_waiting, vllm:kv_cache_usage_perc (0-1), vllm:generation_tokens_total,
vllm:time_to_first_token_seconds and vllm:inter_token_latency_seconds (histograms); HAProxy's
built-in exporter (haproxy_server_status: a box UP at the router; its
haproxy_backend_active_servers read 0 with both boxes UP on Debian's 2.6.12, seen on the harness);
node exporter; and the kit's own laguna_* from node exporter's textfile collector
(boxtools/gpumetrics.py).
"""

from __future__ import annotations

import json

from .fleet import host_port


def prometheus_config(
    boxes: list[dict],
    router: dict | None,
    others: list[dict],
    own: str,
    knobs: dict,
    rules_file: str,
    router_key_file: str,
) -> dict:
    """boxes: [{"name", "address", "api_port", "ports": each replica's API port}] (the GPU hosts
    on the tailnet); router: {"name",
    "address"} or None; others: [{"name", "address"}] (hosts with node exporter that are not
    boxes: the router's host); own: this host's tailnet address (its own exporters)."""
    every = f"{knobs['monitor_scrape_interval_s']}s"
    node_port = knobs["node_exporter_port"]
    # one target per replica (a box with 8 cards serves two): replica 1 labelled as a box always was
    vllm = [
        {
            "targets": [host_port(b["address"], port)],
            "labels": {"box": b["name"], **({"replica": str(n)} if n > 1 else {})},
        }
        for b in boxes
        for n, port in enumerate(b.get("ports") or [b["api_port"]], start=1)
    ]
    node = [
        {"targets": [host_port(h["address"], node_port)], "labels": {"box": h["name"]}}
        for h in [*boxes, *others]
    ]
    jobs = [
        {"job_name": "vllm", "static_configs": vllm},
        {"job_name": "node", "static_configs": node},
        {
            "job_name": "prometheus",
            "static_configs": [{"targets": [host_port(own, knobs["prometheus_port"])]}],
        },
        {
            "job_name": "alertmanager",
            "static_configs": [{"targets": [host_port(own, knobs["alertmanager_port"])]}],
        },
    ]
    if router:
        jobs.append(
            {
                "job_name": "router",
                # the router's metrics page asks for one of the fleet's API keys
                "authorization": {"type": "Bearer", "credentials_file": router_key_file},
                "static_configs": [
                    {
                        "targets": [host_port(router["address"], knobs["router_metrics_port"])],
                        "labels": {"box": router["name"]},
                    }
                ],
            }
        )
    return {
        "global": {
            "scrape_interval": every,
            "evaluation_interval": every,
            "scrape_timeout": f"{min(10, knobs['monitor_scrape_interval_s'])}s",
            "external_labels": {"fleet": "laguna"},
        },
        "alerting": {
            "alertmanagers": [
                {"static_configs": [{"targets": [host_port(own, knobs["alertmanager_port"])]}]}
            ]
        },
        "rule_files": [rules_file],
        "scrape_configs": jobs,
    }


# Which server an alert is about: the box, and the replica where it is not the box's first (those
# series carry a replica label, prometheus_config)
WHO = "{{ $labels.box }}{{ with $labels.replica }} replica {{ . }}{{ end }}"


def _rule(name: str, expr: str, for_s: int, summary: str, severity: str = "critical") -> dict:
    return {
        "alert": name,
        "expr": expr,
        "for": f"{for_s}s",
        "labels": {"severity": severity},
        "annotations": {"summary": summary},
    }


def alert_rules(knobs: dict, with_router: bool) -> dict:
    """The alerts the kit promises (DEPLOYMENT.md, "Monitoring"), thresholds from the knobs."""
    k = knobs
    rules = [
        _rule(
            "LagunaBoxDown",
            'up{job="vllm"} == 0',
            k["alert_box_down_for_s"],
            WHO + ": vLLM does not answer (container down, box down, or the "
            "firewall): pyinfra inventory.py tasks/status.py --limit {{ $labels.box }}",
        ),
        _rule(
            "LagunaGateFailed",
            "laguna_gate_passed == 0",
            60,
            WHO + ": release {{ $labels.release }} ({{ $labels.mode }}) has not "
            "passed its gate: tasks/logs.py, then deploy or roll back",
        ),
        _rule(
            "LagunaNodeDown",
            'up{job="node"} == 0',
            k["alert_box_down_for_s"],
            "{{ $labels.box }}: node exporter does not answer (host down or off the tailnet)",
        ),
        _rule(
            "LagunaKVCacheFull",
            f"vllm:kv_cache_usage_perc > {k['alert_kv_cache_usage']}",
            300,
            WHO + ": KV cache {{ $value | humanizePercentage }} full for 5 min: "
            "requests queue; add a box or lower max_num_seqs",
            "warning",
        ),
        _rule(
            "LagunaRequestsWaiting",
            f"vllm:num_requests_waiting > {k['alert_waiting_requests']}",
            300,
            WHO + ": {{ $value }} requests waiting for 5 min: the fleet is short of boxes",
            "warning",
        ),
        _rule(
            "LagunaGPUHot",
            f"laguna_gpu_temperature_celsius > {k['alert_gpu_temp_c']}",
            120,
            "{{ $labels.box }} GPU {{ $labels.gpu }}: {{ $value }} C (it slows itself near 90): "
            "airflow, fans, power limit",
            "warning",
        ),
        _rule(
            "LagunaGPUMemoryFull",
            f"laguna_gpu_memory_used_bytes / laguna_gpu_memory_total_bytes > "
            f"{k['alert_gpu_memory_ratio']}",
            300,
            "{{ $labels.box }} GPU {{ $labels.gpu }}: memory {{ $value | humanizePercentage }} "
            "used (vLLM takes gpu_memory_utilization of it): another process on the card?",
            "warning",
        ),
        _rule(
            "LagunaGPUXid",
            "laguna_gpu_xid_errors_all > 0",
            0,
            "{{ $labels.box }}: the NVIDIA driver logged {{ $value }} Xid error(s) since boot "
            "(journalctl -k | grep Xid): a card may need a reboot or attention",
        ),
        _rule(
            "LagunaGPUEccErrors",
            "laguna_gpu_ecc_uncorrected_errors > 0",
            0,
            "{{ $labels.box }} GPU {{ $labels.gpu }}: {{ $value }} uncorrected ECC errors",
        ),
        _rule(
            "LagunaGPUMetricsMissing",
            # nvidia-smi fails, or a box serves but its kit metrics never reach Prometheus (a node
            # exporter reading another textfile folder)
            'laguna_gpu_query_ok == 0 or (up{job="vllm"} == 1 unless on (box) laguna_gpu_query_ok)',
            120,
            "{{ $labels.box }}: no GPU metrics: nvidia-smi does not answer (driver gone after a "
            "kernel upgrade?) or node exporter does not read the kit's textfile folder",
        ),
        _rule(
            "LagunaDiskLow",
            f"laguna_path_avail_ratio < {k['alert_disk_free_ratio']}",
            300,
            "{{ $labels.box }}: {{ $labels.path }} has {{ $value | humanizePercentage }} free: "
            "keep_releases, docker image prune, or a bigger disk",
            "warning",
        ),
        # Live decode speed per box (generated tokens per second of a request's decoding, from
        # vLLM's inter-token latency) against the serving release's own recorded figure.
        _rule(
            "LagunaDecodeSlow",
            "(sum by (box) (rate(vllm:inter_token_latency_seconds_count[15m])) / sum by (box) "
            "(rate(vllm:inter_token_latency_seconds_sum[15m]))) < on (box) "
            f"({k['alert_decode_ratio']} * max by (box) (laguna_release_decode_tok_s))",
            900,
            "{{ $labels.box }}: decoding at {{ $value | humanize }} tok/s for 15 min, below "
            f"{k['alert_decode_ratio']} x the release's recorded figure: clocks, heat, another "
            "process on the cards (nvidia-smi)",
            "warning",
        ),
    ]
    if with_router:
        rules += [
            _rule(
                "LagunaRouterDown",
                'up{job="router"} == 0',
                k["alert_box_down_for_s"],
                "the fleet router {{ $labels.box }} does not answer: the fleet's endpoint is down",
            ),
            _rule(
                "LagunaNoBoxBehindRouter",
                'sum(haproxy_server_status{proxy="laguna",state="UP"}) < 1',
                60,
                "the router has no box UP: the API does not answer through the router",
            ),
        ]
    return {"groups": [{"name": "laguna", "rules": rules}]}


def alertmanager_config(knobs: dict) -> dict:
    """One route to the receivers the knobs name; none set = a receiver that sends nothing (the
    alerts still show in Alertmanager's API and Prometheus's /alerts)."""
    receiver: dict = {"name": "laguna"}
    if knobs["alert_webhook_url"]:
        receiver["webhook_configs"] = [{"url": knobs["alert_webhook_url"], "send_resolved": True}]
    if knobs["alert_email_to"]:
        receiver["email_configs"] = [
            {
                "to": knobs["alert_email_to"],
                "from": knobs["alert_email_from"] or knobs["alert_email_to"],
                "smarthost": knobs["alert_smarthost"],
                "send_resolved": True,
            }
        ]
    return {
        "route": {
            "receiver": "laguna",
            "group_by": ["alertname", "box"],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
        },
        "receivers": [receiver],
    }


def dump(doc: dict) -> bytes:
    return (json.dumps(doc, indent=1, sort_keys=False) + "\n").encode()
