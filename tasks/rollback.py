# `pyinfra inventory.py tasks/rollback.py`: run the previous release again (or one by number:
# `--data rollback_to=3`), then validate it. Checkpoints and images of older releases are kept.
# A box with several replicas rolls each back in turn, gated before the next. Each has its own
# numbers: rollback_to names a release of replica 1, and the others run their own release of the
# same version (image, checkpoints, flags), or stay as they are where they have none; without
# rollback_to each goes to its previous release, if it has one.
from pyinfra import host

from laguna_kit.domain import fleet, replicas
from laguna_kit.knobs import check
from laguna_kit.operations.releases import release_rolled_back, release_validated
from laguna_kit.operations.server import deploy_locked
from laguna_kit.run import gate_failures

check.refuse_bad(host)  # every knob typed, --data too, before anything runs

if "gpu" in fleet.roles(host):  # a router-only host has no releases
    deploy_locked(
        name="One deploy or rollback at a time on this box",
        kit_dir=host.data.kit_dir,
        wait_s=host.data.deploy_lock_wait_s,
    )

    gate_failures.watch(host.state)
    behind_router = fleet.router_of(host.state.inventory) is not None
    serving = replicas.of(host)
    wanted = host.data.get("rollback_to")
    for r in serving:
        # behind a router, or beside another replica: one at a time, each gated before the next
        # is drained, so the fleet (the box) keeps serving; a failed gate stops the ones after it
        gated = behind_router or len(serving) > 1
        to = wanted if r.number == 1 else None
        label = f" ({r.label})" if len(serving) > 1 else ""
        release_rolled_back(
            name=(
                f"{gate_failures.GATE_OP} after rolling back, one box at a time{label}"
                if gated
                else "Roll back to the previous release"
                if to is None
                else f"Roll back to release {to}"
            ),
            kit_dir=host.data.kit_dir,
            unit=r.unit,
            to=to,
            gated=gated,
            state_dir=r.state_dir,
            like=wanted if r.number > 1 else None,
            _serial=behind_router,
        )
        release_validated(
            name=f"{gate_failures.GATE_OP} on the restored release{label}",
            kit_dir=host.data.kit_dir,
            unit=r.unit,
            auto_rollback=False,
            state_dir=r.state_dir,
        )
