"""Numbered releases of the serving unit, through the box's release manager (laguna_release.py)."""

from __future__ import annotations

import io
import json
import re
import shlex

from pyinfra import host, logger
from pyinfra.api import FileUploadCommand, FunctionCommand, OperationError, operation

from ..boxtools.layout import UNIT_DIR
from ..domain import fleet, replicas
from ..domain.box_commands import release_command, transient
from ..domain.profiles import render_release
from ..facts.docker import DockerImage, digest_of
from ..facts.releases import ReleaseState
from ..run import gate_failures, memo
from .systemd import unit_removed


@operation()
def release_deployed(knobs: dict, kit_dir: str, unit: str, state_dir: str | None = None):
    """
    A numbered release for the wanted image digest, revisions and flags is the running one.

    Nothing happens when the current release already is exactly that; otherwise the box's release
    manager numbers it, installs the unit (daemon-reload only when the file changed) and restarts.

    + knobs: every knob's value for this host (settings.knobs_of(host.data)), as
      replicas.knobs_for gives them for one replica
    + kit_dir: the kit's folder on the box
    + unit: the serving unit's name
    + state_dir: a replica's own releases (None: kit_dir, replica 1)

    **Example:**

    .. code:: python

        release_deployed(name="Serving release", knobs=knobs_of(host.data),
        kit_dir="/opt/laguna-kit",
                         unit="laguna-vllm.service")
    """
    digest = digest_of(memo.fact(host, DockerImage, ref=knobs["vllm_image"]))
    spec, unit_text = render_release(knobs, digest)
    own = replicas.own_state(kit_dir, state_dir)
    st = host.get_fact(ReleaseState, kit_dir=kit_dir, unit=unit, **own)
    memo.store(host, ReleaseState, st, kit_dir=kit_dir, unit=unit, **own)  # replicas_retired's
    current = st["current"]
    if current and current.get("spec") == spec:
        # Edited by hand: the next restart would serve flags no release has.
        if st.get("unit_drift"):
            logger.warning(
                f"{host.name}: the installed {unit} differs from release {current.get('number')}'s "
                f"(edited on the box?): {'; '.join(st['unit_drift'])}; putting the release's back"
            )
            yield release_command(kit_dir, unit, "activate", current.get("number"), **own)
        elif st["unit"]["active"]:
            host.noop(f"release {current.get('number')} ({spec['mode']}, {digest}) is current")
        else:  # stopped by an operator, or a crash loop systemd gave up on: start; the gate follows
            q = shlex.quote(unit)
            yield f"systemctl reset-failed {q} 2>/dev/null; systemctl start {q}"
        return
    if current:
        old = current.get("spec") or {}
        changed = sorted(k for k in set(spec) | set(old) if spec.get(k) != old.get(k))
        logger.info(
            f"{host.name}: new release replaces {current.get('number')}: {', '.join(changed)} "
            f"changed"
        )
    incoming = f"{state_dir or kit_dir}/releases/incoming"
    yield f"rm -rf {incoming} && install -d -m 755 {incoming}"
    yield FileUploadCommand(
        io.StringIO(
            json.dumps(
                {
                    "mode": spec["mode"],
                    "image": spec["image"],
                    "target_revision": spec["target_revision"],
                    "drafter_revision": spec["drafter_revision"],
                    "spec": spec,
                },
                indent=1,
            )
        ),
        f"{incoming}/release.json",
    )
    yield FileUploadCommand(io.StringIO(unit_text), f"{incoming}/{unit}")
    yield release_command(kit_dir, unit, "install-incoming", **own)


