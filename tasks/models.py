# Checkpoints: both pinned INT4 repos in model_dir, each file verified against the hub's own
# sha256 (never size alone), resumable, and never re-hashed on a converged box. Waits for the
# download tasks/download.py started (or starts it), printing its progress. The fetch makes the
# folders it needs; an existing model_dir keeps the owner's mode.
from pyinfra import host, logger

from laguna_kit.domain.hub import HubError, is_pinned, source_checkpoint
from laguna_kit.knobs.declared import checkpoint_pairs, fetch_arguments
from laguna_kit.operations.checkpoints import checkpoint_synced

d = host.data

for repo, revision in checkpoint_pairs(d):
    try:
        ckpt = source_checkpoint(d, repo, revision)
    except HubError:
        continue  # the pre-flight already refused this host with the hub's reason
    if not is_pinned(revision):
        logger.warning(
            f"{repo}: revision {revision!r} is not pinned; resolved to {ckpt.commit} for this run. "
            "Pin target and drafter together in group_data (a re-quantised target with an old "
            "drafter silently loses DFlash acceptance)"
        )
    checkpoint_synced(
        name=f"{repo} @ {ckpt.commit[:12]} verified in {d.model_dir}/{ckpt.folder}",
        ckpt=ckpt,
        dest=f"{d.model_dir}/{ckpt.folder}",
        **fetch_arguments(d),
    )
