# `pyinfra inventory.py tasks/stop.py`: stop serving now. The unit stays installed and enabled,
# so a reboot or `pyinfra inventory.py deploy.py` serves again.
from pyinfra import host
from pyinfra.operations import systemd

systemd.service(name=f"Stop {host.data.unit_name}", service=host.data.unit_name, running=False)
