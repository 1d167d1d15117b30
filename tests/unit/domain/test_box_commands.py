"""laguna_kit/domain/box_commands.py: the box tools shipped whole (the packages too), and every
command line that calls them quoted word by word."""

import pytest

from laguna_kit.domain import box_commands


def test_the_packages_modules_are_shipped_with_a_launcher_per_tool():
    files = {dest: mode for _, dest, mode in box_commands.box_tool_files("/opt/k")}
    for rel in ("fetch/run.py", "release/store.py", "gate/probes.py", "layout.py"):
        assert files[f"/opt/k/lib/boxtools/{rel}"] == "644", rel
    assert files["/opt/k/bin/laguna_fetch.py"] == "755"
    assert "/opt/k/lib/boxtools/fetch.py" in box_commands.earlier_files("/opt/k")


def test_every_argument_is_quoted_and_the_venv_tools_use_the_venv():
    cmd = box_commands.tool_command("/opt/k", "laguna_gate.py", "--model", "a b; id")
    assert cmd == "/opt/k/venv/bin/python /opt/k/bin/laguna_gate.py --model 'a b; id'"
    rel = box_commands.release_command("/opt/k", "u.service", "list", state_dir="/opt/k/replicas/2")
    assert rel.endswith("--unit u.service --state-dir /opt/k/replicas/2 list")
    assert "--state-dir" not in box_commands.release_command("/opt/k", "u.service", "list")


def test_a_transient_run_waits_for_one_going_and_keeps_its_exit_status():
    cmd = box_commands.transient("laguna-validate", "true")
    assert cmd.startswith("while systemctl list-units") and cmd.endswith("exit $rc")
    assert (
        "--unit=laguna-validate:$(date +%s%N)" in cmd
        and "/run/laguna-kit/laguna-validate.err" in cmd
    )
    with pytest.raises(ValueError):
        box_commands.running("x; reboot")
