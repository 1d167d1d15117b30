# `.venv/bin/pyinfra inventory.py tasks/undrain.py --limit BOX`: the fleet router sends BOX's
# replicas requests again (within a second), ending a drain by tasks/drain.py, by hand or by an
# interrupted run. `--data replica=2`: that replica alone.
from pyinfra import host

from laguna_kit.knobs import check
from laguna_kit.operations.releases import replicas_drained

check.refuse_bad(host)  # every knob typed, --data too, before anything runs
replicas_drained(host, drained=False, name="Back in the fleet router's rotation")
