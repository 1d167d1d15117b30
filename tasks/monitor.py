# The fleet's monitor, on the host with roles = ["monitor"] (the router's host or any tailnet node):
# Prometheus, Alertmanager and node exporter from the distribution, held like the router; the
# distribution's own services run with the kit's files (laguna_kit/domain/monitoring.py), bound to
# the tailnet address. Prometheus scrapes every host of the hosts file, evaluates the kit's alerts
# and sends them to Alertmanager (receivers: alert_webhook_url, alert_email_to). Of the tailnet
# peers only the operators (monitor_operators) reach them.
from pyinfra import host

from laguna_kit.boxtools.layout import FIREWALL_OPERATORS, FIREWALL_RULES
from laguna_kit.domain import fleet
from laguna_kit.operations.firewall import fleet_peers_allowed
from laguna_kit.operations.monitor import ALERTMANAGER, PROMETHEUS, monitor_configured
from laguna_kit.operations.packages import apt_present
from laguna_kit.operations.systemd import service_running

d = host.data
SERVICES = (PROMETHEUS, ALERTMANAGER)
KNOBS = (
    "node_exporter_port",
    "prometheus_port",
    "alertmanager_port",
    "router_metrics_port",
    "monitor_scrape_interval_s",
    "monitor_retention_days",
    "alert_box_down_for_s",
    "alert_kv_cache_usage",
    "alert_waiting_requests",
    "alert_gpu_temp_c",
    "alert_gpu_memory_ratio",
    "alert_disk_free_ratio",
    "alert_decode_ratio",
    "alert_metrics_stale_s",
    "alert_webhook_url",
    "alert_email_to",
    "alert_email_from",
    "alert_smarthost",
)

fleet_peers_allowed(
    role="operators",
    name="Prometheus and Alertmanager answer the operators alone on the tailnet",
    kit_dir=d.kit_dir,
    rules=FIREWALL_RULES,
    peers_file=FIREWALL_OPERATORS,
)
apt_present(
    name="Prometheus, Alertmanager and node exporter (held)",
    packages=["prometheus", "prometheus-alertmanager", "prometheus-node-exporter"],
    hold=True,
)
router = fleet.router_of(host.state.inventory)
monitor_configured(
    name="Prometheus: every host on the tailnet, the kit's alerts; Alertmanager: the receivers "
    "(each run with the kit's files, restarted when they changed)",
    knobs={k: d.get(k) for k in KNOBS},
    # the router's metrics page takes a key of its own (never a client key on this host)
    metrics_key=(
        fleet.metrics_key(fleet.api_keys(d.router_api_keys_env, d.router_api_keys_file))
        if router
        else None
    ),
)
for service in SERVICES:
    service_running(name=f"{service} running and enabled", service=service)
