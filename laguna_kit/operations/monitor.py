"""The fleet's monitor: Prometheus and Alertmanager from the distribution, configured by the kit
(laguna_kit/domain/monitoring.py), and each host's side of it (the firewall lets the monitor alone
scrape it)."""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.api import OperationError, operation

from ..boxtools.layout import MONITOR_DIR, MONITOR_USER, UNIT_DIR
from ..domain import fleet, monitoring, replicas
from .files import kit_file
from .systemd import unit_installed

PROMETHEUS = "prometheus.service"  # the distribution's units, run with the kit's files
ALERTMANAGER = "prometheus-alertmanager.service"
PROMETHEUS_ENV = f"{MONITOR_DIR}/prometheus.env"
ALERTMANAGER_ENV = f"{MONITOR_DIR}/alertmanager.env"
CONFIG = f"{MONITOR_DIR}/prometheus.yml"
RULES = f"{MONITOR_DIR}/laguna-alerts.yml"
ALERTS = f"{MONITOR_DIR}/alertmanager.yml"
METRICS_KEY = f"{MONITOR_DIR}/router-metrics-key"  # the router's metrics page alone takes it
EARLIER_KEYS = [f"{MONITOR_DIR}/router-key"]  # a client key an earlier kit left here
# The services' own group reads the files that hold a secret; no other user does.
SECRET = f"640:{MONITOR_USER}"
# Checked before they replace the running ones (promtool and amtool come with the packages).
# --syntax-only (promtool 2.32+, prometheus PR #9909) where the box's promtool has it: Ubuntu
# 22.04's 2.31.2 has not, and checks the files the config names too (in place by then: the key and
# the rules are written first).
SYNTAX_ONLY = (
    "$(promtool check config --help 2>&1 | grep -q -- --syntax-only && echo --syntax-only)"
)
CHECKS = {
    RULES: "promtool check rules %s >&2",
    CONFIG: f"promtool check config {SYNTAX_ONLY} %s >&2",
    ALERTS: "amtool check-config %s >&2",
}


def _first(ips: list[str] | None) -> str | None:
    """The address to reach a host at: IPv4 first (fleet.tailnet_ips sorts it so)."""
    return ips[0] if ips else None


@operation()
def monitor_configured(knobs: dict, metrics_key: str | None):
    """
    Prometheus scrapes every host of the hosts file on the tailnet (vLLM's /metrics of each GPU
    box, node exporter with the kit's GPU and release metrics, the router's HAProxy exporter),
    evaluates the kit's alert rules and sends them to Alertmanager; both bound to this host's
    tailnet address. Every file is checked (promtool, amtool) before it replaces the running one,
    and each service restarts when its files changed (judged from the box: a run cut between the
    two still restarts it next time). The files that hold a secret (the router's metrics key,
    Alertmanager's receivers) travel on stdin and are readable by the services' group alone.

    + knobs: the monitor's knobs (ports, scrape interval, retention, thresholds, receivers)
    + metrics_key: the router's metrics-only key (fleet.metrics_key), or None without a router
    """
    if knobs["alert_email_to"] and not knobs["alert_smarthost"]:
        raise OperationError(
            f"{host.name}: alert_email_to is set but alert_smarthost (host:port of an SMTP server) "
            "is not: set both, or leave alert_email_to empty; nothing was changed"
        )
    own = _first(fleet.tailnet_ips(host))
    if own is None:
        if not host.state.is_executing:
            host.noop("written once the monitor is on the tailnet")
            return
        raise OperationError(
            f"{host.name}: the monitor is not on the tailnet (tailscale status): Prometheus would "
            "have no address to listen on; nothing was changed"
        )
    boxes, others, router = scrape_targets(own, metrics_key)
    port = knobs["prometheus_port"]
    prom_env, am_env = env_files(own, knobs)
    prometheus = [
        *([((metrics_key + "\n").encode(), METRICS_KEY, SECRET)] if router and metrics_key else []),
        (monitoring.dump(monitoring.alert_rules(knobs, router is not None)), RULES, "644"),
        (
            monitoring.dump(
                monitoring.prometheus_config(boxes, router, others, own, knobs, RULES, METRICS_KEY)
            ),
            CONFIG,
            "644",
        ),
        (prom_env, PROMETHEUS_ENV, "644"),
        dropin(PROMETHEUS, PROMETHEUS_ENV),
    ]
    alertmanager = [
        (monitoring.dump(monitoring.alertmanager_config(knobs)), ALERTS, SECRET),
        (am_env, ALERTMANAGER_ENV, "644"),
        dropin(ALERTMANAGER, ALERTMANAGER_ENV),
    ]
    commands = [
        *unit_installed._inner(
            unit=PROMETHEUS, files=prometheus, validate=CHECKS, removed=EARLIER_KEYS
        ),
        *unit_installed._inner(unit=ALERTMANAGER, files=alertmanager, validate=CHECKS),
    ]
    if not commands:
        host.noop(
            f"Prometheus scrapes {len(boxes)} box(es)"
            + (f" and the router {router['name']}" if router else "")
            + f" at {own}:{port}; its files are current"
        )
        return
    yield from commands


def dropin(service: str, env: str) -> tuple[bytes, str, str]:
    """The distribution's service runs with the kit's environment file (its own are left alone)."""
    text = kit_file("files/monitor-dropin.conf.j2", service=service, env=env)
    return text, f"{UNIT_DIR}/{service}.d/laguna-kit.conf", "644"


def scrape_targets(own: str, metrics_key: str | None) -> tuple[list, list, dict | None]:
    """(the GPU boxes, the other hosts, the router or None) to scrape, by tailnet address; a host
    not on the tailnet yet is left out, named."""
    inventory = host.state.inventory
    boxes, others = [], []
    for h in inventory:
        address = _first(fleet.tailnet_ips(h)) if h is not host else own
        if address is None:
            logger.warning(f"monitor: {h.name} is not on the tailnet (yet): not scraped")
            continue
        name = fleet.server_name(h.name)
        if "gpu" in fleet.roles(h):
            boxes.append(
                {
                    "name": name,
                    "address": address,
                    "api_port": int(h.data.api_port),
                    "ports": [r.port for r in replicas.of(h)],
                    "relay_port": int(h.data.metrics_relay_port),
                }
            )
        else:
            others.append({"name": name, "address": address})
    r = fleet.router_of(inventory)
    router_address = (own if r is host else _first(fleet.tailnet_ips(r))) if r is not None else None
    router = (
        {"name": fleet.server_name(r.name), "address": router_address}
        if r is not None and router_address and metrics_key
        else None
    )
    return boxes, others, router


def env_files(own: str, knobs: dict) -> tuple[bytes, bytes]:
    """Prometheus's and Alertmanager's arguments, bound to the monitor's tailnet address."""
    prom = (
        "# Managed by the laguna kit (tasks/monitor.py)\n"
        f'ARGS="--config.file={CONFIG} '
        f"--web.listen-address={fleet.host_port(own, knobs['prometheus_port'])} "
        f"--storage.tsdb.retention.time={knobs['monitor_retention_days']}d "
        "--web.console.templates=/etc/prometheus/consoles "
        '--web.console.libraries=/etc/prometheus/console_libraries"\n'
    )
    am = (
        "# Managed by the laguna kit (tasks/monitor.py): no cluster port (one Alertmanager)\n"
        f'ARGS="--config.file={ALERTS} '
        f"--web.listen-address={fleet.host_port(own, knobs['alertmanager_port'])} "
        '--cluster.listen-address="\n'
    )
    return prom.encode(), am.encode()
