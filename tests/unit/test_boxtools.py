"""The box tools' own logic (laguna_kit/boxtools) on tmp_path: release manager, revisions, the
fetch tool's verification, the gate's arithmetic. systemctl is recorded, never run."""

import hashlib
import json
import os

import pytest

from laguna_kit.boxtools import fetch, gate, release, revisions
from laguna_kit.boxtools.layout import VERIFIED_RECORD


@pytest.fixture
def box(tmp_path, monkeypatch):
    """A kit_dir and unit folder under tmp_path; systemctl calls recorded in box.calls."""
    calls = []
    monkeypatch.setattr(release, "UNIT_DIR", str(tmp_path / "units"))
    monkeypatch.setattr(release, "run", lambda *cmd, check=True: calls.append(cmd))
    monkeypatch.setattr(
        release, "capture", lambda *cmd: "ActiveState=active\nActiveEnterTimestamp=@1764000000\n"
    )
    (tmp_path / "units").mkdir()
    rel = release.Releases(str(tmp_path / "kit"), "laguna-vllm.service")
    rel.calls = calls
    return rel


def incoming(rel, mode="champion", unit_body="ExecStart=/usr/bin/docker run x"):
    folder = os.path.join(rel.root, "incoming")
    os.makedirs(folder)
    with open(os.path.join(folder, "release.json"), "w") as fh:
        json.dump(
            {"mode": mode, "image": "img", "spec": {"mode": mode, "gate": {"prompt_tokens": 10}}},
            fh,
        )
    with open(os.path.join(folder, rel.unit), "w") as fh:
        fh.write(f"# release @RELEASE@\n{unit_body}\n")


def test_releases_are_numbered_and_the_unit_is_reloaded_only_when_it_changed(box):
    incoming(box)
    assert box.install_incoming() == 1
    unit = open(os.path.join(release.UNIT_DIR, box.unit)).read()
    assert unit.startswith("# release 1\n")
    assert ("systemctl", "daemon-reload") in box.calls and (
        "systemctl",
        "start",
        box.unit,
    ) in box.calls
    incoming(box, unit_body="ExecStart=/usr/bin/docker run y")
    assert box.install_incoming() == 2
    assert box.state()["current"] == 2 and box.state()["previous"] == 1
    box.calls.clear()
    box.activate(2)  # same unit file: restart (stop, start), no reload
    assert ("systemctl", "daemon-reload") not in box.calls and box.calls[-2:] == [
        ("systemctl", "stop", box.unit),
        ("systemctl", "start", box.unit),
    ]


def test_rollback_goes_to_the_previous_release_and_refuses_what_makes_no_sense(box):
    with pytest.raises(release.ReleaseError, match="no previous release"):
        box.rollback(None)
    incoming(box)
    box.install_incoming()
    incoming(box, mode="speed-128k")
    box.install_incoming()
    assert box.rollback(None) == 1
    box.calls.clear()
    assert box.rollback(1) == 1  # re-activating the current release by number restarts it
    assert ("systemctl", "start", box.unit) in box.calls
    with pytest.raises(release.ReleaseError, match="no release 7"):
        box.rollback(7)


def test_state_json_is_what_the_deploy_reads(box, capsys):
    assert box.snapshot()["current"] == {} and box.snapshot()["state"] == {}
    incoming(box)
    box.install_incoming()
    os.makedirs(os.path.join(box.kit_dir, "state"))
    with open(os.path.join(box.kit_dir, "state", "last-gate.json"), "w") as fh:
        json.dump({"release": 1, "passed": True}, fh)
    snap = box.snapshot()
    assert (
        snap["state"]["current"] == 1
        and snap["current"]["number"] == 1
        and snap["current"]["mode"] == "champion"
    )
    assert snap["gate"] == {"release": 1, "passed": True}
    assert snap["unit"] == {"active": True, "since": 1764000000}


