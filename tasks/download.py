# Start the checkpoint download on the box as soon as the pre-flight passed: it needs neither the
# driver, the toolkit nor Docker, so an ~80 GB download runs while they are installed. The models
# step waits for it (printing its progress) and checks its result.
from pyinfra import host

from laguna_kit.domain.hub import HubError, source_checkpoint
from laguna_kit.knobs.declared import checkpoint_pairs, fetch_arguments
from laguna_kit.operations.checkpoints import checkpoint_fetch_started

d = host.data

for repo, revision in checkpoint_pairs(d):
    try:
        ckpt = source_checkpoint(d, repo, revision)
    except HubError:
        continue  # the pre-flight already refused this host with the hub's reason
    checkpoint_fetch_started(
        name=f"{repo} @ {ckpt.commit[:12]}: download started on the box",
        ckpt=ckpt,
        dest=f"{d.model_dir}/{ckpt.folder}",
        **fetch_arguments(d),
    )
