# `.venv/bin/pyinfra inventory.py tasks/undrain.py --limit BOX`: the fleet router sends BOX's
# replicas requests again (within a second), ending a drain by tasks/drain.py, by hand or by an
# interrupted run. `--data replica=2`: that replica alone.
from pyinfra import host

from laguna_kit.domain import fleet, replicas
from laguna_kit.knobs import check
from laguna_kit.operations.releases import replica_drained

check.refuse_bad(host)  # every knob typed, --data too, before anything runs

if "gpu" in fleet.roles(host):  # a router, monitor or cache host serves no replica
    wanted = host.data.get("replica")
    every = replicas.of(host)
    serving = [r for r in every if wanted in (None, r.number)]
    problem = (
        'no fleet router in this hosts file (roles = ["router"]): nothing to drain at'
        if fleet.router_of(host.state.inventory) is None
        else f"replica {wanted}: this box serves {len(every)}"
        if not serving
        else None
    )
    for r in serving or every[:1]:
        replica_drained(
            name="Back in the fleet router's rotation"
            + (f" ({r.label})" if len(every) > 1 else ""),
            kit_dir=host.data.kit_dir,
            unit=r.unit,
            drained=False,
            state_dir=r.state_dir,
            problem=problem,
        )