def test_validate_rolls_back_on_the_box_and_still_fails(box, monkeypatch, capsys):
    incoming(box)
    box.install_incoming()
    incoming(box, mode="speed-128k")
    box.install_incoming()
    results = iter([False, True])  # the new release fails its gate, the restored one passes
    monkeypatch.setattr(release.Releases, "gate", lambda self, force=False: next(results))
    assert box.validate(auto_rollback=True) is False
    assert box.state()["current"] == 1
    err = capsys.readouterr().err
    assert (
        "rolling back to the previous release" in err
        and "the previous release serves and passed" in err
    )


def passed_gate(rel, n, decode, mode="champion"):
    """What a passing gate of release n leaves (last-gate.json), recorded as the box does."""
    os.makedirs(os.path.join(rel.kit_dir, "state"), exist_ok=True)
    with open(os.path.join(rel.kit_dir, "state", "last-gate.json"), "w") as fh:
        json.dump(
            {
                "release": n,
                "passed": True,
                "time": "T",
                "perf": {"decode_tok_s": decode, "ttft_s": 1.0, "acceptance": 0.6, "mode": mode},
            },
            fh,
        )
    rel.record_perf()


def test_a_release_is_held_to_the_previous_passing_release_of_its_mode(box):
    incoming(box)
    box.install_incoming()
    assert box.perf_baseline(1) is None  # nothing before it
    passed_gate(box, 1, 280.0)
    assert box.perf(1)["decode_tok_s"] == 280.0 and box.perf(1)["release"] == 1
    assert box.perf_baseline(1) is None  # measured: a re-gate after a restart holds nothing
    incoming(box, mode="speed-128k")
    box.install_incoming()
    assert box.perf_baseline(2) is None  # another mode: not comparable
    passed_gate(box, 2, 250.0, mode="speed-128k")
    incoming(box, unit_body="ExecStart=/usr/bin/docker run z")  # champion again
    box.install_incoming()
    assert box.perf_baseline(3) == {"release": 1, "decode_tok_s": 280.0, "mode": "champion"}
    passed_gate(box, 3, 200.0)  # a pass recorded once: the first pass is the release's figure
    passed_gate(box, 3, 290.0)
    assert box.perf(3)["decode_tok_s"] == 200.0
    assert box.snapshot()["perf"]["decode_tok_s"] == 200.0  # status shows the running release's
    incoming(box, unit_body="ExecStart=/usr/bin/docker run w")
    box.install_incoming()
    box.mark_failed(3)  # a failed release is never the figure to hold
    assert box.perf_baseline(4)["release"] == 1


def test_a_slower_release_fails_naming_both_figures_unless_forced():
    base = {"release": 2, "decode_tok_s": 280.0, "mode": "champion"}
    said = gate.slower_check({"decode_tok_s": 140.1}, base, 0.8, force=False)
    assert "decode 140.1 tok/s is below 0.8 x 280.0 tok/s of release 2" in said
    assert "force_slower=True" in said and "min_decode_ratio" in said
    assert gate.slower_check({"decode_tok_s": 140.1}, base, 0.8, force=True) is None
    assert gate.slower_check({"decode_tok_s": 224.0}, base, 0.8, force=False) is None  # = floor
    assert gate.slower_check({"decode_tok_s": 100.0}, None, 0.8, force=False) is None
    assert gate.slower_check({"decode_tok_s": None}, base, 0.8, force=False) is None


def test_validate_with_nothing_to_roll_back_to_stops_the_release(box, monkeypatch, capsys):
    incoming(box)
    box.install_incoming()
    monkeypatch.setattr(release.Releases, "gate", lambda self, force=False: False)
    assert box.validate(auto_rollback=True) is False
    err = capsys.readouterr().err
    assert "no previous release to roll back to" in err and "it is stopped, not left serving" in err
    assert ("systemctl", "stop", box.unit) in box.calls


