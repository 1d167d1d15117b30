"""A release decoding slower than min_decode_ratio x the previous passing release of its mode on
this box fails its gate, unless the operator forces it."""

from __future__ import annotations

from .failure import log


def slower_check(perf: dict, baseline: dict | None, ratio: float, force: bool) -> str | None:
    """None when this release is not slower than `ratio` × the baseline's decode (the previous
    passing release on this box, same mode); else what is wrong. `force`: accepted, and said."""
    if not baseline or not baseline.get("decode_tok_s") or perf.get("decode_tok_s") is None:
        return None
    floor = ratio * baseline["decode_tok_s"]
    if perf["decode_tok_s"] >= floor:
        return None
    said = (
        f"decode {perf['decode_tok_s']} tok/s is below {ratio} x {baseline['decode_tok_s']} "
        f"tok/s of release {baseline['release']} (the previous passing release on this box, mode "
        f"{baseline.get('mode')}) = {floor:.1f} tok/s"
    )
    if force:
        log(f"{said}: accepted (force_slower)")
        return None
    return (
        f"{said}: a slower release is refused (min_decode_ratio); find why (tasks/logs.py, "
        "nvidia-smi clocks and temperature), or accept it with --data force_slower=true"
    )
