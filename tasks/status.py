# `pyinfra inventory.py tasks/status.py`: unit state, release, digest, GPU memory, endpoint health,
# last gate result. Reads only.
from pyinfra import host

from laguna_kit.operations.reports import serving_reported

serving_reported(
    name="Serving status",
    kit_dir=host.data.kit_dir,
    unit=host.data.unit_name,
    port=host.data.api_port,
)
