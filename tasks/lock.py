# One deploy at a time on a box: a second operator's run (or a re-run while the first still runs)
# waits `deploy_lock_wait_s`, then fails naming the holder. The lock lives as long as this run's SSH
# connection, so a killed run frees it. (A first deploy has no lock until the box tools are in.)
from pyinfra import host

from laguna_kit.domain import fleet
from laguna_kit.operations.releases import roll_unbroken
from laguna_kit.operations.server import deploy_locked

if "gpu" in fleet.roles(host):  # before anything on the box: a roll stops at its first failed gate
    roll_unbroken(name="The roll goes on only while every box's gate passed")

deploy_locked(
    name="One deploy at a time on this box",
    kit_dir=host.data.kit_dir,
    wait_s=host.data.deploy_lock_wait_s,
)
