"""What the monitor host runs, as data: Prometheus's scrape configuration, the alert rules and
Alertmanager's routes, built from the fleet's tailnet addresses (parsed: fleet.tailnet_addresses)
and the knobs (typed: knobs/shapes.py). Written as JSON, which Prometheus and Alertmanager read
as the YAML it is a subset of: no value is ever pasted into YAML text (the alert rules are a
rules file, files/laguna-alerts.rules.yml, rendered with the knobs' values and read back).

Metric names: vLLM's V1 engine (vllm/v1/metrics/loggers.py, docs/design/metrics.md, v0.25.1):
vllm:num_requests_running/_waiting, vllm:kv_cache_usage_perc (0-1), vllm:generation_tokens_total,
vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds (one per engine step: several
tokens under DFlash) and vllm:request_time_per_output_token_seconds (one per request: the decode
speed the alert reads) (histograms); HAProxy's
built-in exporter (haproxy_server_status: a box UP at the router; its
haproxy_backend_active_servers read 0 with both boxes UP on Debian's 2.6.12, seen on the harness);
node exporter; and the kit's own laguna_* from node exporter's textfile collector
(boxtools/gpumetrics.py).
"""

from __future__ import annotations

import json
from typing import Any

import jinja2
import yaml

from .. import KIT_ROOT
from .fleet import host_port


def prometheus_config(
    boxes: list[dict],
    router: dict | None,
    others: list[dict],
    own: str,
    knobs: dict,
    rules_file: str,
    metrics_key_file: str,
) -> dict:
    """boxes: [{"name", "address", "api_port", "ports": each replica's API port, "relay_port": the
    box's metrics relay}] (the GPU hosts on the tailnet); router: {"name",
    "address"} or None; others: [{"name", "address"}] (hosts with node exporter that are not
    boxes: the router's host); own: this host's tailnet address (its own exporters)."""
    every = f"{knobs['monitor_scrape_interval_s']}s"
    node_port = knobs["node_exporter_port"]
    # one target per replica (a box with 8 cards serves two): replica 1 labelled as a box always
    # was. Scraped through the box's relay (boxtools/metricsrelay.py: /metrics/<replica> alone),
    # never the API port; `instance` stays the replica's API address, as before the relay.
    vllm = [
        {
            "targets": [host_port(b["address"], b["relay_port"])],
            "labels": {
                "box": b["name"],
                **({"replica": str(n)} if n > 1 else {}),
                "instance": host_port(b["address"], port),
                "__metrics_path__": f"/metrics/{n}",
            },
        }
        for b in boxes
        for n, port in enumerate(b.get("ports") or [b["api_port"]], start=1)
    ]
    node = [
        {"targets": [host_port(h["address"], node_port)], "labels": {"box": h["name"]}}
        for h in [*boxes, *others]
    ]
    jobs: list[dict[str, Any]] = [
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
                # the router's metrics page takes its metrics-only key (fleet.metrics_key)
                "authorization": {"type": "Bearer", "credentials_file": metrics_key_file},
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
RULES_FILE = "files/laguna-alerts.rules.yml"
# << knob >> in the rules file; Prometheus's own {{ ... }} templates stay as they are
_RULES = jinja2.Environment(
    variable_start_string="<<",
    variable_end_string=">>",
    block_start_string="<%",
    block_end_string="%>",
    comment_start_string="<#",
    comment_end_string="#>",
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
)


def alert_rules(knobs: dict, with_router: bool) -> dict:
    """The alerts the kit promises (files/laguna-alerts.rules.yml), thresholds from the knobs;
    the router's only with a router."""
    text = _RULES.from_string((KIT_ROOT / RULES_FILE).read_text()).render(knobs)
    groups = {g["name"]: g["rules"] for g in yaml.safe_load(text)["groups"]}
    rules = groups["laguna"] + (groups["laguna-router"] if with_router else [])
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
