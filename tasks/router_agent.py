# A GPU box of a fleet with a router: the router's agent check asks this box, each second,
# whether to send it new requests ("drain" while the kit restarts it until its gate passes;
# laguna_release.py drains first and waits for running requests), and the kit's firewall lets
# only the router's tailnet addresses reach the API and the agent (read from the router now:
# fleet.py). A box whose hosts file has no router (any more) has no agent.
import json

from pyinfra import host

from laguna_kit.boxtools.layout import (
    FIREWALL_PEERS,
    FIREWALL_RULES,
    ROUTER_AGENT,
    ROUTER_CHECKS_DIR,
    ROUTER_DRAIN,
    UNIT_DIR,
)
from laguna_kit.domain import fleet, replicas
from laguna_kit.operations.files import kit_file
from laguna_kit.operations.firewall import fleet_peers_allowed
from laguna_kit.operations.router import router_agent_removed
from laguna_kit.operations.systemd import service_running, unit_installed

d = host.data
SOCKET = "laguna-router-agent.socket"
UNIT_FILES = [f"{UNIT_DIR}/{SOCKET}", f"{UNIT_DIR}/laguna-router-agent@.service"]
if fleet.router_of(host.state.inventory) is not None:
    serving = replicas.of(host)

    def agent(r):  # read by laguna_release.py before it restarts the replica's unit
        return {
            "api_port": r.port,
            "socket": SOCKET,
            # the router's own checks of this replica, counted by the agent
            "checks": f"{ROUTER_CHECKS_DIR}/{r.number}.checks",
            "drain_timeout_s": d.router_drain_timeout_s,
            "check_interval_ms": d.router_check_interval_ms,
            "replicas": len(serving),  # the socket answers each replica's check
        }

    unit_installed(
        name="Router agent: its socket, its answer and the release manager's drain settings",
        unit=SOCKET,
        files=[
            (
                kit_file("files/laguna-router-agent.socket.j2", agent_port=d.router_agent_port),
                UNIT_FILES[0],
                "644",
            ),
            (
                kit_file(
                    "files/laguna-router-agent@.service.j2",
                    kit_dir=d.kit_dir,
                    checks_dir=ROUTER_CHECKS_DIR,
                    replicas=[(r.number, r.port, f"{r.state_dir}/{ROUTER_DRAIN}") for r in serving],
                ),
                UNIT_FILES[1],
                "644",
            ),
            *(
                (
                    (json.dumps(agent(r), indent=1) + "\n").encode(),
                    f"{r.state_dir}/{ROUTER_AGENT}",
                    "644",
                )
                for r in serving
            ),
        ],
    )
    service_running(name="Router agent listening", service=SOCKET)
    fleet_peers_allowed(
        role="router",
        name="API and agent answer the router alone on the tailnet",
        kit_dir=d.kit_dir,
        rules=FIREWALL_RULES,
        peers_file=FIREWALL_PEERS,
    )
else:
    router_agent_removed(
        name="No router in the hosts file: no router agent",
        kit_dir=d.kit_dir,
        unit_files=UNIT_FILES,
        peers_file=FIREWALL_PEERS,
        socket_unit=SOCKET,
        state_dirs=[r.state_dir for r in replicas.of(host)],
    )
