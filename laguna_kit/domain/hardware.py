"""GPU inventory: parsing real nvidia-smi / sysfs output and judging it against what the recipe
needs.

Pure functions, tested against output captured from a real GPU (tests/data/nvidia-smi/).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

# The field order of the real capture in tests/data/nvidia-smi/*/query-gpu.csv.
QUERY_FIELDS = (
    "index,name,memory.total,memory.used,memory.free,driver_version,pci.bus_id,uuid,compute_cap"
)

# PCI device ids whose memory is certain, so a wrong card is refused before a driver goes in.
# Unknown ids are counted, and their memory is checked once nvidia-smi can read it.
KNOWN_PCI = {
    "2204": ("NVIDIA GeForce RTX 3090", 24576),
    "2684": ("NVIDIA GeForce RTX 4090", 24564),
    "2704": ("NVIDIA GeForce RTX 4080", 16376),
    "2335": ("NVIDIA H200", 143771),
}


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_mib: int | None  # None: not known until the driver can read it
    bus_id: str = ""
    uuid: str = ""
    compute_cap: str = ""
    driver_version: str = ""
    used_mib: int | None = None  # memory in use now (None: not read, before the driver)


class ParseError(ValueError):
    pass


def parse_query_gpu(lines: list[str]) -> list[Gpu]:
    """Rows of ``nvidia-smi --query-gpu=QUERY_FIELDS --format=csv,noheader,nounits``."""
    gpus = []
    for line in lines:
        if not line.strip():
            continue
        cols = [c.strip() for c in line.split(",")]
        if len(cols) != len(QUERY_FIELDS.split(",")):
            raise ParseError(f"unexpected nvidia-smi row ({len(cols)} columns): {line!r}")
        _, name, mem, used, _free, driver, bus, uuid, cap = cols
        try:
            memory = int(float(mem))
        except ValueError:
            raise ParseError(f"nvidia-smi memory.total is not a number: {mem!r}") from None
        in_use = int(float(used)) if used.replace(".", "", 1).isdigit() else None
        gpus.append(Gpu(name, memory, bus, uuid, cap, driver, in_use))
    return gpus


def parse_sysfs_pci(lines: list[str]) -> list[Gpu]:
    """``<slot> <vendor> <device> <class>`` lines from sysfs: NVIDIA (0x10de) display class
    (0x03xxxx)."""
    gpus = []
    for line in lines:
        parts = line.split()
        if len(parts) != 4:
            continue
        slot, vendor, device, cls = parts
        if vendor.lower() != "0x10de" or not cls.lower().startswith("0x03"):
            continue
        dev = device.lower().removeprefix("0x")
        name, memory = KNOWN_PCI.get(dev, (f"NVIDIA GPU [10de:{dev}]", None))
        gpus.append(Gpu(name, memory, bus_id=slot))
    return gpus


def idle_gpus(gpus: list[Gpu], count: int, replicas: int = 0) -> str:
    """What is said of a box whose cards the replicas leave unused ("" when none are): `replicas`
    set (replicas_per_box), or as many as the cards hold (0)."""
    if not replicas or len(gpus) < replicas * count:
        return ""  # as many as fit leaves none idle; a count that is no multiple is refused
    used = replicas * count
    if len(gpus) <= used:
        return ""

    def cards(first: int, last: int) -> str:
        return f"GPU {first}" if first == last else f"GPUs {first}-{last}"

    return (
        f"{len(gpus)} GPUs: the kit serves {replicas} TP{count} replica(s) here, on "
        f"{cards(0, used - 1)}; {cards(used, len(gpus) - 1)} stay idle "
        f"(replicas_per_box = {replicas})"
    )


# A card with more than this in use runs something (a desktop's or an idle driver's own use is
# well under it).
IN_USE_MIB = 1024


def memory_in_use(gpus: list[Gpu], utilization: float) -> tuple[list[str], list[str]]:
    """(refusals, warnings) for cards whose memory another process holds: vLLM takes
    `utilization` of each card at start and refuses to start when less is free (its "Free memory
    on device ... is less than desired GPU memory utilization"); less than that is said."""
    problems, warnings = [], []
    for i, g in enumerate(gpus):
        if g.used_mib is None or g.memory_mib is None or g.used_mib <= IN_USE_MIB:
            continue
        said = f"GPU {i} ({g.bus_id}) has {g.used_mib} MiB of {g.memory_mib} in use"
        if g.memory_mib - g.used_mib < utilization * g.memory_mib:
            problems.append(
                f"{said}: vLLM takes {utilization} of each card at start and would refuse to "
                "start; stop what holds it (`nvidia-smi` lists the processes) and run again"
            )
        else:
            warnings.append(f"{said} by another process (`nvidia-smi` lists it)")
    return problems, warnings


def describe(gpus: list[Gpu]) -> str:
    if not gpus:
        return "no NVIDIA GPU"
    counts = Counter((g.name, g.memory_mib) for g in gpus)
    return ", ".join(
        f"{n}× {name}" + (f" ({mem} MiB)" if mem else " (memory unknown until the driver is in)")
        for (name, mem), n in counts.items()
    )


def gpu_problems(gpus: list[Gpu], count: int, min_memory_mib: int, replicas: int = 0) -> list[str]:
    """Why these GPUs cannot run the champion (empty when they can, or cannot be judged yet): a
    multiple of `count` is accepted, one replica per `count` cards (a rented box with 8 cards
    serves two), or with `replicas` set, at least that many replicas' cards (the rest stay idle:
    idle_gpus says so)."""
    need = f"need {count} GPUs ≥ {min_memory_mib} MiB each"
    if replicas and len(gpus) < replicas * count:
        return [
            f"found {describe(gpus)}, need {replicas * count} GPUs ≥ {min_memory_mib} MiB each "
            f"for replicas_per_box = {replicas} (tensor parallel size {count} each): set "
            "replicas_per_box lower, or 0 for as many as the cards hold"
        ]
    if not gpus or (not replicas and len(gpus) % count):
        fewer = f": or set replicas_per_box = {len(gpus) // count}" if len(gpus) > count else ""
        return [
            f"found {describe(gpus)}, {need} (tensor parallel size {count}; or a multiple of "
            f"{count}, one replica each{fewer})"
        ]
    small = [g for g in gpus if g.memory_mib is not None and g.memory_mib < min_memory_mib]
    if small:
        return [f"found {describe(gpus)}, {need}"]
    return []
