# The fleet's one endpoint, on the host the hosts file gives roles = ["router"]: HAProxy from the
# distribution (held: no upgrade under a running fleet), in a unit of the kit's own with the kit's
# own configuration. Backends are the GPU boxes by tailnet address, each judged by vLLM's /health
# and by its agent (the kit drains a box before restarting it); clients need an API key; the same
# session header lands on the same box. docs/explanation.md says why HAProxy.
from pyinfra import host

from laguna_kit.boxtools.layout import (
    ROUTER_ADMIN_SOCKET,
    ROUTER_CONFIG,
    ROUTER_KEYS,
    ROUTER_METRICS_KEYS,
    ROUTER_UNIT,
)
from laguna_kit.operations.packages import apt_present
from laguna_kit.operations.router import router_configured
from laguna_kit.operations.systemd import service_running

d = host.data
CONFIG, UNIT, ADMIN_SOCKET = ROUTER_CONFIG, ROUTER_UNIT, ROUTER_ADMIN_SOCKET
KEYS = ROUTER_KEYS

apt_present(name="HAProxy (held)", packages=["haproxy"], hold=True)
router_configured(
    name="Router: its unit, the GPU boxes on the tailnet, API key hashes (reloaded, or restarted)",
    config=CONFIG,
    keys_file=KEYS,
    metrics_keys_file=ROUTER_METRICS_KEYS,
    unit=UNIT,
    keys_env=d.router_api_keys_env,
    keys_path=d.router_api_keys_file,
    settings=dict(
        port=d.router_port,
        metrics_port=d.router_metrics_port,
        agent_port=d.router_agent_port,
        session_header=d.router_session_header,
        timeout_s=d.router_timeout_s,
        queue_timeout_s=d.router_queue_timeout_s,
        interval_ms=d.router_check_interval_ms,
        admin_socket=ADMIN_SOCKET,
    ),
)
service_running(name="Router running and enabled", service=UNIT)