def test_a_failed_release_is_skipped_by_rollbacks_unless_named(box, monkeypatch):
    for mode in ("champion", "speed-128k", "context-first"):
        incoming(box, mode=mode)
        box.install_incoming()
    results = iter([False, True])  # release 3 fails its gate, release 2 passes
    monkeypatch.setattr(release.Releases, "gate", lambda self, force=False: next(results))
    box.validate(auto_rollback=True)
    assert box.state()["current"] == 2 and box.state()["failed"] == [3]
    # "previous" no longer toggles back to the release that just failed
    assert box.rollback(None) == 1
    assert box.state()["previous"] == 2
    assert box.rollback(3) == 3  # by number it is still allowed


def test_a_release_that_does_not_start_puts_the_previous_one_back(box, monkeypatch):
    incoming(box, unit_body="ExecStart=/usr/bin/docker run good")
    box.install_incoming()
    real_run = release.run

    def run(*cmd, check=True):
        box.calls.append(cmd)
        unit = open(os.path.join(release.UNIT_DIR, box.unit)).read()
        if cmd[:2] == ("systemctl", "start") and "bad" in unit:
            raise release.ReleaseError("systemctl start failed: Job failed")

    monkeypatch.setattr(release, "run", run)
    incoming(box, unit_body="ExecStart=/usr/bin/docker run bad")
    with pytest.raises(release.ReleaseError, match="release 2 did not start .* release 1 is back"):
        box.install_incoming()
    assert "run good" in open(os.path.join(release.UNIT_DIR, box.unit)).read()
    assert box.state()["current"] == 1
    assert box.snapshot()["current"]["number"] == 1
    assert real_run is not run


def test_a_container_a_killed_start_left_behind_is_removed_before_the_next_start(box, monkeypatch):
    """A start killed seconds after boot: its `docker run` never saw the container the daemon
    then created. The restart waits for it and removes it, so the new start's `docker run` owns
    the name and the gate tests the unit's own container (the power-cut drill in test_service)."""
    incoming(box)
    folder = os.path.join(box.root, "incoming")
    meta = json.load(open(os.path.join(folder, "release.json")))
    meta["spec"]["argv"] = ["docker", "run", "--rm", "--name", "vllm-laguna", "img"]
    json.dump(meta, open(os.path.join(folder, "release.json"), "w"))
    seen = iter([False, True, True, False])  # absent, then the orphan appears, then it is gone
    inspects = []

    def fake(cmd, **kw):
        inspects.append(cmd)
        return release.subprocess.CompletedProcess(cmd, 0 if next(seen, False) else 1)

    monkeypatch.setattr(release.subprocess, "run", fake)
    monkeypatch.setattr(release.time, "sleep", lambda s: None)
    clock = iter(range(0, 10_000))
    monkeypatch.setattr(release.time, "monotonic", lambda: next(clock) * 0.25)
    box.install_incoming()
    calls = box.calls
    rm = calls.index(("docker", "rm", "-f", "vllm-laguna"))
    assert (
        calls.index(("systemctl", "stop", box.unit))
        < rm
        < calls.index(("systemctl", "start", box.unit))
    )
    assert calls.count(("docker", "rm", "-f", "vllm-laguna")) == 2


def record(folder, revision):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, VERIFIED_RECORD), "w") as fh:
        json.dump({"revision": revision, "files": {}}, fh)


def test_revisions_swap_by_rename_and_come_back(tmp_path):
    dest = str(tmp_path / "Laguna")
    record(dest, "a" * 40)
    assert revisions.select_revision(dest, "a" * 40) == "current"
    assert revisions.select_revision(dest, "b" * 40) == "new"
    assert revisions.recorded_revision(revisions.stash_path(dest, "a" * 40)) == "a" * 40
    record(dest, "b" * 40)
    assert revisions.select_revision(dest, "a" * 40) == "restored"
    assert revisions.recorded_revision(dest) == "a" * 40
    assert revisions.available(dest, "b" * 40) and not revisions.available(dest, "c" * 40)
    assert [os.path.basename(p) for p in revisions.stashed(dest)] == [f"Laguna@{'b' * 40}"]


