"""laguna_kit/domain/hardware.py on output captured from a real GPU
(tests/data/nvidia-smi/h200-x1)."""

from pathlib import Path

import pytest

from laguna_kit.domain import hardware

FIXTURES = Path(__file__).resolve().parents[2] / "data" / "nvidia-smi" / "h200-x1"


def test_query_fields_are_the_captured_ones():
    # The fixture was captured with this exact --query-gpu list; the kit asks for the same.
    assert len(hardware.QUERY_FIELDS.split(",")) == len(
        (FIXTURES / "query-gpu.csv").read_text().split(",")
    )


def test_real_h200_output_parses_and_is_refused():
    gpus = hardware.parse_query_gpu((FIXTURES / "query-gpu.csv").read_text().splitlines())
    assert gpus == [
        hardware.Gpu(
            "NVIDIA H200",
            143771,
            "00000000:00:06.0",
            "GPU-6eaec60d-4357-f60b-8972-0375fc81e25f",
            "9.0",
            "580.159.04",
            0,  # memory.used, MiB
        )
    ]
    problems = hardware.gpu_problems(gpus, 4, 24000)
    assert problems == [
        "found 1× NVIDIA H200 (143771 MiB), need 4 GPUs ≥ 24000 MiB each (tensor parallel size 4; "
        "or a multiple of 4, one replica each)"
    ]


def test_uuid_in_fixture_listing_matches_query():
    listing = (FIXTURES / "nvidia-smi-L.txt").read_text()
    gpu = hardware.parse_query_gpu((FIXTURES / "query-gpu.csv").read_text().splitlines())[0]
    assert f"GPU 0: {gpu.name} (UUID: {gpu.uuid})" in listing


def test_four_3090s_pass_and_small_cards_fail():
    row = (
        "{i}, NVIDIA GeForce RTX 3090, 24576, 0, 24576, 535.247.01, "
        "00000000:0{i}:00.0, GPU-x{i}, 8.6"
    )
    gpus = hardware.parse_query_gpu([row.format(i=i) for i in range(4)])
    assert hardware.gpu_problems(gpus, 4, 24000) == []
    small = [hardware.Gpu("NVIDIA GeForce RTX 4080", 16376)] * 4
    assert hardware.gpu_problems(small, 4, 24000) == [
        "found 4× NVIDIA GeForce RTX 4080 (16376 MiB), need 4 GPUs ≥ 24000 MiB each"
    ]


def test_bad_rows_raise_parse_errors():
    with pytest.raises(hardware.ParseError):
        hardware.parse_query_gpu(["0, NVIDIA H200, 143771"])
    with pytest.raises(hardware.ParseError):
        hardware.parse_query_gpu(["0, NVIDIA H200, [N/A], 0, 0, 580, 00:06.0, GPU-1, 9.0"])


def test_sysfs_counts_nvidia_display_devices_only():
    lines = [
        "0000:00:02.0 0x8086 0x4680 0x030000",  # Intel iGPU
        "0000:01:00.0 0x10de 0x2204 0x030000",  # RTX 3090
        "0000:01:00.1 0x10de 0x1aef 0x040300",  # its HDMI audio function
        "0000:02:00.0 0x10de 0x9999 0x030200",
    ]  # an NVIDIA 3D controller the kit does not know
    gpus = hardware.parse_sysfs_pci(lines)
    assert [g.name for g in gpus] == ["NVIDIA GeForce RTX 3090", "NVIDIA GPU [10de:9999]"]
    assert gpus[0].memory_mib == 24576 and gpus[1].memory_mib is None
    assert "memory unknown" in hardware.describe(gpus)


def test_a_multiple_of_four_cards_serves_one_replica_per_four_unless_told_fewer():
    card = hardware.Gpu("NVIDIA GeForce RTX 3090", 24576)
    assert hardware.gpu_problems([card] * 8, 4, 24000) == []
    assert hardware.idle_gpus([card] * 8, 4) == ""  # two replicas use all eight
    assert hardware.idle_gpus([card] * 4, 4) == ""
    # the owner keeps cards 4-7: one replica, named as idle
    assert hardware.gpu_problems([card] * 8, 4, 24000, replicas=1) == []
    said = hardware.idle_gpus([card] * 8, 4, replicas=1)
    assert said.startswith("8 GPUs: the kit serves 1 TP4 replica(s) here, on GPUs 0-3")
    assert "GPUs 4-7 stay idle (replicas_per_box = 1)" in said
    # issue 40 #10: on 3 and 5 cards (refused) nothing says they serve; one idle card is "GPU 4"
    assert hardware.idle_gpus([card] * 3, 4) == "" and hardware.idle_gpus([card] * 5, 4) == ""
    assert "GPU 4 stay" in hardware.idle_gpus([card] * 5, 4, replicas=1)
    assert hardware.gpu_problems([card] * 6, 4, 24000) == [
        "found 6× NVIDIA GeForce RTX 3090 (24576 MiB), need 4 GPUs ≥ 24000 MiB each (tensor "
        "parallel size 4; or a multiple of 4, one replica each: or set replicas_per_box = 1)"
    ]
    assert hardware.gpu_problems([card] * 6, 4, 24000, replicas=1) == []
    assert hardware.gpu_problems([card] * 4, 4, 24000, replicas=2) == [
        "found 4× NVIDIA GeForce RTX 3090 (24576 MiB), need 8 GPUs ≥ 24000 MiB each for "
        "replicas_per_box = 2 (tensor parallel size 4 each): set replicas_per_box lower, or 0 for "
        "as many as the cards hold"
    ]
    assert hardware.gpu_problems([], 4, 24000)  # no card at all is still refused


def test_a_card_another_process_holds_is_refused_and_one_it_uses_a_little_is_said():
    card = dict(name="NVIDIA GeForce RTX 3090", memory_mib=24576, bus_id="00000000:02:00.0")
    idle, light, heavy = (hardware.Gpu(**card, used_mib=m) for m in (1, 2048, 20480))
    assert hardware.memory_in_use([idle, idle], 0.87) == ([], [])
    problems, warnings = hardware.memory_in_use([idle, light, heavy], 0.87)
    assert warnings == ["GPU 1 (00000000:02:00.0) has 2048 MiB of 24576 in use by another "
                        "process (`nvidia-smi` lists it)"]  # fmt: skip
    assert problems == [
        "GPU 2 (00000000:02:00.0) has 20480 MiB of 24576 in use: vLLM takes 0.87 of each card "
        "at start and would refuse to start; stop what holds it (`nvidia-smi` lists the "
        "processes) and run again"
    ]
    before_the_driver = hardware.Gpu("NVIDIA GeForce RTX 3090", 24576)  # from the PCI bus
    assert hardware.memory_in_use([before_the_driver], 0.87) == ([], [])
