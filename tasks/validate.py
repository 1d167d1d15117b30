# The recipe's rule: only a fresh near-limit prompt plus generation proves long-context serving.
# Runs on the box against 127.0.0.1 whenever the current release has not passed it yet, with the
# recipe's benchmark shape: a new release decoding below min_decode_ratio x the previous one's
# fails too (force_slower accepts it). A failure
# rolls back to the previous release, validates that, and fails the deploy. Then the network view
# from the control machine: the API answers on the tailnet, not on the box's ordinary address.
from pyinfra import host, logger

from laguna_kit import rolls
from laguna_kit.operations.network import api_exposure_checked
from laguna_kit.operations.releases import release_validated

if host.data.skip_validation:
    logger.warning(f"{host.name}: skip_validation is set: this deploy proves nothing about serving")
else:
    release_validated(
        name=f"{rolls.GATE_OP}: readiness, smoke, fresh long-context prompt, DFlash acceptance",
        kit_dir=host.data.kit_dir,
        unit=host.data.unit_name,
        keep_releases=host.data.keep_releases,
        force_slower=host.data.force_slower,
    )
api_exposure_checked(
    name="API on the tailnet only, seen from the control machine", port=host.data.api_port
)