def test_activation_refuses_a_release_whose_revision_is_gone(box, tmp_path):
    incoming(box)
    meta = os.path.join(box.root, "incoming", "release.json")
    doc = json.load(open(meta))
    doc["spec"]["checkpoints"] = [{"dest": str(tmp_path / "models" / "X"), "revision": "c" * 40}]
    json.dump(doc, open(meta, "w"))
    with pytest.raises(release.ReleaseError, match="which is not on this box"):
        box.install_incoming()


def test_fetch_hashes_are_the_hubs_kinds(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"hello\n")
    counter = {"hashed_bytes": 0}
    # sha256 for LFS files; a git blob sha1 (`git hash-object`) for small files
    assert fetch.content_ok(
        str(path), {"size": 6, "sha256": hashlib.sha256(b"hello\n").hexdigest()}, counter
    )[0]
    assert fetch.content_ok(
        str(path),
        {"size": 6, "sha256": None, "blob_id": "ce013625030ba8dba906f756967f9e9ca394464a"},
        counter,
    )[0]
    assert fetch.content_ok(str(path), {"size": 7, "sha256": "x"}, counter) == (False, "size 6")
    assert counter["hashed_bytes"] == 12


def test_index_must_name_exactly_the_shards(tmp_path):
    (tmp_path / "a.safetensors").write_bytes(b"1")
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"w": "b.safetensors"}})
    )
    manifest = [{"path": "a.safetensors"}, {"path": "model.safetensors.index.json"}]
    with pytest.raises(fetch.FetchError, match="names shards that are not present: b.safetensors"):
        fetch.check_index(str(tmp_path), manifest)


def test_gate_counts_dflash_acceptance_between_two_scrapes():
    before = {"drafts": 1, "draft_tokens": 70, "accepted_tokens": 40}
    after = {"drafts": 11, "draft_tokens": 140, "accepted_tokens": 82}
    assert gate.dflash_check(before, after, 0.2) == {
        "draft_tokens": 70,
        "accepted_tokens": 42,
        "acceptance": 0.6,
    }
    with pytest.raises(gate.GateFailure, match="below 70%"):
        gate.dflash_check(before, after, 0.7)
    line = 'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="laguna"} 42.0'
    assert gate.SPEC_RE.match(line).groups() == ("accepted_tokens", "42.0")


def test_firewall_revert_restores_the_previous_table_or_the_fallback(tmp_path, monkeypatch):
    from laguna_kit.boxtools import firewall

    calls, live = [], {"table": "table inet laguna_kit {\n  chain input {}\n}\n"}

    def fake_nft(*args, check=True):
        calls.append(("nft", *args))
        out = live["table"] if args[:2] == ("-s", "list") else ""
        rc = 0 if out or args[:2] != ("-s", "list") else 1
        return firewall.subprocess.CompletedProcess(args, rc, out, "")

    monkeypatch.setattr(firewall, "nft", fake_nft)
    monkeypatch.setattr(firewall.subprocess, "run", lambda cmd, **kw: calls.append(tuple(cmd)))
    rules, fallback = tmp_path / "fw.nft", tmp_path / "open.nft"
    rules.write_text("new rules\n")
    fallback.write_text("ssh open rules\n")
    firewall.load(str(rules), 60, str(fallback))
    saved = (tmp_path / "fw.nft.previous").read_text()
    assert saved.startswith("table inet laguna_kit\ndelete table inet laguna_kit\n")
    assert saved.endswith(live["table"])  # the table loaded before, never an empty one
    run = next(c for c in calls if c[0] == "systemd-run")
    assert "--on-active=60" in run and f"/usr/sbin/nft -f {rules}.previous" in run[-1]
    assert calls[-1] == ("nft", "-f", str(rules))
    live["table"] = ""  # nothing loaded before: the revert falls back to the SSH-open rules
    firewall.load(str(rules), 60, str(fallback))
    assert (tmp_path / "fw.nft.previous").read_text() == "ssh open rules\n"
    calls.clear()
    firewall.load(str(rules), None, None)  # rules that cannot cut SSH: no revert armed
    assert not any(c[0] == "systemd-run" for c in calls)


