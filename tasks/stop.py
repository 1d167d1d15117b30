# `pyinfra inventory.py tasks/stop.py`: stop serving now. The unit stays installed and enabled,
# so a reboot or `pyinfra inventory.py deploy.py` serves again. Behind a fleet router the box is
# drained first (the release manager waits for its running requests) and stays drained until a
# deploy's gate passes. A router-only host has nothing to stop.
from pyinfra import host
from pyinfra.facts.systemd import SystemdStatus
from pyinfra.operations import server, systemd

from laguna_kit import fleet, knobtypes
from laguna_kit.boxcli import release_command

knobtypes.refuse_bad(host)  # every knob typed, --data too, before anything runs

unit = host.data.unit_name
if "gpu" in fleet.roles(host):
    if host.get_fact(SystemdStatus, services=[unit]).get(unit):
        server.shell(
            name=f"Stop {unit} (drained at the fleet router first, if there is one)",
            commands=[release_command(host.data.kit_dir, unit, "stop")],
        )
    systemd.service(name=f"{unit} stopped", service=unit, running=False)
