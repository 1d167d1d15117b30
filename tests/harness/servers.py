"""The harness's servers on this machine, reachable from every box at its control-link address.

- package server: the signed apt repositories and the wheel index (aptrepo.build()), plain HTTP;
- stand-in hub: tests/harness/standin_hub.py, for HF_ENDPOINT;
- OCI registry: Debian's docker-registry, holding the stand-in vLLM image under the kit's image
  name. Boxes pull through it as a Docker registry mirror, so the kit pulls the production name.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tarfile
import threading
import time
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from . import aptrepo, rootfs, standin_hub
from .errors import HarnessError
from .paths import build_lock, cache_dir, run_dir, slot, worker

# Each worker of a parallel run has servers of its own (a hub's rate, faults and counters are a
# test's to set), ten ports apart and apart from a run that is not parallel.
_OFFSET = 10 * (slot() + 1) if worker() else 0
PACKAGE_PORT = 18481 + _OFFSET
HUB_PORT = 18482 + _OFFSET
REGISTRY_PORT = 18483 + _OFFSET
HUB_TOKEN = "hf_standinHarnessToken0123456789abcdef"
STANDIN_VLLM = Path(__file__).parent / "standin_vllm" / "vllm_standin.py"
VLLM_FACTS = STANDIN_VLLM.parent / "vllm_0_25_1.py"  # what the real vLLM accepts and exports


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def kit_image() -> str:
    """The image reference the kit pulls, read from the kit's own group_data (one source of
    truth)."""
    from laguna_kit.knobs import declared

    return declared.defaults()["vllm_image"]


class Servers:
    def __init__(self):
        self.package_root: Path | None = None
        self.package_server: ThreadingHTTPServer | None = None
        self.hub_server = None
        self.hub: standin_hub.Hub | None = None
        self.registry: subprocess.Popen | None = None

    def start(self) -> "Servers":
        with build_lock():
            self.package_root = aptrepo.build()
        handler = functools.partial(_QuietHandler, directory=str(self.package_root))
        self.package_server = ThreadingHTTPServer(("0.0.0.0", PACKAGE_PORT), handler)
        self.package_server.daemon_threads = True
        threading.Thread(
            target=self.package_server.serve_forever, name="packages", daemon=True
        ).start()
        self.hub_server, self.hub = standin_hub.serve(
            "0.0.0.0", HUB_PORT, standin_hub.default_repos(HUB_TOKEN)
        )
        self._start_registry()
        with build_lock():  # the registry's storage is shared: one worker pushes, once
            ensure_standin_image()
        return self

    def _start_registry(self) -> None:
        store = cache_dir() / "registry"
        store.mkdir(exist_ok=True)
        conf = run_dir() / "registry.yml"
        conf.write_text(
            json.dumps(
                {  # YAML is a superset of JSON
                    "version": 0.1,
                    # info: each request's line (method, URI, bytes written): the image cache
                    # drill counts what the stand-in Docker Hub served
                    "log": {"level": "info", "accesslog": {"disabled": True}},
                    "storage": {
                        "filesystem": {"rootdirectory": str(store)},
                        "delete": {"enabled": True},
                    },
                    "http": {"addr": f"0.0.0.0:{REGISTRY_PORT}"},
                }
            )
        )
        log = (run_dir() / "registry.log").open("ab")
        self.registry = subprocess.Popen(
            ["docker-registry", "serve", str(conf)], stdout=log, stderr=log, start_new_session=True
        )
        (run_dir() / "registry.pid").write_text(str(self.registry.pid))
        _wait_http(f"http://127.0.0.1:{REGISTRY_PORT}/v2/", 20, "docker-registry")
        time.sleep(0.3)
        if self.registry.poll() is not None:  # something else answered: the port is taken
            raise HarnessError(
                f"docker-registry exited ({self.registry.returncode}); port {REGISTRY_PORT} "
                f"in use? see {run_dir() / 'registry.log'}"
            )

    def urls(self, box) -> dict:
        """What a box uses to reach the servers (its control-link gateway address)."""
        base = f"http://{box.control_address}"
        return {
            "key_file": str(self.package_root / "harness-key.gpg"),
            "debian": f"{base}:{PACKAGE_PORT}/debian",
            "nvidia_repo": f"{base}:{PACKAGE_PORT}/nvidia/stable/deb",
            "nvidia_key": f"{base}:{PACKAGE_PORT}/nvidia/gpgkey",
            "cuda_repo": f"{base}:{PACKAGE_PORT}/cuda/repos",
            # the same repository in its other possible shape (nvidia_repos.CUDA_SHAPES)
            "cuda_repo_bundled": f"{base}:{PACKAGE_PORT}/cuda-bundled/repos",
            "tailscale_pkgs": f"{base}:{PACKAGE_PORT}/tailscale/stable",
            "pip_index": f"{base}:{PACKAGE_PORT}/pypi/simple",
            "hf_endpoint": f"{base}:{HUB_PORT}",
            "registry_mirror": f"{base}:{REGISTRY_PORT}",
            # the control machine reads the image's config from the registry itself
            "registry": f"http://127.0.0.1:{REGISTRY_PORT}",
        }

    def stop(self) -> None:
        for srv in (self.package_server, self.hub_server):
            if srv:
                srv.shutdown()
                srv.server_close()
        (run_dir() / "registry.pid").unlink(missing_ok=True)
        if self.registry and self.registry.poll() is None:
            self.registry.terminate()
            try:
                self.registry.wait(10)
            except subprocess.TimeoutExpired:
                self.registry.kill()


def _wait_http(url: str, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return  # it answered
        except OSError:
            time.sleep(0.2)
    raise HarnessError(f"{what} did not answer on {url} within {timeout}s")


# The CUDA variables of vLLM's unsuffixed images (CUDA 13 base since vllm-project/vllm#39878; the
# exact minor of v0.25.1 is not confirmed, so the kit reads it from the image, never hard-coded).
# NVIDIA_REQUIRE_CUDA has the shape of NVIDIA's CUDA images: a cuda>= clause and brand clauses,
# none of them for GeForce.
IMAGE_ENV = {
    "CUDA_VERSION": "13.0.1",
    "NVIDIA_REQUIRE_CUDA": "cuda>=13.0 brand=unknown,driver>=535,driver<536 "
    "brand=grid,driver>=535,driver<536 brand=tesla,driver>=535,driver<536 "
    "brand=nvidia,driver>=535,driver<536 brand=quadro,driver>=535,driver<536",
}


def ensure_standin_image() -> None:
    """Build the stand-in vLLM image and push it to the registry, unless the same one is there."""
    ref = kit_image()
    repo, tag = ref.rsplit(":", 1)
    digest = hashlib.sha256(
        STANDIN_VLLM.read_bytes()
        + VLLM_FACTS.read_bytes()
        + str(rootfs.image_rootfs()).encode()
        + repr(IMAGE_ENV).encode()
    ).hexdigest()[:16]
    stamp = cache_dir() / "registry" / ".standin-image"
    if stamp.exists() and stamp.read_text() == f"{ref} {digest}\n" and _registry_has(repo, tag):
        return
    base = rootfs.image_rootfs()
    tar_path = cache_dir() / "standin-image.tar"
    with tarfile.open(tar_path, "w") as tar:
        skip = {
            "usr/share/doc",
            "usr/share/man",
            "usr/share/locale",
            "var/cache/apt",
            "var/lib/apt/lists",
        }
        for item in sorted(base.iterdir()):
            if item.name not in (".complete", "proc", "sys", "dev"):
                tar.add(item, arcname=item.name, filter=lambda ti: None if ti.name in skip else ti)
        tar.add(STANDIN_VLLM, arcname="opt/standin/vllm_standin.py")
        tar.add(VLLM_FACTS, arcname=f"opt/standin/{VLLM_FACTS.name}")
    with _host_dockerd() as docker:
        target = f"127.0.0.1:{REGISTRY_PORT}/{repo}:{tag}"
        _check(
            docker
            + [
                "import",
                "--change",
                'ENTRYPOINT ["python3", "/opt/standin/vllm_standin.py"]',
                "--change",
                "LABEL org.opencontainers.image.title=laguna-kit-standin-vllm",
                *[arg for k, v in IMAGE_ENV.items() for arg in ("--change", f'ENV {k}="{v}"')],
                str(tar_path),
                target,
            ]
        )
        _check(docker + ["push", "-q", target])
    tar_path.unlink()
    stamp.write_text(f"{ref} {digest}\n")


def _registry_has(repo: str, tag: str) -> bool:
    try:
        req = urllib.request.Request(
            f"http://127.0.0.1:{REGISTRY_PORT}/v2/{repo}/manifests/{tag}",
            method="HEAD",
            headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
        )
        return urllib.request.urlopen(req, timeout=5).status == 200
    except OSError:
        return False


def _check(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise HarnessError(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-1500:]}")
    return proc.stdout


class _host_dockerd:
    """A throw-away Docker daemon on this machine, only to import and push the stand-in image."""

    def __enter__(self) -> list[str]:
        if not shutil.which("dockerd"):
            raise HarnessError(
                "dockerd not found: install Debian's docker.io (scripts/setup.sh does)"
            )
        self.root = run_dir() / "host-docker"
        self.root.mkdir(exist_ok=True)
        sock = self.root / "docker.sock"
        self.log = (self.root / "dockerd.log").open("ab")
        self.proc = subprocess.Popen(
            [
                "dockerd",
                "--data-root",
                str(cache_dir() / "host-docker"),
                "--exec-root",
                str(self.root / "exec"),
                "--pidfile",
                str(self.root / "docker.pid"),
                "--host",
                f"unix://{sock}",
                "--storage-driver=vfs",
                "--iptables=false",
                "--ip6tables=false",
                "--bridge=none",
            ],
            stdout=self.log,
            stderr=self.log,
            start_new_session=True,
        )
        docker = ["docker", "-H", f"unix://{sock}"]
        deadline = time.monotonic() + 60
        while subprocess.run(docker + ["info"], capture_output=True).returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise HarnessError(f"host dockerd did not start; see {self.root / 'dockerd.log'}")
            time.sleep(0.5)
        return docker

    def __exit__(self, *exc) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()
        shutil.rmtree(
            cache_dir() / "host-docker", ignore_errors=True
        )  # only the registry copy is kept
