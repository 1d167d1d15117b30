# The upstream recipe, step by step: `pyinfra inventory.py deploy.py` (re-run to upgrade).
# steps.include is local.include that also times each step (a summary is printed at the end).
# A GPU box (the default role) runs every step; the fleet's router (roles = ["router"] in the
# hosts file) runs the ones that keep it on the tailnet, then tasks/router.py; the monitor
# (roles = ["monitor"]) tasks/monitor.py; the image cache (roles = ["cache"])
# tasks/registry_cache.py.
from pyinfra import host

from laguna_kit.domain import fleet
from laguna_kit.knobs import check
from laguna_kit.run import steps

# Every knob typed (hosts file, group data and --data alike) before anything is planned with it.
check.refuse_bad(host)
gpu = "gpu" in fleet.roles(host)
router = "router" in fleet.roles(host)

if router:
    steps.include("tasks/router_keys.py")  # refuse a router without API keys before any change
if gpu:
    steps.include("tasks/preflight.py")  # refuse wrong hardware or driver before anything changes
else:
    steps.include("tasks/distribution.py")  # refuse a distribution the kit does not know
steps.include("tasks/lock.py")  # one deploy at a time (a killed run frees it)
steps.include("tasks/base.py")  # curl, ca-certificates, gnupg: what later steps fetch with
steps.include("tasks/box_tools.py")  # the kit's downloader, release manager, gate, firewall loader
# Before anything serves, and before the download: connections opened before the box's first
# conntrack rules are picked up mid-stream, and with window scaling unknown they stall.
steps.include("tasks/firewall.py")  # new connections only over the tailnet
# Needs neither the driver, the checkpoints nor the image: before the download, since a fleet's
# boxes fetch checkpoint files from each other over the tailnet.
steps.include("tasks/tailscale.py")
if "cache" in fleet.roles(host):  # before the boxes' Docker pulls through it
    steps.include("tasks/registry_cache.py")
if gpu:
    steps.include("tasks/peer_files.py")  # in a fleet: the verified checkpoints for the other boxes
    steps.include("tasks/download.py")  # the checkpoints start downloading box-side, not waited for
    steps.include("tasks/driver.py")
    # The driver's reboot ends a download still running: it goes on from the bytes on disk.
    steps.include("tasks/download.py", "(after the driver)")
    steps.include("tasks/container_toolkit.py")
    steps.include("tasks/docker.py")
if gpu or "cache" in fleet.roles(host):  # the cache host too: it orders the wait after its warming
    steps.include("tasks/image_pull.py")  # after the cache holds the image: the pull, box-side
# After every host of the run joined the tailnet: the router and the boxes read each other's
# addresses as these run (laguna_kit/domain/fleet.py).
if gpu:  # with a router in the hosts file; without one, an agent left from before is removed
    steps.include("tasks/router_agent.py")  # before the serving unit restarts: it drains first
if router:
    steps.include("tasks/router.py")
steps.include("tasks/metrics.py")  # with a monitor: node exporter, GPU metrics, its firewall set
if "monitor" in fleet.roles(host):
    steps.include("tasks/monitor.py")  # Prometheus + Alertmanager: every host of the run is joined
if gpu:
    steps.include("tasks/models.py")  # waits for the download (progress every 30 s), checks it
    steps.include("tasks/scrub.py")  # a file a peer refused from here, and a scheduled re-hash
    steps.include("tasks/image.py")
    steps.include("tasks/service.py")  # its unit requires the firewall unit
    steps.include("tasks/validate.py")
steps.include("tasks/summary.py")  # read for the summary printed at the end of the run
