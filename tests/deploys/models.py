# Test deploy: only what tasks/models.py needs (it does not depend on the driver or Docker).
from pyinfra import local

local.include("tasks/preflight.py")
local.include("tasks/box_tools.py")
local.include("tasks/models.py")