def test_firewall_state_names_a_missing_or_altered_table(tmp_path, monkeypatch):
    from laguna_kit.boxtools import firewall

    live = {"table": "T1"}
    monkeypatch.setattr(firewall, "live_table", lambda: live["table"] or None)
    monkeypatch.setattr(firewall.subprocess, "run", lambda *a, **k: None)
    rules = tmp_path / "fw.nft"
    rules.write_text("rules\n")
    assert firewall.state(str(rules)) == {"table": "unrecorded"}
    firewall.confirm(str(rules))
    assert firewall.state(str(rules)) == {"table": "loaded"}
    live["table"] = "T2"
    assert firewall.state(str(rules)) == {"table": "altered"}
    live["table"] = ""
    assert firewall.state(str(rules)) == {"table": "missing"}


def test_firewall_watch_loads_a_flushed_or_hand_changed_table_again(tmp_path, monkeypatch):
    """The watch between deploys: a table gone or changed by hand is loaded from the rules; a
    deploy or a self-revert under way (rules not confirmed yet) is left alone; a table that cannot
    be loaded stops serving."""
    from laguna_kit.boxtools import firewall

    live, stopped, loads = {"table": "T1"}, [], []

    def fake_nft(*args, check=True):
        loads.append(args)
        if live.get("broken"):
            return firewall.subprocess.CompletedProcess(args, 1, "", "syntax error")
        live["table"] = "T1"
        return firewall.subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(firewall, "live_table", lambda: live["table"] or None)
    monkeypatch.setattr(firewall, "nft", fake_nft)
    monkeypatch.setattr(  # (confirm's disarm of a revert timer is no stop of serving)
        firewall.subprocess, "run", lambda cmd, **kw: "revert" in cmd[-1] or stopped.append(cmd[-1])
    )
    rules = tmp_path / "fw.nft"
    rules.write_text("rules\n")
    assert firewall.restore(str(rules), ["laguna-vllm.service"]) is None  # unrecorded, present
    firewall.confirm(str(rules))
    assert firewall.restore(str(rules), ["laguna-vllm.service"]) is None and not loads
    live["table"] = ""  # nft flush ruleset
    assert "gone" in firewall.restore(str(rules), ["laguna-vllm.service"])
    assert loads == [("-f", str(rules))] and live["table"] == "T1" and not stopped
    live["table"] = "T2"  # nft delete rule ... by hand
    assert "changed by hand" in firewall.restore(str(rules), ["laguna-vllm.service"])
    loads.clear()
    rules.write_text("new rules, a deploy under way\n")
    live["table"] = "T3"
    assert firewall.restore(str(rules), ["laguna-vllm.service"]) is None and not loads
    firewall.confirm(str(rules))
    live.update(table="", broken=True)
    said = firewall.restore(str(rules), ["laguna-vllm.service", "laguna-router.service"])
    assert "could not be loaded again" in said and "syntax error" in said
    assert stopped == ["laguna-vllm.service", "laguna-router.service"]


@pytest.mark.parametrize(
    "name", ["/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a\\b", "a\nb", "", "a/\x7f"]
)
def test_names_from_outside_are_refused_before_anything_is_written(name, tmp_path):
    from laguna_kit.boxtools import names

    with pytest.raises(names.UnsafeName):
        names.safe_name(name)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(
        json.dumps(
            {
                "revision": "a" * 40,
                "files": [
                    {"path": "config.json", "size": 2, "sha256": None, "blob_id": "b" * 40},
                    {"path": name, "size": 1, "sha256": "c" * 64, "blob_id": ""},
                ],
            }
        )
    )
    dest = tmp_path / "dest"
    args = type(
        "A",
        (),
        {
            "manifest": str(manifest),
            "dest": str(dest),
            "repo": "r/x",
            "token_file": None,
            "rehash": False,
            "margin_mib": 0,
            "workers": 1,
            "endpoint": "http://127.0.0.1:9",
        },
    )
    with pytest.raises(fetch.FetchError, match="not a plain relative path; nothing was written"):
        fetch.sync(args)
    assert not dest.exists()


