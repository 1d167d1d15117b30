# The upstream recipe, step by step: `pyinfra inventory.py deploy.py` (re-run to upgrade).
from pyinfra import local

local.include("tasks/preflight.py")  # refuse wrong hardware or driver before anything changes
local.include("tasks/lock.py")  # one deploy at a time (a killed run frees it)
local.include("tasks/base.py")  # curl, ca-certificates, gnupg: what later steps fetch with
local.include("tasks/driver.py")
local.include("tasks/container_toolkit.py")
local.include("tasks/docker.py")
local.include("tasks/box_tools.py")  # the kit's downloader, release manager, gate, firewall loader
local.include("tasks/firewall.py")  # before anything serves: new connections only over the tailnet
local.include("tasks/models.py")
local.include("tasks/image.py")
local.include("tasks/tailscale.py")
local.include("tasks/service.py")  # its unit requires the firewall unit
local.include("tasks/validate.py")
