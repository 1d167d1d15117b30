# The champion (or the chosen serving_mode) as a numbered release: the systemd unit rendered from
# files/laguna-vllm.service.j2 and the profile table, installed and started only when it changed. A
# box with gpu_count x k cards serves k replicas (laguna_kit/domain/replicas.py), each its own
# release: one restarts and passes its gate before the next is touched, so the box keeps serving.
from pyinfra import host

from laguna_kit.domain import replicas
from laguna_kit.knobs.declared import knobs_of
from laguna_kit.operations.releases import release_deployed, release_validated, replicas_retired
from laguna_kit.run import gate_failures

d = host.data
serving = replicas.of(host)
for r in serving:
    release_deployed(
        name=f"Serving release ({d.serving_mode}) is the running one"
        + (f" on {r.label} (GPUs {r.devices}, port {r.port})" if len(serving) > 1 else ""),
        knobs=replicas.knobs_for(knobs_of(d), r),
        kit_dir=d.kit_dir,
        unit=r.unit,
        state_dir=r.state_dir,
    )
    if r is not serving[-1] and not d.skip_validation:  # the last one: tasks/validate.py
        release_validated(
            name=f"{gate_failures.GATE_OP} on {r.label} before the next replica restarts",
            kit_dir=d.kit_dir,
            unit=r.unit,
            keep_releases=d.keep_releases,
            force_slower=d.force_slower,
            state_dir=r.state_dir,
        )
replicas_retired(
    name="No replica beyond what the box's cards hold (or replicas_per_box)",
    kit_dir=d.kit_dir,
    unit=d.unit_name,
    keep=len(serving),
)
