# Pre-flight: refuse a box that cannot serve the champion, before anything on it changes.
from pyinfra import host

from laguna_kit.facts.checkpoints import FileSizes
from laguna_kit.hub import HubError, source_checkpoint
from laguna_kit.operations.server import preflight
from laguna_kit.profiles import ProfileError, render
from laguna_kit.settings import checkpoint_pairs, knobs_of

# Space still needed = what the hub says the pinned checkpoints are, less what is already on disk.
d = host.data
need_mib, early_problem = (
    0,
    None,
)  # a reason to refuse found before the op runs (hub, serving flags)
try:
    for repo, rev in checkpoint_pairs(d):
        ckpt = source_checkpoint(d, repo, rev)
        have = host.get_fact(FileSizes, path=f"{d.model_dir}/{ckpt.folder}")
        need_mib += sum(f.size for f in ckpt.files if have.get(f.path) != f.size) // (1 << 20)
except HubError as exc:
    early_problem = str(exc)
try:
    render(
        knobs_of(d)
    )  # a bad serving_mode or a flag the recipe saw crash: refuse now, not mid-deploy
except ProfileError as exc:
    early_problem = f"{early_problem}; {exc}" if early_problem else str(exc)

preflight(
    name="Pre-flight: OS, GPUs, disk, RAM, /dev/shm",
    gpu_count=d.gpu_count,
    gpu_min_memory_mib=d.gpu_min_memory_mib,
    model_dir=d.model_dir,
    need_mib=need_mib + d.checkpoint_free_margin_gib * 1024,
    min_ram_mib=d.min_ram_mib,
    min_shm_mib=d.min_shm_mib,
    early_problem=early_problem,
)
