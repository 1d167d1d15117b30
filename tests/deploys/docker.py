# Test deploy: Docker alone and the image pull (its tests need neither the driver nor the
# checkpoints).
from pyinfra import local

local.include("tasks/preflight.py")
local.include("tasks/docker.py")
local.include("tasks/image_pull.py")