@operation()
def release_validated(
    kit_dir: str,
    unit: str,
    auto_rollback: bool = True,
    keep_releases: int | None = None,
    force_slower: bool = False,
    state_dir: str | None = None,
):
    """
    The current release passed the gate (readiness, smoke, fresh long prompt, DFlash acceptance).

    Runs when the current release has no passing gate since its last start. On failure with
    auto_rollback, the box's release manager restores the previous release and validates it (the
    decision is made on the box), and the deploy still fails, saying both.

    + kit_dir: the kit's folder on the box
    + unit: the serving unit's name
    + auto_rollback: roll back to the previous release when the gate fails
    + force_slower: accept a release whose decode is below min_decode_ratio x the previous
      passing release's (otherwise it fails its gate like any other failure)
    + keep_releases: after a passing gate, remove the releases beyond the newest N and the image
      and checkpoint revisions only they used (never the current release or the one a rollback
      would run; None: keep everything)
    + state_dir: a replica's own releases (None: kit_dir, replica 1)

    **Example:**

    .. code:: python

        release_validated(name="Validation gate", kit_dir="/opt/laguna-kit",
        unit="laguna-vllm.service")
    """
    own = replicas.own_state(kit_dir, state_dir)
    # afresh: the unit may have moved
    st = host.get_fact(ReleaseState, kit_dir=kit_dir, unit=unit, **own)
    memo.store(host, ReleaseState, st, kit_dir=kit_dir, unit=unit, **own)  # the summary reads it
    current = (st["state"] or {}).get("current")
    gate, since = st["gate"] or {}, st["unit"]["since"]
    # A pass proves only the run it tested: a restart since (crash, reboot, operator) needs a new
    # one.
    if (
        current is not None
        and gate.get("release") == current
        and gate.get("passed")
        and st["unit"]["active"]
        and since is not None
        and since <= gate.get("started_unix", 0)
    ):
        drain = st.get("drain") or {}
        if drain and drain.get("by") != "operator":
            # A run cut between its drain and its restart (Ctrl-C while requests ended) left the
            # box out of the router's rotation, serving a release that passed.
            logger.warning(
                f"{host.name}: drained at the fleet router by an interrupted run "
                f"({drain.get('reason')}), and release {current} passed the gate: undraining"
            )
            yield release_command(kit_dir, unit, "undrain", "--kit", **own)
            return
        host.noop(f"release {current} passed the gate at {gate.get('time')}")
        return
    # On the box, in a unit of its own: a dropped connection cannot leave a failed release serving.
    validate = release_command(
        kit_dir,
        unit,
        "validate",
        *(["--auto-rollback"] if auto_rollback else []),
        *(["--force-slower"] if force_slower else []),
        **own,
    )
    if keep_releases:  # only after a pass: what the release that serves needs is kept
        validate += " && " + release_command(
            kit_dir, unit, "prune", "--keep", int(keep_releases), **own
        )
    yield transient("laguna-validate", validate)


@operation(is_idempotent=False)
def release_rolled_back(
    kit_dir: str,
    unit: str,
    to: int | None = None,
    gated: bool = False,
    state_dir: str | None = None,
    like: int | None = None,
):
    """
    Activate the previous release (or release `to`) with the box's release manager.

    + kit_dir: the kit's folder on the box
    + unit: the serving unit's name
    + to: a release number; None for the previous one
    + gated: run the gate right after, in the same operation (a fleet behind a router rolls back
      one box at a time with `_serial=True`: each box drained, restarted and gated before the
      next is touched); a box whose gate failed stops the boxes after it
    + state_dir: a replica's own releases (None: kit_dir, replica 1)
    + like: (a replica past the first) replica 1's release number: this replica runs its own
      release of the same version, if it has one (its numbers are its own)

    **Example:**

    .. code:: python

        release_rolled_back(name="Roll back", kit_dir="/opt/laguna-kit", unit="laguna-vllm.service")
    """
    own = replicas.own_state(kit_dir, state_dir)
    st = host.get_fact(ReleaseState, kit_dir=kit_dir, unit=unit, **own)["state"] or {}
    if st.get("current") is None:
        raise OperationError(f"{host.name}: no release is installed: nothing to roll back")
    if own and to is None and like is None and st.get("previous") is None:
        # a replica the box gained with this kit (or with its cards) has no release before it
        host.noop(f"{unit} has no earlier release: it serves the one it has")
        return
    if gated:
        yield FunctionCommand(lambda state, host: refuse_after_a_failed_gate(state, host), (), {})
    which = (
        ["--to", int(to)] if to is not None else ["--like", int(like)] if like is not None else []
    )
    yield release_command(kit_dir, unit, "rollback", *which, **own)
    if gated:
        yield transient("laguna-validate", release_command(kit_dir, unit, "validate", **own))


def refuse_after_a_failed_gate(state, host) -> None:
    failed = [name for name in gate_failures.failed_gates(state) if name != host.name]
    if failed:
        raise OperationError(
            f"{host.name}: the gate failed on {', '.join(failed)} earlier in this run: not rolled "
            "back (it serves what it served)"
        )


@operation()
def roll_unbroken():
    """
    No box's gate failed earlier in this run (a `--serial` roll), no host of the run failed, and
    the router this run reached is still there: otherwise this box refuses before anything on it
    changes, so a release goes no further than a failure, whatever pyinfra's "continue?" prompt
    was answered, and no box is restarted while its router is away.

    **Example:**

    .. code:: python

        roll_unbroken(name="The roll goes on only while every gate passed")
    """
    gate_failures.watch(host.state)
    if not host.state.is_executing:
        host.noop("checked as the run reaches this box")
        return
    why = gate_failures.roll_stoppers(host.state, host, fleet.router_of(host.state.inventory))
    if why:
        text = (
            f"{host.name}: {'; '.join(why)} earlier in this run: the roll stops here and this box "
            "was not touched (it serves what it served). Read the failed host's output (a gate: "
            "tasks/status.py, tasks/logs.py), fix, and run again"
        )
        logger.error(text)  # pyinfra's prompt mode shows no text of an error raised here
        raise OperationError(text)
    host.noop("no gate or host failed earlier in this run")
    yield from ()


