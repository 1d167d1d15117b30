# `.venv/bin/pyinfra inventory.py tasks/drain.py --limit BOX`: the fleet router sends BOX's
# replicas nothing new; the task returns once their running requests ended (maintenance, a suspect
# card). `--data replica=2`: that replica alone. It lasts, across reboots and deploys, until
# tasks/undrain.py.
from pyinfra import host

from laguna_kit.knobs import check
from laguna_kit.operations.releases import replicas_drained

check.refuse_bad(host)  # every knob typed, --data too, before anything runs
replicas_drained(host, drained=True, name="Drained at the fleet router (running requests ended)")
