#!/usr/bin/env python3
"""Regenerate the generated parts of docs/reference.md from group_data/all.py (the knob table
and the rendered serving modes), so docs cannot drift from the one source of truth.
--check: exit 1 if stale."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from laguna_kit.domain import profiles
from laguna_kit.knobs import declared  # noqa: E402

DOC = declared.KIT_ROOT / "docs" / "reference.md"
BEGIN, END = "<!-- generated:knobs -->", "<!-- /generated:knobs -->"


def generated() -> str:
    d, docs = declared.defaults(), declared.knob_docs()
    rows = ["| knob | default | why |", "|---|---|---|"]
    for name, value in d.items():
        if name in ("serving_profiles", "vllm_common_args", "container_env"):
            value = "(table in group_data/all.py)"
        rows.append(f"| `{name}` | `{value!r}` | {docs.get(name, '')} |")
    modes = [
        "",
        "| mode | --max-model-len | --gpu-memory-utilization | --max-num-seqs | "
        "--max-num-batched-tokens "
        "| DFlash k | gate prompt | derived (not published upstream) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode, p in d["serving_profiles"].items():
        s = profiles.render(dict(d, serving_mode=mode))
        modes.append(
            f"| `{mode}` | {p['max_model_len'] or 'native'} | "
            f"{p['gpu_memory_utilization'] or 'default'} "
            f"| {p['max_num_seqs']} | {p['max_num_batched_tokens'] or 'default'} "
            f"| {p['dflash_tokens'] or 'off'} | {s.gate_prompt_tokens:,} | "
            f"{', '.join(s.derived) or '-'} |"
        )
    return "\n".join([BEGIN, *rows, *modes, END])


def main() -> int:
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    new = head + generated() + rest.split(END, 1)[1]
    if "--check" in sys.argv:
        return 0 if new == text else 1
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