@operation()
def replicas_retired(kit_dir: str, unit: str, keep: int):
    """
    The box serves no replica past `keep`: a unit `<unit>-n.service` (n > keep) left from when
    the box had more cards, or a larger replicas_per_box, is drained, stopped, disabled and its
    unit file removed. Its releases stay on disk (kit_dir/replicas/n), as a stopped box's do.

    + kit_dir: the kit's folder on the box
    + unit: replica 1's unit (unit_name)
    + keep: how many replicas the box serves now

    **Example:**

    .. code:: python

        replicas_retired(name="No extra replica", kit_dir="/opt/laguna-kit",
                         unit="laguna-vllm.service", keep=1)
    """
    stem = unit.removesuffix(".service")
    # replica 1's state, as its release step just read it (no command more on a converged run)
    found = memo.fact(host, ReleaseState, kit_dir=kit_dir, unit=unit).get("replica_units") or []
    extra = []
    for name in found:
        m = re.fullmatch(re.escape(f"{stem}-") + r"([2-9]|[1-9][0-9]+)\.service", name)
        if m and int(m.group(1)) > keep:
            extra.append(int(m.group(1)))
    if not extra:
        host.noop(f"{keep} replica(s), no unit of another")
        return
    for n in sorted(extra):
        name = replicas.suffixed(unit, n)
        logger.warning(f"{host.name}: retiring replica {n} ({name}): the box serves {keep} now")
        stop = release_command(kit_dir, name, "stop", state_dir=replicas.state_dir(kit_dir, n))
        yield f"{stop} || systemctl stop {shlex.quote(name)}; true"  # drained first
        # Cut after its unit file went, this replica is not found again (it was found by that
        # file): it was stopped and disabled before, so systemd holds a stopped unit's record
        # until any daemon-reload; nothing runs from it meanwhile.
        yield from unit_removed._inner(unit=name, paths=[f"{UNIT_DIR}/{name}"])


@operation()
def replica_drained(
    kit_dir: str,
    unit: str,
    drained: bool = True,
    state_dir: str | None = None,
    problem: str | None = None,
):
    """
    Drain a replica at the fleet router by hand (maintenance, a suspect card), or end the drain:
    the box's agent answers `drain` while the marker exists, and the drain returns once the
    replica's running requests ended. An operator's drain lasts until this undrains it (a deploy
    does not end it).

    + kit_dir: the kit's folder on the box
    + unit: the replica's serving unit
    + drained: True to drain, False to put it back
    + state_dir: a replica's own state (None: kit_dir, replica 1)
    + problem: why the task cannot do it (no router, no such replica): refused, naming it

    **Example:**

    .. code:: python

        replica_drained(name="Drain", kit_dir="/opt/laguna-kit", unit="laguna-vllm.service")
    """
    if problem:
        raise OperationError(f"{host.name}: {problem}")
    own = replicas.own_state(kit_dir, state_dir)
    marker = host.get_fact(ReleaseState, kit_dir=kit_dir, unit=unit, **own).get("drain")
    if drained and marker and marker.get("by") == "operator":
        host.noop(f"{unit} is drained already (since {marker.get('time')})")
        return
    if not drained and not marker:
        host.noop(f"{unit} is not drained: the router sends it requests")
        return
    yield release_command(kit_dir, unit, "drain" if drained else "undrain", **own)


def replicas_drained(h, drained: bool, name: str) -> None:
    """tasks/drain.py and tasks/undrain.py: every replica of GPU box `h`, or the one `--data
    replica=N` names, drained (or put back); refused, naming why, without a router or that
    replica."""
    if "gpu" not in fleet.roles(h):  # a router, monitor or cache host serves no replica
        return
    wanted = h.data.get("replica")
    every = replicas.of(h)
    serving = [r for r in every if wanted in (None, r.number)]
    problem = (
        'no fleet router in this hosts file (roles = ["router"]): nothing to drain at'
        if fleet.router_of(h.state.inventory) is None
        else f"replica {wanted}: this box serves {len(every)}"
        if not serving
        else None
    )
    for r in serving or every[:1]:
        replica_drained(
            name=name + (f" ({r.label})" if len(every) > 1 else ""),
            kit_dir=h.data.kit_dir,
            unit=r.unit,
            drained=drained,
            state_dir=r.state_dir,
            problem=problem,
        )
