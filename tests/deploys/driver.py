# Test deploy: the driver alone (its repository, packages, holds and reboot), for drills of the
# driver's packaging that need neither Docker, the checkpoints nor the service.
from laguna_kit.run import steps

steps.include("tasks/base.py")
steps.include("tasks/driver.py")
