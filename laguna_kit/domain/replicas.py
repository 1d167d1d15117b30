"""Replicas: a GPU box with gpu_count x k cards serves k copies of the model, each TP<gpu_count>
on its own cards, with its own port, unit, container and numbered releases.

Replica 1 keeps the names a one-replica box always had (unit_name, container_name, api_port, its
releases under kit_dir), so a box that gains no replica sees no change. Replica n > 1 is
`<unit>-n.service`, `<container>-n`, api_port + n - 1, its releases under kit_dir/replicas/n, and
CUDA_VISIBLE_DEVICES its own cards (n-1)*gpu_count ... n*gpu_count-1 (docker runs every replica
with --gpus all, as the recipe does; CUDA sees only the listed cards, which vLLM numbers 0..).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyinfra import logger

from ..facts.nvidia import NvidiaSmiGpus, PciGpus
from ..run import memo

MAX_REPLICAS = 8  # a 32-card box at TP4; beyond it a count is a typo, not a machine


@dataclass(frozen=True)
class Replica:
    number: int  # 1-based, as an operator says it
    unit: str
    container: str
    port: int
    devices: str  # CUDA_VISIBLE_DEVICES
    state_dir: str  # its releases, last gate, router agent settings and drain marker

    @property
    def label(self) -> str:
        """How logs and reports name it ("" for a box's only replica)."""
        return f"replica {self.number}"


def suffixed(name: str, n: int) -> str:
    """`laguna-vllm.service` -> `laguna-vllm-2.service`; `vllm-laguna` -> `vllm-laguna-2`."""
    if n == 1:
        return name
    stem, dot, ext = name.rpartition(".") if name.endswith(".service") else (name, "", "")
    return f"{stem}-{n}{dot}{ext}"


def state_dir(kit_dir: str, n: int) -> str:
    return kit_dir if n == 1 else f"{kit_dir}/replicas/{n}"


def count_for(wanted: int, cards: int | None, gpu_count: int) -> int:
    """How many replicas: `wanted` when set (> 0), else as many as the box's cards hold (one when
    they cannot be counted, or hold fewer than one replica: the pre-flight refuses that box)."""
    if wanted > 0:
        return wanted
    if not cards:
        return 1
    return max(1, min(MAX_REPLICAS, cards // gpu_count))


def gpus_seen(h):
    """(GPUs, where they were seen): nvidia-smi's view when the driver is loaded, else the PCI
    bus's (memory may be unknown)."""
    smi = memo.fact(h, NvidiaSmiGpus)
    return (smi["gpus"], "nvidia-smi") if smi["ok"] else (h.get_fact(PciGpus), "PCI bus")


def count(h) -> int:
    """The replicas host `h` serves: its hosts-file data, else its cards (nvidia-smi's view when
    the driver answers, read by the pre-flight already; else the PCI bus, before any driver).
    Counted once per run, so every step and every other host's router or monitor agree."""
    wanted = int(h.data.get("replicas_per_box") or 0)
    if wanted > 0:
        return wanted
    known = getattr(h, "_laguna_replica_count", None)
    if known is not None:
        return known
    try:
        smi = memo.fact(h, NvidiaSmiGpus)
        cards = len(smi["gpus"]) if smi.get("ok") else len(h.get_fact(PciGpus))
    except Exception as exc:  # noqa: BLE001 - an unreachable box counts as one replica
        logger.warning(f"{h.name}: cannot count its GPUs ({exc}): taking one replica")
        return 1
    h._laguna_replica_count = count_for(0, cards, int(h.data.get("gpu_count")))
    return h._laguna_replica_count


def of(h) -> list[Replica]:
    """Host `h`'s replicas, first to last."""
    return build(h.data, count(h))


def build(data, k: int) -> list[Replica]:
    g = int(data.get("gpu_count"))
    return [
        Replica(
            number=n,
            unit=suffixed(data.get("unit_name"), n),
            container=suffixed(data.get("container_name"), n),
            port=int(data.get("api_port")) + n - 1,
            devices=",".join(str(i) for i in range((n - 1) * g, n * g)),
            state_dir=state_dir(data.get("kit_dir"), n),
        )
        for n in range(1, k + 1)
    ]


def own_state(kit_dir: str, state_dir: str | None) -> dict:
    """The state_dir argument of the release manager and its fact, for a replica past the first
    (replica 1's calls, whose state is kit_dir's, stay as they were)."""
    return {"state_dir": state_dir} if state_dir and state_dir != kit_dir else {}


def knobs_for(knobs: dict, r: Replica) -> dict:
    """The knobs replica `r` is rendered from: its unit, container, port and cards
    (profiles.render sets CUDA_VISIBLE_DEVICES and the tensor parallel size of gpu_count; replica
    1 of a four-card box renders exactly as before)."""
    return dict(
        knobs,
        unit_name=r.unit,
        container_name=r.container,
        api_port=r.port,
        cuda_visible_devices=r.devices,
    )


def port_values(ports) -> list[str]:
    """Port numbers as nftables set values, each once, neighbours merged into ranges
    (`8080-8081`): boxes with one and two replicas give 8080 twice."""
    out: list[str] = []
    run: list[int] = []
    for p in sorted(set(int(p) for p in ports)):
        if run and p == run[-1] + 1:
            run.append(p)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [p]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return out


def ports(replicas: list[Replica]) -> str:
    """The replicas' API ports as one nftables value: `8080` or `8080-8081`."""
    return ",".join(port_values(r.port for r in replicas))
