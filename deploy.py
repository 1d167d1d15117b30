# The upstream recipe, step by step: `pyinfra inventory.py deploy.py` (re-run to upgrade).
# steps.include is local.include that also times each step (a summary is printed at the end).
from laguna_kit import steps

steps.include("tasks/preflight.py")  # refuse wrong hardware or driver before anything changes
steps.include("tasks/lock.py")  # one deploy at a time (a killed run frees it)
steps.include("tasks/base.py")  # curl, ca-certificates, gnupg: what later steps fetch with
steps.include("tasks/box_tools.py")  # the kit's downloader, release manager, gate, firewall loader
# Before anything serves, and before the download: connections opened before the box's first
# conntrack rules are picked up mid-stream, and with window scaling unknown they stall.
steps.include("tasks/firewall.py")  # new connections only over the tailnet
steps.include("tasks/download.py")  # the checkpoints start downloading box-side, not waited for
steps.include("tasks/driver.py")
# The driver's reboot ends a download still running: it goes on from the bytes on disk right away.
steps.include("tasks/download.py", "(after the driver)")
steps.include("tasks/container_toolkit.py")
steps.include("tasks/docker.py")
steps.include("tasks/tailscale.py")  # needs neither the checkpoints nor the image: before the wait
steps.include("tasks/models.py")  # waits for the download (progress every 30 s), checks it
steps.include("tasks/image.py")
steps.include("tasks/service.py")  # its unit requires the firewall unit
steps.include("tasks/validate.py")
