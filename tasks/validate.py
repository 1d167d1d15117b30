# The recipe's rule: only a fresh near-limit prompt plus generation proves long-context serving.
# Runs on the box against 127.0.0.1 whenever the current release has not passed it yet, with the
# recipe's benchmark shape: a new release decoding below min_decode_ratio x the previous one's
# fails too (force_slower accepts it). A failure
# rolls back to the previous release, validates that, and fails the deploy. Then the network view
# from the control machine: the API answers on the tailnet, not on the box's ordinary address.
# Each replica of a box is gated (tasks/service.py gates all but the last before the next restarts).
from pyinfra import host, logger

from laguna_kit.domain import replicas
from laguna_kit.operations.network import api_exposure_checked
from laguna_kit.operations.releases import release_validated
from laguna_kit.run import gate_failures

d = host.data
serving = replicas.of(host)
if d.skip_validation:
    logger.warning(f"{host.name}: skip_validation is set: this deploy proves nothing about serving")
else:
    for r in serving:
        release_validated(
            name=f"{gate_failures.GATE_OP}: readiness, smoke, fresh long-context prompt, DFlash "
            "acceptance" + (f" ({r.label})" if len(serving) > 1 else ""),
            kit_dir=d.kit_dir,
            unit=r.unit,
            keep_releases=d.keep_releases,
            force_slower=d.force_slower,
            state_dir=r.state_dir,
        )
for r in serving:
    api_exposure_checked(
        name="API on the tailnet only, seen from the control machine"
        + (f" ({r.label}, port {r.port})" if len(serving) > 1 else ""),
        port=r.port,
    )
