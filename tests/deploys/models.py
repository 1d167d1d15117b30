# Test deploy: only what tasks/models.py needs (it does not depend on the driver or Docker).
from laguna_kit.run import steps

steps.include("tasks/preflight.py")
steps.include("tasks/box_tools.py")
steps.include("tasks/download.py")
steps.include("tasks/models.py")
