# The upstream recipe, step by step: `pyinfra inventory.py deploy.py` (re-run to upgrade).
from pyinfra import local

local.include("tasks/preflight.py")  # refuse wrong hardware before anything changes
local.include("tasks/driver.py")
local.include("tasks/container_toolkit.py")
local.include("tasks/docker.py")
local.include("tasks/box_tools.py")  # the kit's downloader, release manager and gate on the box
local.include("tasks/models.py")
local.include("tasks/image.py")
local.include("tasks/service.py")
local.include("tasks/tailscale.py")
local.include("tasks/firewall.py")  # API port on the tailnet only; SSH untouched
local.include("tasks/validate.py")
