"""Names of what the kit keeps on a box, shared by the box tools and the control side's facts."""

VERIFIED_RECORD = ".laguna-verified.json"  # per checkpoint folder: each file's hash and stat
PARTIAL = ".laguna-partial"  # per checkpoint folder: downloads in progress (never taken for a file)
QUARANTINE = ".laguna-quarantine"  # per checkpoint folder: files that failed their hash
STASH = ".laguna-revisions"  # beside the checkpoint folders: other revisions, kept for rollback
UNIT_DIR = "/etc/systemd/system"
RUN_DIR = "/run/laguna-kit"  # a tmpfs on every systemd distribution: gone at each boot
SECRETS_DIR = f"{RUN_DIR}/secrets"  # operations/secrets.py: a secret for the length of a command
REBOOT_MARKER = f"{RUN_DIR}/awaiting-reboot"  # gone once the box rebooted
DEPLOY_LOCK = f"{RUN_DIR}/deploy.lock"  # lock.py: one deploy at a time (flock)
DEPLOY_LOCK_INFO = f"{RUN_DIR}/deploy.lock.json"  # who holds it
KIT_ETC = "/etc/laguna-kit"  # the kit's own configuration files
DOCKER_RELOADED = f"{KIT_ETC}/docker-reloaded"  # touched when dockerd reloaded a daemon.json
FIREWALL_SAFE_RULES = f"{KIT_ETC}/firewall-ssh-open.nft"  # what a revert loads if nothing was
# When the kit last had a unit reload its files (systemctl reload), one empty file per unit: the
# reload that an interrupted run did not get to is found from these and the files' own times.
RELOADED_DIR = f"{RUN_DIR}/reloaded"
FIREWALL_RULES = f"{KIT_ETC}/firewall.nft"  # the kit's nftables table (files/ units load it too)
FIREWALL_PEERS = f"{KIT_ETC}/firewall.d/fleet-router.nft"  # the router's addresses
# Each included by its own pattern (a glob matching nothing is no error; a file whose sets the
# rules no longer define is not read): loaded with the rules.
FIREWALL_PEERS_GLOB = f"{KIT_ETC}/firewall.d/fleet-router*.nft"
FIREWALL_FILE_PEERS = f"{KIT_ETC}/firewall.d/fleet-peers.nft"  # the fleet's GPU boxes' addresses
FIREWALL_FILE_PEERS_GLOB = f"{KIT_ETC}/firewall.d/fleet-peers*.nft"
PEER_FILES_UNIT = "laguna-peer-files.service"  # nginx serving the verified checkpoints to the fleet
PEER_FILES_CONFIG = f"{KIT_ETC}/peer-files-nginx.conf"
FIREWALL_PULLERS = f"{KIT_ETC}/firewall.d/fleet-pullers.nft"  # on the cache host: the GPU boxes
FIREWALL_PULLERS_GLOB = f"{KIT_ETC}/firewall.d/fleet-pullers*.nft"
REGISTRY_CACHE_UNIT = "laguna-registry-cache.service"  # the fleet's image cache (docker-registry)
REGISTRY_CACHE_CONFIG = f"{KIT_ETC}/registry-cache.json"
FIREWALL_MONITOR = f"{KIT_ETC}/firewall.d/fleet-monitor.nft"  # the monitor's addresses
FIREWALL_MONITOR_GLOB = f"{KIT_ETC}/firewall.d/fleet-monitor*.nft"
FIREWALL_OPERATORS = f"{KIT_ETC}/firewall.d/fleet-operators.nft"  # on the monitor host
FIREWALL_OPERATORS_GLOB = f"{KIT_ETC}/firewall.d/fleet-operators*.nft"
MONITOR_DIR = f"{KIT_ETC}/monitor"  # the monitor host's Prometheus/Alertmanager files
MONITOR_USER = "prometheus"  # the user Debian's prometheus packages run them as
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"  # node exporter's textfile folder (Debian's)
GPU_METRICS_UNIT = "laguna-gpu-metrics"  # .service + .timer: tasks/metrics.py
METRICS_RELAY_UNIT = "laguna-metrics-relay.service"  # vLLM's /metrics alone, for the monitor
FIREWALL_WATCH = "laguna-firewall-watch.service"  # loads the table again after a flush
ROUTER_DRAIN = "router-drain"  # under kit_dir: while it exists the box's router agent says "drain"
ROUTER_UNIT = "laguna-router.service"  # the fleet router's HAProxy (tasks/router.py)
ROUTER_USER = "haproxy"  # the user Debian's and Ubuntu's haproxy package runs it as
ROUTER_ADMIN_SOCKET = "/run/laguna-router/admin.sock"  # its runtime API
ROUTER_CONFIG = f"{KIT_ETC}/haproxy.cfg"  # the kit's own (the distribution's is left alone)
ROUTER_KEYS = f"{KIT_ETC}/router-api-keys.sha256"  # sha256 of each "Bearer <key>", never a key
ROUTER_METRICS_KEYS = f"{KIT_ETC}/router-metrics-key.sha256"  # the monitor's key: metrics alone
ROUTER_AGENT = "router-agent.json"  # under kit_dir: the box's API port and drain limits
ROUTER_CHECKS_DIR = "/run/laguna-router-agent"  # <replica>.checks: the router's checks, counted
REPLICAS = "replicas"  # under kit_dir: replica n > 1's own state folder, replicas/<n>


def releases_dir(kit_dir: str) -> str:
    return f"{kit_dir}/releases"


def gate_result(kit_dir: str) -> str:
    """The last gate's JSON result (written by the gate, read by status and the deploy)."""
    return f"{kit_dir}/state/last-gate.json"


# The kit's listeners besides the serving unit (unit_name, a knob): each requires the firewall unit,
# and the firewall watch stops them when the table cannot be loaded again.
KIT_LISTENERS = (ROUTER_UNIT, PEER_FILES_UNIT, REGISTRY_CACHE_UNIT, METRICS_RELAY_UNIT)
