"""What a deploy's upload, a gate and earlier deploys leave in a replica's release folders, for the
release manager's tests."""

import json
import os


def incoming(store, mode="champion", unit_body="ExecStart=/usr/bin/docker run x"):
    """What a deploy uploads for a new release (releases/incoming)."""
    folder = os.path.join(store.root, "incoming")
    os.makedirs(folder)
    with open(os.path.join(folder, "release.json"), "w") as fh:
        json.dump(
            {"mode": mode, "image": "img", "spec": {"mode": mode, "gate": {"prompt_tokens": 10}}},
            fh,
        )
    with open(os.path.join(folder, store.unit), "w") as fh:
        fh.write(f"# release @RELEASE@\n{unit_body}\n")


def passed_gate(store, n, decode, mode="champion"):
    """What a passing gate of release n leaves (last-gate.json), recorded as the box does."""
    os.makedirs(os.path.join(store.kit_dir, "state"), exist_ok=True)
    with open(os.path.join(store.kit_dir, "state", "last-gate.json"), "w") as fh:
        json.dump(
            {
                "release": n,
                "passed": True,
                "time": "T",
                "perf": {"decode_tok_s": decode, "ttft_s": 1.0, "acceptance": 0.6, "mode": mode},
            },
            fh,
        )
    store.record_perf()


def write_releases(store, specs: list[dict], state: dict) -> None:
    """Release folders holding `specs` (numbered from 1), and state.json."""
    for n, spec in enumerate(specs, 1):
        os.makedirs(store.folder(n))
        with open(os.path.join(store.folder(n), "release.json"), "w") as fh:
            json.dump({"number": n, "spec": spec}, fh)
    store.save(state)