def test_a_symlink_cannot_lead_a_name_outside(tmp_path):
    from laguna_kit.boxtools import names

    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "sub").symlink_to("/etc")
    with pytest.raises(names.UnsafeName, match="leads outside"):
        names.inside(str(tmp_path / "ckpt"), "sub/passwd")
    assert names.inside(str(tmp_path / "ckpt"), "model.safetensors").endswith(
        "/ckpt/model.safetensors"
    )


def test_a_resume_answered_with_another_range_is_discarded(tmp_path):
    part = tmp_path / "f.part"
    part.write_bytes(b"x" * 100)
    entry = {"path": "f", "size": 1000}
    fetch.check_range(entry, 100, "bytes 100-999/1000", str(part))  # exactly where the part ends
    fetch.check_range(entry, 100, "bytes 100-999/*", str(part))
    with pytest.raises(fetch.FetchError, match="Content-Range 'bytes 0-999/1000'"):
        fetch.check_range(entry, 100, "bytes 0-999/1000", str(part))
    assert not part.exists()
    part.write_bytes(b"x" * 100)
    with pytest.raises(fetch.FetchError, match="size 1000 expected"):
        fetch.check_range(entry, 100, "bytes 100-1999/2000", str(part))


def _revision(tmp_path, commit, files):
    """A manifest for `files` ({name: bytes}) at `commit`, and an upload folder holding them."""
    manifest = tmp_path / f"manifest-{commit[:4]}.json"
    manifest.write_text(
        json.dumps(
            {
                "revision": commit,
                "files": [
                    {
                        "path": n,
                        "size": len(b),
                        "sha256": hashlib.sha256(b).hexdigest(),
                        "blob_id": "",
                    }
                    for n, b in files.items()
                ],
            }
        )
    )
    return str(manifest)


def _push(tmp_path, dest, files):
    up = tmp_path / "models" / f"{os.path.basename(dest)}.laguna-upload"
    up.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (up / name).write_bytes(data)
    return str(up)


def test_a_new_revision_is_fetched_beside_the_live_one_and_swapped_in_only_at_activation(tmp_path):
    old = {"a.safetensors": b"A" * 64, "b.safetensors": b"B" * 64}
    new = {"a.safetensors": b"A" * 64, "b.safetensors": b"C" * 64}  # b changed
    dest = str(tmp_path / "models" / "Laguna")

    def args(manifest, uploaded):
        return type(
            "A",
            (),
            {
                "manifest": manifest,
                "dest": dest,
                "repo": "r/x",
                "token_file": None,
                "rehash": False,
                "margin_mib": 0,
                "workers": 1,
                "uploaded": uploaded,
            },
        )

    fetch.sync(args(_revision(tmp_path, "a" * 40, old), _push(tmp_path, dest, old)))
    assert revisions.recorded_revision(dest) == "a" * 40
    # The new revision's upload is cut short: the live folder must not change at all.
    partial = _push(tmp_path, dest, {})
    with pytest.raises(fetch.FetchError):
        fetch.sync(args(_revision(tmp_path, "b" * 40, new), partial))
    assert revisions.recorded_revision(dest) == "a" * 40
    assert open(os.path.join(dest, "b.safetensors"), "rb").read() == b"B" * 64
    # Completed, it lands in the folder kept beside the live one (unchanged files linked) ...
    summary = fetch.sync(args(_revision(tmp_path, "b" * 40, new), _push(tmp_path, dest, new)))
    beside = revisions.stash_path(dest, "b" * 40)
    assert summary["folder"] == beside
    same = os.stat(os.path.join(dest, "a.safetensors")).st_ino
    assert os.stat(os.path.join(beside, "a.safetensors")).st_ino == same  # linked, not re-fetched
    assert revisions.recorded_revision(dest) == "a" * 40  # the running release's, still
    # ... and becomes the mounted folder only when its release is activated.
    assert revisions.select_revision(dest, "b" * 40) == "restored"
    assert open(os.path.join(dest, "b.safetensors"), "rb").read() == b"C" * 64
    assert revisions.recorded_revision(revisions.stash_path(dest, "a" * 40)) == "a" * 40


