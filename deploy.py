# The upstream recipe, step by step: `pyinfra inventory.py deploy.py` (re-run to upgrade).
from pyinfra import local

local.include("tasks/docker.py")
