#!/usr/bin/env python3
"""Benchmark (prints figures, asserts nothing): checkpoint verification on this machine.

1. Hash throughput of the kit's verifier (laguna_kit/boxtools/fetch/verify.py) against `sha256sum`
   on the same files.
2. A real fetch through the stand-in hub (127.0.0.1) with the real huggingface_hub client, then a
   converged re-run: bytes downloaded and bytes re-hashed by each.
3. A transfer cut half way through a shard, then resumed: bytes fetched against bytes missing.
usage: bench_verify.py [--files 15] [--mib 64] [--json out.json]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from laguna_kit.boxtools.fetch import verify  # noqa: E402
from laguna_kit.boxtools.fetch.errors import FetchError  # noqa: E402
from laguna_kit.boxtools.fetch.run import sync  # noqa: E402
from laguna_kit.boxtools.layout import PARTIAL  # noqa: E402
from tests.harness import standin_hub  # noqa: E402

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--files", type=int, default=15)
p.add_argument("--mib", type=int, default=64, help="size of each file")
p.add_argument("--json")
a = p.parse_args()
out = {}
with tempfile.TemporaryDirectory() as tmp:
    paths = []
    for i in range(a.files):
        path = os.path.join(tmp, f"shard-{i:02d}")
        with open(path, "wb") as fh:
            fh.write(os.urandom(a.mib << 20))
        paths.append(path)
    total = a.files * (a.mib << 20)
    subprocess.run(["cat", *paths], stdout=subprocess.DEVNULL)  # warm the page cache for both
    # The kit's hashing as the fetch tool verifies a file on disk (one core, then a file per core).
    entries = [
        {"path": os.path.basename(x), "size": a.mib << 20, "sha256": "0" * 64} for x in paths
    ]
    t = time.monotonic()
    counter = {"hashed_bytes": 0}
    for path, entry in zip(paths, entries):
        verify.content_ok(path, entry, counter)
    kit_s = time.monotonic() - t
    t = time.monotonic()
    subprocess.run(["sha256sum", *paths], stdout=subprocess.DEVNULL, check=True)
    ref_s = time.monotonic() - t
    # OpenSSL's own tool on one core (SHA-NI where the CPU has it): the per-core ceiling.
    t = time.monotonic()
    subprocess.run(["openssl", "dgst", "-sha256", *paths], stdout=subprocess.DEVNULL, check=True)
    ssl_s = time.monotonic() - t
    t = time.monotonic()
    verify.hashed_in_parallel(tmp, entries, {"hashed_bytes": 0})
    par_s = time.monotonic() - t
    cores = min(os.cpu_count() or 1, a.files)
    out["hash"] = {
        "bytes": total,
        "kit_MiB_s": round(total / kit_s / 2**20, 1),
        "sha256sum_MiB_s": round(total / ref_s / 2**20, 1),
        "ratio": round(ref_s / kit_s, 3),
        "openssl_per_core_MiB_s": round(total / ssl_s / 2**20, 1),
        "kit_one_core_to_openssl": round(ssl_s / kit_s, 3),
        "kit_parallel_MiB_s": round(total / par_s / 2**20, 1),
        "cores": cores,
        "kit_parallel_to_openssl_x_cores": round(ssl_s / par_s / cores, 3),
    }

    server, hub = standin_hub.serve("127.0.0.1", 0, standin_hub.default_repos(shard_bytes=4 << 20))
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    repo = hub.repos[standin_hub.TARGET_REPO]
    manifest = os.path.join(tmp, "manifest.json")
    with open(manifest, "w") as fh:
        json.dump(
            {
                "revision": repo.commit,
                "files": [
                    {"path": f, "size": m["size"], "sha256": m["sha256"], "blob_id": m["oid"]}
                    for f, m in repo.meta.items()
                ],
            },
            fh,
        )
    dest = os.path.join(tmp, "ckpt")
    runs = []
    for label in ("fresh", "converged re-run"):
        t = time.monotonic()
        summary = sync(
            argparse.Namespace(
                repo=repo.repo_id,
                manifest=manifest,
                dest=dest,
                endpoint=endpoint,
                token_file=None,
                workers=4,
                margin_mib=0,
                rehash=False,
            )
        )
        runs.append(
            {
                "run": label,
                "seconds": round(time.monotonic() - t, 3),
                "downloaded_bytes": summary["downloaded_bytes"],
                "hashed_bytes": summary["hashed_bytes"],
            }
        )
    out["fetch"] = runs

    # A transfer killed half way through one shard, then resumed: bytes fetched vs bytes missing.
    shard = sorted(f for f in repo.files if f.endswith(".safetensors"))[0]
    os.remove(os.path.join(dest, shard))
    size = len(repo.files[shard])
    hub.served.clear()
    hub.cut[shard] = size // 2
    args = argparse.Namespace(
        repo=repo.repo_id,
        manifest=manifest,
        dest=dest,
        endpoint=endpoint,
        token_file=None,
        workers=4,
        margin_mib=0,
        rehash=False,
        retries=0,  # the cut ends this run: the next one resumes from the bytes on disk
    )
    try:
        sync(args)
    except FetchError:
        pass
    kept = os.path.getsize(os.path.join(dest, PARTIAL, shard + ".part"))
    hub.served.clear()
    args.retries = 5
    sync(args)
    fetched = hub.served.get(f"{repo.repo_id}/{shard}", 0)
    out["resume"] = {
        "file_bytes": size,
        "kept": kept,
        "missing": size - kept,
        "fetched": fetched,
        "overhead": round(fetched / (size - kept), 4),
    }
    server.shutdown()

h = out["hash"]
print(
    f"hash {h['bytes'] / 2**20:.0f} MiB: kit {h['kit_MiB_s']} MiB/s, sha256sum "
    f"{h['sha256sum_MiB_s']} MiB/s "
    f"(kit/sha256sum speed {h['ratio']})"
)
print(
    f"hash per core: kit {h['kit_MiB_s']} MiB/s, openssl dgst {h['openssl_per_core_MiB_s']} MiB/s "
    f"({h['kit_one_core_to_openssl']}); a file per core on {h['cores']} cores: "
    f"{h['kit_parallel_MiB_s']} MiB/s = {h['kit_parallel_to_openssl_x_cores']} x openssl x cores"
)
print(f"{'run':<18} {'seconds':>8} {'downloaded':>12} {'re-hashed':>12}")
for r in out["fetch"]:
    print(f"{r['run']:<18} {r['seconds']:>8} {r['downloaded_bytes']:>12} {r['hashed_bytes']:>12}")
r = out["resume"]
print(
    f"resume: {r['kept']} of {r['file_bytes']} bytes kept, {r['fetched']} fetched for "
    f"{r['missing']} missing "
    f"({r['overhead']}x)"
)
if a.json:
    with open(a.json, "w") as fh:
        json.dump(out, fh, indent=1)
