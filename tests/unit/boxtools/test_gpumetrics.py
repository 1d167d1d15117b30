"""laguna_kit/boxtools/gpumetrics.py against nvidia-smi's real answers (driver 580, one H200:
tests/data/nvidia-smi/h200-x1/gpu-metrics): every field it asks for is one the driver lists, `[N/A]`
is left out, an unknown field costs that field and not the rest, and what reaches the text file is
Prometheus's format whatever the card or the box says."""

import json
import os
import re
from pathlib import Path

from laguna_kit.boxtools import gpumetrics

DATA = Path(__file__).resolve().parents[2] / "data/nvidia-smi/h200-x1/gpu-metrics"
ALIASES = {"clocks.sm": "clocks.current.sm"}  # the header prints the current name


def captured() -> dict:
    """field -> value of the real capture (the header with units names them, nounits has values)."""
    head = (DATA / "query-gpu.csv").read_text().splitlines()[0].split(", ")
    names = [re.sub(r" \[.*\]$", "", h) for h in head]
    values = (DATA / "query-gpu-nounits.csv").read_text().splitlines()[0].split(", ")
    return dict(zip(names, values))


def fake_smi(known: dict, rejects=()):
    """nvidia-smi as the capture shows it: a field it does not know fails the whole query, exit 2,
    with its real message (query-bad-field.txt)."""
    calls = []
    bad = (DATA / "query-bad-field.txt").read_text()

    def run(cmd):
        calls.append(cmd)
        if cmd[0] == "journalctl":
            return 1, ""
        fields = cmd[1].split("=", 1)[1].split(",")
        for f in fields:
            if f in rejects or ALIASES.get(f, f) not in known:
                return 2, bad.replace("bogus.field", f)
        return 0, ", ".join(known[ALIASES.get(f, f)] for f in fields) + "\n"

    run.calls = calls
    return run


def test_every_field_asked_is_one_driver_580_lists():
    text = (DATA / "help-query-gpu.txt").read_text()
    listed = set(re.findall(r'^"([^"]+)"(?: or "([^"]+)")?', text, re.M))
    listed = {name for pair in listed for name in pair if name}
    for field in [*gpumetrics.LABEL_FIELDS, *gpumetrics.FIELDS]:
        assert field in listed, field


def test_the_real_answer_becomes_metrics_and_na_is_left_out():
    run = fake_smi(captured())
    text = "\n".join(gpumetrics.gpu_lines(run))
    ident = 'gpu="0",uuid="GPU-de54c2d7-6869-1bae-2ec0-8884dd732492",name="NVIDIA H200"'
    assert f"laguna_gpu_temperature_celsius{{{ident}}} 38" in text
    assert f"laguna_gpu_power_watts{{{ident}}} 110.17" in text
    assert f"laguna_gpu_memory_total_bytes{{{ident}}} {143771 * 2**20:g}" in text
    assert f"laguna_gpu_clock_event_reasons{{{ident}}} 1" in text  # 0x…01: idle
    assert f"laguna_gpu_hw_thermal_slowdown{{{ident}}} 0" in text  # "Not Active"
    assert f"laguna_gpu_ecc_uncorrected_errors{{{ident}}} 0" in text
    assert "laguna_gpu_fan_ratio" not in text  # [N/A] on this card: no sample, no family
    assert "laguna_gpu_query_ok 1" in text and len(run.calls) == 1


def test_a_field_an_older_driver_lacks_costs_that_field_only():
    run = fake_smi(captured(), rejects={"clocks_event_reasons.sw_power_cap", "clocks.sm"})
    text = "\n".join(gpumetrics.gpu_lines(run))
    assert "laguna_gpu_power_capped" not in text and "laguna_gpu_sm_clock_hertz" not in text
    assert "laguna_gpu_temperature_celsius{" in text and len(run.calls) == 3


def test_no_driver_is_a_zero_not_a_crash():
    def run(cmd):
        return 9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."

    text = "\n".join(gpumetrics.gpu_lines(run))
    assert "laguna_gpu_query_ok 0" in text and "laguna_gpu_temperature" not in text


def test_xid_lines_count_by_code():
    log = (
        "NVRM: Xid (PCI:0000:01:00): 79, pid=1234, GPU has fallen off the bus.\n"
        "NVRM: Xid (PCI:0000:02:00): 13, pid=99, Graphics Exception\n"
        "NVRM: Xid (PCI:0000:01:00): 79, pid=1234, GPU has fallen off the bus.\n"
    )
    text = "\n".join(gpumetrics.xid_lines(lambda cmd: (0, log)))
    assert 'laguna_gpu_xid_errors{xid="79"} 2' in text and "laguna_gpu_xid_errors_all 3" in text
    assert "laguna_gpu_xid_errors_all 0" in "\n".join(gpumetrics.xid_lines(lambda c: (1, "")))


def test_release_lines_and_a_hostile_label_value(tmp_path):
    kit = tmp_path / "kit"
    (kit / "releases/0002").mkdir(parents=True)
    (kit / "state").mkdir()
    (kit / "releases/state.json").write_text(json.dumps({"current": 2}))
    (kit / "releases/0002/release.json").write_text(
        json.dumps({"number": 2, "mode": 'x"} 1\nevil{a="'})  # as install-incoming writes it
    )
    (kit / "releases/0002/perf.json").write_text(json.dumps({"decode_tok_s": 281.9}))
    (kit / "state/last-gate.json").write_text(json.dumps({"release": 2, "passed": True}))
    out = gpumetrics.release_lines(str(kit))
    assert 'laguna_release_decode_tok_s{release="2",mode="x\\"} 1\\nevil{a=\\""} 281.9' in out
    assert not any(line.startswith("evil") for line in out)
    assert 'laguna_gate_passed{release="2",mode="x\\"} 1\\nevil{a=\\""} 1' in out


def test_each_replica_of_a_box_has_its_release_and_gate_labelled(tmp_path):
    """An 8-card box: replica 2's release (its own numbers, under replicas/2) and its failed gate
    are exported too, so the gate alert names it."""
    kit = tmp_path / "kit"
    for state, passed in ((kit, True), (kit / "replicas/2", False)):
        (state / "releases/0001").mkdir(parents=True)
        (state / "state").mkdir()
        (state / "releases/state.json").write_text(json.dumps({"current": 1}))
        (state / "releases/0001/release.json").write_text(
            json.dumps({"number": 1, "mode": "champion"})
        )
        (state / "releases/0001/perf.json").write_text(json.dumps({"decode_tok_s": 250}))
        (state / "state/last-gate.json").write_text(json.dumps({"release": 1, "passed": passed}))
    out = gpumetrics.release_lines(str(kit))
    assert 'laguna_gate_passed{release="1",mode="champion"} 1' in out
    assert 'laguna_gate_passed{release="1",mode="champion",replica="2"} 0' in out
    assert 'laguna_release_decode_tok_s{release="1",mode="champion",replica="2"} 250' in out
    assert sum(line.startswith("# TYPE laguna_gate_passed") for line in out) == 1


def test_main_replaces_the_file_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(gpumetrics, "run_command", fake_smi(captured()))
    out = tmp_path / "laguna.prom"
    assert gpumetrics.main(["--out", str(out), "--kit-dir", str(tmp_path), "--path", "/"]) == 0
    text = out.read_text()
    assert text.endswith("\n") and 'laguna_path_avail_ratio{path="/"}' in text
    assert oct(os.stat(out).st_mode & 0o777) == "0o644" and not list(tmp_path.glob("*.laguna-new"))
