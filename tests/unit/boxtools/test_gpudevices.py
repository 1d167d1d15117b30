"""boxtools/gpudevices.py: the replica's device nodes named to docker, resolved at each start."""

import os
import stat

import pytest

from laguna_kit.boxtools import gpudevices

# Two cards whose minor numbers are not their indices (the driver numbers them in probe order).
SMI_ROWS = "0, 1\n1, 0\n2, 3\n3, 2\n"


@pytest.fixture
def box(tmp_path, monkeypatch):
    """A fake nvidia-smi on PATH answering `index, minor_number`, and the char devices present."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nprintf '{SMI_ROWS}'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    present = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}
    present |= {f"/dev/nvidia{m}" for m in range(4)}
    monkeypatch.setattr(gpudevices, "is_char", lambda p: p in present)
    monkeypatch.setattr(gpudevices, "make_uvm_nodes", lambda: None)
    ran = []
    monkeypatch.setattr(gpudevices.os, "execv", lambda path, argv: ran.append(argv))
    return present, ran


def test_each_card_by_its_minor_number_then_the_control_and_uvm_nodes(box):
    present, ran = box
    rc = gpudevices.main(["--cards", "2,3", "--", "/usr/bin/docker", "run", "--rm", "img", "x"])
    assert rc == 0
    assert ran == [
        [
            "/usr/bin/docker",
            "run",
            "--device=/dev/nvidiactl",
            "--device=/dev/nvidia3",
            "--device=/dev/nvidia2",
            "--device=/dev/nvidia-uvm",
            "--device=/dev/nvidia-uvm-tools",
            "--rm",
            "img",
            "x",
        ]
    ]


def test_a_missing_card_node_or_card_refuses_the_start_naming_it(box, capsys):
    present, ran = box
    present.discard("/dev/nvidia0")
    assert gpudevices.main(["--cards", "0,1", "--", "docker", "run", "i"]) == 1
    assert "/dev/nvidia0 is not a character device" in capsys.readouterr().err
    assert gpudevices.main(["--cards", "4", "--", "docker", "run", "i"]) == 1
    assert "GPU 4 is not among the cards nvidia-smi sees ([0, 1, 2, 3])" in capsys.readouterr().err
    assert gpudevices.main(["--cards", "0;id", "--", "docker", "run", "i"]) == 1
    assert gpudevices.main(["--cards", "2", "--", "docker", "ps"]) == 1
    assert ran == []


def test_without_uvm_nodes_it_starts_and_says_what_a_reload_would_cut(box, capsys):
    present, ran = box
    present -= {"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}
    assert gpudevices.main(["--cards", "1", "--", "docker", "run", "i"]) == 0
    assert ran[0][:4] == ["docker", "run", "--device=/dev/nvidiactl", "--device=/dev/nvidia0"]
    assert "a systemctl daemon-reload can cut this container off" in capsys.readouterr().err


def test_a_driver_that_does_not_answer_refuses_with_its_words(tmp_path, monkeypatch, capsys):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        '#!/bin/sh\necho "NVIDIA-SMI has failed because it couldn\'t communicate"\nexit 9\n'
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr(gpudevices, "make_uvm_nodes", lambda: None)
    assert gpudevices.main(["--cards", "0", "--", "docker", "run", "i"]) == 1
    assert "nvidia-smi cannot read the GPUs: NVIDIA-SMI has failed" in capsys.readouterr().err


def test_minor_numbers_parse_or_refuse():
    assert gpudevices.parse_minors(["0, 0", "", "1, 7"]) == {0: 0, 1: 7}
    with pytest.raises(gpudevices.Refused, match="no index and minor number"):
        gpudevices.parse_minors(["0, [N/A]"])


def test_is_char_tells_a_character_device_from_a_file(tmp_path):
    assert gpudevices.is_char("/dev/null") and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    (tmp_path / "f").write_text("")
    assert not gpudevices.is_char(str(tmp_path / "f"))
    assert not gpudevices.is_char(str(tmp_path / "absent"))


def test_an_nvidia_smi_without_the_field_falls_back_to_the_index(tmp_path, monkeypatch, box):
    present, ran = box
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\ncase \"$1\" in --query-gpu=index) printf '0\\n1\\n';; "
        "*) echo 'Field \"minor_number\" is not a valid field to query.'; exit 2;; esac\n"
    )
    assert gpudevices.main(["--cards", "1", "--", "docker", "run", "i"]) == 0
    assert ran[0][3] == "--device=/dev/nvidia1"