@pytest.fixture
def fleet_box(box, monkeypatch):
    """`box` behind a fleet router: the agent config present, the router's checks and vLLM's
    running requests played by counters (what systemd's NAccepted and vLLM's gauges report)."""
    os.makedirs(box.kit_dir, exist_ok=True)
    with open(os.path.join(box.kit_dir, "router-agent.json"), "w") as fh:
        json.dump({"api_port": 8080, "socket": "a.socket", "drain_timeout_s": 5}, fh)
    checks, running, seen = {"n": 0}, {"n": 2}, []

    def accepted(unit):  # the router asks once per call: a check every poll
        checks["n"] += 1
        return checks["n"]

    def in_flight(port):
        seen.append((box.drained() or {}).get("reason"))
        running["n"] = max(running["n"] - 1, 0)
        return running["n"]

    monkeypatch.setattr(release, "accepted", accepted)
    monkeypatch.setattr(release, "in_flight", in_flight)
    monkeypatch.setattr(release.time, "sleep", lambda s: None)
    box.seen = seen
    return box


def test_a_restart_behind_a_router_is_drained_first_and_undrained_by_its_gate(fleet_box):
    incoming(fleet_box)
    fleet_box.install_incoming()
    # the running requests were waited for with the marker in place, before the restart
    assert fleet_box.seen and all(r == "release 1 starting" for r in fleet_box.seen)
    assert fleet_box.drained()["by"] == "kit"
    fleet_box.gate = lambda force=False: True
    assert fleet_box.validate(auto_rollback=True)
    assert fleet_box.drained() is None


def test_a_failed_gate_stays_drained_and_an_operators_drain_outlives_a_deploy(fleet_box):
    incoming(fleet_box)
    fleet_box.install_incoming()
    fleet_box.gate = lambda force=False: False
    assert not fleet_box.validate(auto_rollback=False)
    assert fleet_box.drained()["reason"] == "release 1 failed its gate"
    fleet_box.drain("maintenance", by="operator")
    fleet_box.gate = lambda force=False: True
    assert fleet_box.validate(auto_rollback=False)
    assert fleet_box.drained()["by"] == "operator"  # a passed gate does not end it
    fleet_box.undrain(by="operator")
    assert fleet_box.drained() is None


def test_undrain_kit_ends_a_drain_a_cut_run_left_not_an_operators(fleet_box):
    cli = ["--kit-dir", fleet_box.kit_dir, "undrain", "--kit"]
    fleet_box.mark_drained("release 2 starting")  # a run cut between its drain and its restart
    assert release.main(cli) == 0 and fleet_box.drained() is None
    fleet_box.mark_drained("maintenance", by="operator")
    assert release.main(cli) == 0 and fleet_box.drained()["by"] == "operator"


def test_without_a_router_nothing_is_drained(box):
    incoming(box)
    box.install_incoming()
    assert box.drained() is None and not os.path.exists(os.path.join(box.kit_dir, "router-drain"))


ACQUIRE = """
import sys
from laguna_kit.boxtools import lock
lock.LOCK, lock.INFO = sys.argv[1], sys.argv[2]
lock.ancestor_sshd = lambda pid: None  # tied to the `sh` that runs this, not to a login
sys.exit(lock.acquire(sys.argv[3], 30))
"""


