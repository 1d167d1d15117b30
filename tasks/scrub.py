# A file a fleet box refused from this one (its bytes failed the hash there) is re-verified here in
# the same run, and fetched again if it rotted. And every checkpoint re-verified on the operator's
# schedule (checkpoint_scrub_schedule): laguna-scrub.timer
# re-hashes every verified file against its record, quarantines one whose bytes rotted (no peer
# takes it; the next deploy fetches it again) and writes the figures for node exporter (a mismatch
# is LagunaCheckpointCorrupt). "" = no scrub: the kit's timer goes.
from pyinfra import host

from laguna_kit.boxtools.layout import TEXTFILE_DIR, UNIT_DIR
from laguna_kit.domain.hub import HubError, source_checkpoint
from laguna_kit.domain.peer_fetch_plan import peer_files_on
from laguna_kit.knobs.declared import checkpoint_pairs, fetch_arguments
from laguna_kit.operations.checkpoints import checkpoint_synced, peer_refusals_scrubbed
from laguna_kit.operations.files import kit_file
from laguna_kit.operations.systemd import service_running, unit_installed, unit_removed

d = host.data
TIMER = "laguna-scrub.timer"
UNITS = [f"{UNIT_DIR}/laguna-scrub.service", f"{UNIT_DIR}/{TIMER}"]
CALENDAR_CHECK = (
    "systemd-analyze calendar \"$(sed -n 's/^OnCalendar=//p' %s)\" >/dev/null || { echo "
    "'laguna: checkpoint_scrub_schedule is no systemd calendar event (systemd.time(7))' >&2; "
    "exit 1; }"
)
ckpts = []
for repo, revision in checkpoint_pairs(d):
    try:
        ckpts.append(source_checkpoint(d, repo, revision))
    except HubError:
        continue  # the pre-flight already refused this host with the hub's reason
folders = [f"{d.model_dir}/{c.folder}" for c in ckpts]
if ckpts and peer_files_on(host):
    peer_refusals_scrubbed(
        name="Files a fleet box refused from this one, re-verified",
        ckpts=ckpts,
        model_dir=d.model_dir,
        kit_dir=d.kit_dir,
    )
    for ckpt in ckpts:  # a file quarantined just now comes back (from a peer or the hub)
        checkpoint_synced(
            name=f"{ckpt.repo} verified in {d.model_dir}/{ckpt.folder} (after a peer's refusal)",
            ckpt=ckpt,
            dest=f"{d.model_dir}/{ckpt.folder}",
            **fetch_arguments(d),
        )
if d.checkpoint_scrub_schedule and folders:
    unit_installed(
        name=f"Checkpoint scrub on its schedule ({d.checkpoint_scrub_schedule})",
        unit=TIMER,
        enable=[TIMER],
        # systemd's own word on the schedule, before the timer takes it
        validate={UNITS[1]: CALENDAR_CHECK},
        files=[
            (
                kit_file(
                    "files/laguna-scrub.service.j2",
                    kit_dir=d.kit_dir,
                    folders=folders,
                    metrics=f"{TEXTFILE_DIR}/laguna-scrub.prom",
                ),
                UNITS[0],
                "644",
            ),
            (
                kit_file("files/laguna-scrub.timer.j2", schedule=d.checkpoint_scrub_schedule),
                UNITS[1],
                "644",
            ),
        ],
    )
    service_running(name="Checkpoint scrub timer", service=TIMER)
else:
    unit_removed(name="No checkpoint scrub: the kit's timer goes", unit=TIMER, paths=UNITS)
