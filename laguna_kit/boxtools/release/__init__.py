"""laguna-release: numbered releases of the serving unit on this box, and switching between them.

    laguna_release.py list                releases, the current one marked
    laguna_release.py state --json        state, current release, last gate, unit (the deploy's)
    laguna_release.py install-incoming    number the release the deploy uploaded, activate it
    laguna_release.py activate N          run release N
    laguna_release.py rollback [--to N]   run the previous release (or N)
    laguna_release.py rollback --like N   (a replica past the first) run this replica's release
                                          that runs what replica 1's release N runs
    laguna_release.py validate [--auto-rollback] [--force-slower]
                                          run the gate on the current release; on failure roll
                                          back, validate the restored release, and fail (a
                                          release decoding below min_decode_ratio x the previous
                                          one's fails, unless --force-slower)
    laguna_release.py stop                stop serving (the unit stays installed)
    laguna_release.py drain               the fleet router sends this box nothing new (an
                                          operator's drain: only `undrain` ends it)
    laguna_release.py undrain [--kit]     the router may send it requests again (--kit: only if
                                          the kit drained it)
    laguna_release.py prune --keep N      remove releases beyond the newest N (never the current
                                          one or the one a rollback would run), and the images and
                                          checkpoint revisions only they used

In a fleet with a router (router-agent.json present), every restart is drained first: the box's
agent answers "drain" (router-drain exists), the release manager waits for the router to ask twice
and for vLLM's running and waiting requests to reach 0, then restarts; a passed gate ends the kit's
drain. A failed gate leaves the box drained.

A release folder holds release.json (what ran: mode, image digest, revisions, flags, time), the
unit file, and perf.json (its figures from its first passing gate: decode tok/s, TTFT, DFlash
acceptance). store.py is the only reader and writer of that layout; the deploy asks it
(`state --json`, snapshot.py). Activating (activate.py) installs the unit, runs `systemctl
daemon-reload` only when the unit file really changed (a reload can detach GPUs from running
containers; units.py), and restarts the service. The rest: drain.py (the router's view of the
box), validate.py (the gate and what follows it), prune.py (the disk), cli.py. Standard library
only: it runs with the box's python3.
"""

from .cli import main

__all__ = ["main"]