def test_one_run_asking_twice_at_once_holds_the_lock_at_once(tmp_path):
    """Two asks of one run in the same second (two connections): one takes the lock, the other
    joins it instead of waiting out its 30 s for its own run (seen once on the fleet's router)."""
    import fcntl
    import select
    import subprocess
    import sys
    import time

    from laguna_kit.boxtools.lock import alive
    from laguna_kit.settings import KIT_ROOT

    path, info = str(tmp_path / "deploy.lock"), str(tmp_path / "deploy.lock.json")
    held = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)  # the moment between one ask taking it and saying so
    # each `sh` plays a connection of the run: it lives on after its ask
    script = f"{sys.executable} -c '{ACQUIRE}' {path} {info} 'me@here pyinfra pid 1'; exec sleep 60"
    asks = [
        subprocess.Popen(["sh", "-c", script], cwd=KIT_ROOT, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    try:
        time.sleep(1.5)  # both wait on the lock
        t0 = time.monotonic()
        os.close(held)
        outs = []
        for a in asks:
            ready, _, _ = select.select([a.stdout], [], [], max(0.0, t0 + 10 - time.monotonic()))
            outs.append(a.stdout.readline().strip() if ready else "no answer in 10 s")
        took = time.monotonic() - t0
        assert outs == ["held", "held"] and took < 5, (outs, took)
        record = json.load(open(info))
        assert record["holder"] == "me@here pyinfra pid 1" and len(record["ties"]) == 2
    finally:
        for a in asks:
            a.kill()
            a.wait()
    deadline = time.monotonic() + 10  # both connections are gone: the lock frees itself
    while time.monotonic() < deadline and alive(record["pid"]):
        time.sleep(0.2)
    assert not alive(record["pid"])


def test_prune_keeps_the_newest_the_current_and_the_rollback_target_and_what_they_use(
    box, tmp_path, monkeypatch
):
    """keep_releases: older releases go with the checkpoint revisions and images only they used;
    what a kept release names stays, so a rollback still finds it."""
    models = tmp_path / "models"
    live = models / "Target"

    specs = [("a" * 40, "sha256:1"), ("b" * 40, "sha256:2"), ("c" * 40, "sha256:2")]
    specs.append(("d" * 40, "sha256:3"))
    for n, (rev, digest) in enumerate(specs, 1):  # four releases, as four deploys leave them
        os.makedirs(box.folder(n))
        spec = {
            "image": "vllm/vllm-openai:v0.25.1",
            "image_digest": digest,
            "checkpoints": [{"dest": str(live), "revision": rev}],
        }
        with open(os.path.join(box.folder(n), "release.json"), "w") as fh:
            json.dump({"number": n, "spec": spec}, fh)
    box.save({"current": 4, "history": [{"release": n} for n in (1, 2, 3, 4)], "failed": [1]})
    # revision d is live; a, b, c are kept in the stash; the box has images 1, 2, 3 and another
    os.makedirs(live, exist_ok=True)
    (live / ".laguna-verified.json").write_text(json.dumps({"revision": "d" * 40}))
    for rev in "abc":
        os.makedirs(revisions_stash(live, rev * 40))
    images = "\n".join(
        f"vllm/vllm-openai@{d}" for d in ("sha256:1", "sha256:2", "sha256:3", "sha256:owner")
    )
    monkeypatch.setattr(release, "capture", lambda *cmd: images if "image" in cmd else "")
    plan = box.prune_plan(2)
    # releases 3 and 4 are the newest two; 4 is current and 3 the rollback target
    assert plan["releases"] == [1, 2]
    assert plan["revisions"] == [revisions_stash(live, "a" * 40), revisions_stash(live, "b" * 40)]
    # 2 is still run by release 3; the owner's image was never a release's
    assert plan["images"] == ["vllm/vllm-openai@sha256:1"]
    box.prune(2)
    assert box.numbers() == [3, 4]
    assert not os.path.exists(revisions_stash(live, "a" * 40))
    assert os.path.isdir(revisions_stash(live, "c" * 40))
    assert ("docker", "image", "rm", "vllm/vllm-openai@sha256:1") in box.calls
    assert box.prune_plan(2) == {"releases": [], "revisions": [], "images": []}
    assert box.state()["failed"] == []  # release 1 is gone, and with it its mark


def revisions_stash(live, rev):
    from laguna_kit.boxtools import revisions

    return revisions.stash_path(str(live), rev)
