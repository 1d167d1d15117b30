"""Writes files/grafana-laguna.json: a Grafana dashboard for users who run Grafana (the kit does
not install it) on the metric names the kit's Prometheus scrapes (laguna_kit/domain/monitoring.py).
Import it in Grafana (Dashboards > New > Import) and pick the kit's Prometheus as the data source.
tests/unit/domain/test_monitoring.py checks the file is this script's output."""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "files/grafana-laguna.json"

PANELS = [
    # (title, unit, [(expr, legend)])
    ("Boxes up (vLLM /metrics answers)", "none", [('up{job="vllm"}', "{{box}}")]),
    ("Requests running / waiting", "none", [
        ("sum by (box) (vllm:num_requests_running)", "{{box}} running"),
        ("sum by (box) (vllm:num_requests_waiting)", "{{box}} waiting"),
    ]),
    ("KV cache usage", "percentunit", [("max by (box) (vllm:kv_cache_usage_perc)", "{{box}}")]),
    ("Generated tokens/s (all requests)", "none", [
        ("sum by (box) (rate(vllm:generation_tokens_total[1m]))", "{{box}}"),
    ]),
    ("Decode tok/s per request vs the release's recorded figure", "none", [
        ("sum by (box) (rate(vllm:request_time_per_output_token_seconds_count[5m])) / sum by "
         "(box) (rate(vllm:request_time_per_output_token_seconds_sum[5m]))", "{{box}} live"),
        ("max by (box) (laguna_release_decode_tok_s)", "{{box}} recorded at the gate"),
    ]),
    ("Time to first token, p50 / p95", "s", [
        ("histogram_quantile(0.5, sum by (box, le) "
         "(rate(vllm:time_to_first_token_seconds_bucket[5m])))", "{{box}} p50"),
        ("histogram_quantile(0.95, sum by (box, le) "
         "(rate(vllm:time_to_first_token_seconds_bucket[5m])))", "{{box}} p95"),
    ]),
    ("DFlash acceptance", "percentunit", [
        ("sum by (box) (rate(vllm:spec_decode_num_accepted_tokens_total[5m])) / sum by (box) "
         "(rate(vllm:spec_decode_num_draft_tokens_total[5m]))", "{{box}}"),
    ]),
    ("GPU temperature", "celsius", [("laguna_gpu_temperature_celsius", "{{box}} GPU {{gpu}}")]),
    ("GPU power", "watt", [("laguna_gpu_power_watts", "{{box}} GPU {{gpu}}")]),
    ("GPU memory used", "percentunit", [
        ("laguna_gpu_memory_used_bytes / laguna_gpu_memory_total_bytes", "{{box}} GPU {{gpu}}"),
    ]),
    ("GPU utilisation", "percentunit", [("laguna_gpu_utilization_ratio", "{{box}} GPU {{gpu}}")]),
    ("Clocks held down (heat, power)", "none", [
        ("laguna_gpu_hw_thermal_slowdown + laguna_gpu_sw_thermal_slowdown + "
         "laguna_gpu_power_capped", "{{box}} GPU {{gpu}}"),
    ]),
    ("Xid errors since boot", "none", [("laguna_gpu_xid_errors_all", "{{box}}")]),
    ("Free space (model_dir, Docker's root)", "percentunit", [
        ("laguna_path_avail_ratio", "{{box}} {{path}}"),
    ]),
    ("Router: boxes UP", "none", [('sum(haproxy_server_status{proxy="laguna",state="UP"})', "UP")]),
    ("Alerts firing", "none", [('count by (alertname) (ALERTS{alertstate="firing"})',
                                "{{alertname}}")]),
]  # fmt: skip


def dashboard() -> dict:
    panels = []
    for i, (title, unit, targets) in enumerate(PANELS):
        panels.append(
            {
                "id": i + 1,
                "type": "timeseries",
                "title": title,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [
                    {"refId": chr(65 + j), "expr": expr, "legendFormat": legend}
                    for j, (expr, legend) in enumerate(targets)
                ],
            }
        )
    return {
        "title": "Laguna fleet",
        "uid": "laguna-fleet",
        "tags": ["laguna", "vllm"],
        "timezone": "browser",
        "schemaVersion": 39,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "type": "datasource",
                    "query": "prometheus",
                    "label": "Prometheus",
                }
            ]
        },
        "panels": panels,
    }


def text() -> str:
    return json.dumps(dashboard(), indent=1) + "\n"


if __name__ == "__main__":
    OUT.write_text(text())
    print(f"wrote {OUT}", file=sys.stderr)
