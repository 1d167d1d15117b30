# Test deploy: Docker alone (its tests need neither the driver nor the checkpoints).
from pyinfra import local

local.include("tasks/preflight.py")
local.include("tasks/docker.py")
