"""laguna_kit/boxtools/gate/cli.py: laguna_gate.py writes its JSON result and exits 0 only on a
pass; on a box (--kit-dir) with no current release it fails saying so."""

import json

from laguna_kit.boxtools import gate


def test_a_passing_gate_writes_its_result_and_exits_zero(url, tmp_path, capsys):
    out = tmp_path / "state" / "last-gate.json"
    argv = ["--url", url, "--prompt-tokens", "2000", "--max-tokens", "8", "--bench-tokens", "16"]
    assert gate.main([*argv, "--dflash", "--min-acceptance", "0", "--result", str(out)]) == 0
    assert json.loads(out.read_text())["passed"] is True
    assert json.loads(capsys.readouterr().out)["passed"] is True


def test_no_current_release_on_the_box_is_a_failed_gate(tmp_path, capsys):
    assert gate.main(["--kit-dir", str(tmp_path), "--unit", "laguna-vllm.service"]) == 1
    assert "no current release to validate" in capsys.readouterr().err
