# Every host of a fleet with a monitor (roles = ["monitor"] in the hosts file): node exporter from
# the distribution; on a GPU box the kit's GPU, release and disk metrics through its textfile
# collector (laguna-gpu-metrics.timer: nvidia-smi, the gate, the free space of model_dir and
# Docker's root) and vLLM's /metrics through the kit's relay (never the API port); and the
# firewall letting the monitor alone of the tailnet peers scrape them. Without a monitor the
# kit's timer, relay and the monitor's addresses go (node exporter stays).
from pyinfra import host
from pyinfra.facts.deb import DebPackages

from laguna_kit.boxtools.layout import (
    FIREWALL_MONITOR,
    FIREWALL_RULES,
    GPU_METRICS_UNIT,
    METRICS_RELAY_UNIT,
    TEXTFILE_DIR,
    UNIT_DIR,
)
from laguna_kit.domain import fleet, replicas
from laguna_kit.operations.files import kit_file
from laguna_kit.operations.firewall import fleet_peers_allowed
from laguna_kit.operations.packages import apt_present
from laguna_kit.operations.systemd import service_running, unit_installed, unit_removed
from laguna_kit.run import memo

d = host.data
UNITS = [f"{UNIT_DIR}/{GPU_METRICS_UNIT}.service", f"{UNIT_DIR}/{GPU_METRICS_UNIT}.timer"]
TIMER = f"{GPU_METRICS_UNIT}.timer"
RELAY = f"{UNIT_DIR}/{METRICS_RELAY_UNIT}"
gpu = "gpu" in fleet.roles(host)
if fleet.monitor_of(host.state.inventory) is not None:
    apt_present(name="Node exporter", packages=["prometheus-node-exporter"])
    service_running(name="Node exporter running", service="prometheus-node-exporter.service")
    if gpu:
        unit_installed(
            name="GPU and release metrics: the kit's collector and its timer",
            unit=TIMER,
            files=[
                (
                    kit_file(
                        "files/laguna-gpu-metrics.service.j2",
                        kit_dir=d.kit_dir,
                        out=f"{TEXTFILE_DIR}/laguna.prom",
                        paths=[d.model_dir, "/var/lib/docker"],
                    ),
                    UNITS[0],
                    "644",
                ),
                (
                    kit_file("files/laguna-gpu-metrics.timer.j2", every_s=d.gpu_metrics_interval_s),
                    UNITS[1],
                    "644",
                ),
            ],
        )
        service_running(name="GPU metrics collected on their timer", service=TIMER)
        relay = kit_file(
            "files/laguna-metrics-relay.service.j2",
            kit_dir=d.kit_dir,
            port=d.metrics_relay_port,
            replicas=[(r.number, r.port) for r in replicas.of(host)],
        )
        unit_installed(
            name="vLLM's /metrics for the monitor: the kit's relay (never the API port)",
            unit=METRICS_RELAY_UNIT,
            enable=[METRICS_RELAY_UNIT],
            files=[(relay, RELAY, "644")],
        )
        service_running(name="Metrics relay running", service=METRICS_RELAY_UNIT)
    if "monitor" not in fleet.roles(host):
        fleet_peers_allowed(
            role="monitor",
            name="Node exporter and vLLM's /metrics answer the monitor alone on the tailnet",
            kit_dir=d.kit_dir,
            rules=FIREWALL_RULES,
            peers_file=FIREWALL_MONITOR,
        )
elif "prometheus-node-exporter" in (memo.fact(host, DebPackages) or {}):
    # (the kit installs node exporter wherever it set up the timer or the monitor's addresses:
    # without it there is nothing of the kit's to remove, and no file to read each run)
    unit_removed(
        name="No monitor in the hosts file: the kit's metrics timer and the monitor's addresses go",
        unit=TIMER,
        paths=UNITS,
        also=[FIREWALL_MONITOR],
    )
    unit_removed(
        name="No monitor in the hosts file: the kit's metrics relay goes",
        unit=METRICS_RELAY_UNIT,
        paths=[RELAY],
    )
