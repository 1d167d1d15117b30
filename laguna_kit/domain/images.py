"""The pinned image's CUDA requirement, read from its registry before the pull, and the rule
nvidia-container-toolkit applies to it at container start.

The image's config carries `CUDA_VERSION` and `NVIDIA_REQUIRE_CUDA` (e.g. `cuda>=13.0
brand=tesla,driver>=535,driver<536 ...`). The toolkit refuses a container whose `cuda>=X.Y` the
driver does not meet unless a `brand=` clause matches the card; GeForce is in no brand list, so for
an RTX 3090 the `cuda>=` clause decides (NVIDIA/nvidia-container-toolkit
internal/config/image/cuda_image.go). The kit never sets `NVIDIA_DISABLE_REQUIRE`.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from typing import NamedTuple

ACCEPT = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)


class ImageError(RuntimeError):
    pass


@dataclass(frozen=True)
class CudaRequirement:
    cuda_version: str  # the image's CUDA_VERSION
    require: str  # NVIDIA_REQUIRE_CUDA, as the image states it

    @property
    def minimum(self) -> tuple[int, int] | None:
        """The `cuda>=X.Y` the toolkit enforces (else the image's own CUDA major.minor)."""
        m = re.search(r"(?:^|\s)cuda>=(\d+)\.(\d+)", self.require)
        if m:
            return int(m.group(1)), int(m.group(2))
        v = version_tuple(self.cuda_version)
        return (v[0], v[1]) if len(v) >= 2 else None

    def describe(self) -> str:
        low = self.minimum
        need = f"CUDA >= {low[0]}.{low[1]}" if low else "an unknown CUDA"
        clause = self.require.split()[0] if self.require else f"CUDA_VERSION={self.cuda_version}"
        return f"{need} ({clause})"

    def met_by(self, driver_cuda: str) -> bool:
        low = self.minimum
        return low is None or version_tuple(driver_cuda)[:2] >= low


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text or "")[:3])


def from_env(env: list[str] | dict) -> CudaRequirement:
    """From an image config's Env (["KEY=VALUE", ...]) or a dict."""
    if isinstance(env, list):
        env = dict(e.split("=", 1) for e in env if "=" in e)
    return CudaRequirement(env.get("CUDA_VERSION", ""), env.get("NVIDIA_REQUIRE_CUDA", ""))


def parse_ref(ref: str) -> tuple[str, str, str]:
    """(repository, tag, digest) of `repo[:tag][@sha256:...]` ("" for what it lacks; the tag is
    "latest" when it has neither, as Docker reads it)."""
    name, _, digest = ref.partition("@")
    if ":" in name.split("/")[-1]:
        repo, _, tag = name.rpartition(":")
    else:
        repo, tag = name, "" if digest else "latest"
    return repo, tag, digest


def pinned_digest(ref: str) -> str:
    """The digest a reference pins (`repo@sha256:...`), or ""."""
    return parse_ref(ref)[2]


def repository(ref: str) -> str:
    return parse_ref(ref)[0]


def split_ref(ref: str) -> tuple[str, str]:
    """("vllm/vllm-openai", "v0.25.1") from a Docker Hub reference (library/ for single names);
    a pinned reference's digest in place of its tag (what its manifest is asked by)."""
    repo, tag, digest = parse_ref(ref)
    return (repo if "/" in repo else f"library/{repo}"), digest or tag


def expected_digest(ref: str, info: ImageInfo | None) -> str:
    """The digest the pulled image must have: the one the reference pins, else the one its
    registry named this run ("" when neither is known)."""
    return pinned_digest(ref) or (info.digest if info else "")


def unpinnable_problem(ref: str, registry: str, unread: str) -> str | None:
    """Why nothing may be pulled: the tag's digest could not be read from its registry and the
    reference pins none, so a pull through a mirror or the fleet's cache could not be checked
    (fail closed). None: the digest is known."""
    if not unread or pinned_digest(ref):
        return None
    return (
        f"{unread}. Without the digest {registry} names for {ref}, an image pulled through a "
        "mirror or the fleet's cache cannot be checked, so none is pulled: let this machine reach "
        f'image_registry, or pin the image by digest (vllm_image = "{repository(ref)}@sha256:...", '
        "as `docker buildx imagetools inspect` or the registry's page shows it)"
    )


def _bearer(client, challenge: str) -> str:
    """A registry token for a `WWW-Authenticate: Bearer realm=...,service=...,scope=...` answer."""
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = params.pop("realm", None)
    if not realm:
        raise ImageError(f"the registry asked for authentication it does not describe: {challenge}")
    r = client.get(realm, params=params)
    r.raise_for_status()
    doc = r.json()
    return doc.get("token") or doc.get("access_token") or ""


def image_requirement(registry: str, ref: str, timeout: float = 20) -> CudaRequirement:
    """Read the image's config (linux/amd64) from `registry` without pulling it."""
    return image_info(registry, ref, timeout)[0]


class ImageInfo(NamedTuple):
    requirement: CudaRequirement
    size: int  # the bytes its manifest lists: config and compressed layers
    digest: str  # the tag's manifest (or index) digest: what `docker pull` records in RepoDigests


def image_info(registry: str, ref: str, timeout: float = 20) -> ImageInfo:
    """The image's CUDA requirement, size and digest, read from `registry` without pulling the
    image (linux/amd64)."""
    import httpx

    repo, tag = split_ref(ref)
    base = f"{registry.rstrip('/')}/v2/{repo}"
    try:
        with httpx.Client(timeout=timeout, follow_redirects=True) as client:
            headers = {"Accept": ACCEPT}

            def get(url):
                r = client.get(url, headers=headers)
                if (
                    r.status_code == 401
                    and "bearer" in r.headers.get("www-authenticate", "").lower()
                ):
                    headers["Authorization"] = (
                        f"Bearer {_bearer(client, r.headers['www-authenticate'])}"
                    )
                    r = client.get(url, headers=headers)
                if r.status_code != 200:
                    raise ImageError(
                        f"{registry} answered HTTP {r.status_code} for {url.split('/v2/', 1)[1]}"
                    )
                seen.append(r)
                return r.json()

            seen: list = []
            manifest = get(f"{base}/manifests/{tag}")
            # The registry's Docker-Content-Digest, else the digest of the bytes it sent: the
            # digest is the sha256 of exactly those bytes (the distribution spec).
            digest = seen[0].headers.get("docker-content-digest") or (
                "sha256:" + hashlib.sha256(seen[0].content).hexdigest()
            )
            if "manifests" in manifest:  # an index: the linux/amd64 image
                chosen = next(
                    (
                        m
                        for m in manifest["manifests"]
                        if (m.get("platform") or {}).get("os") == "linux"
                        and (m.get("platform") or {}).get("architecture") == "amd64"
                    ),
                    None,
                )
                if chosen is None:
                    raise ImageError(f"{ref} has no linux/amd64 image at {registry}")
                manifest = get(f"{base}/manifests/{chosen['digest']}")
            config = get(f"{base}/blobs/{manifest['config']['digest']}")
        size = int(manifest["config"].get("size") or 0) + sum(
            int(layer.get("size") or 0) for layer in manifest.get("layers") or []
        )
    except httpx.HTTPError as exc:
        url = str(getattr(getattr(exc, "request", None), "url", "") or registry)
        raise ImageError(
            f"cannot read {ref} from {registry}: {type(exc).__name__} at {url} "
            f"({exc or 'no reason given'}); check this machine reaches the registry "
            "(image_registry, a proxy) or pull the image on the box by hand"
        ) from None
    except (KeyError, ValueError, TypeError) as exc:
        raise ImageError(f"{registry} sent an unexpected manifest for {ref} ({exc})") from None
    return ImageInfo(from_env((config.get("config") or {}).get("Env") or []), size, digest)


@functools.lru_cache(maxsize=8)
def info_or_reason(registry: str, ref: str) -> tuple[ImageInfo | None, str]:
    """(the requirement, its compressed size and digest; "") or (None, why it could not be read):
    read once per run."""
    try:
        return image_info(registry, ref), ""
    except ImageError as exc:
        return None, str(exc)


def requirement_or_reason(registry: str, ref: str) -> tuple[CudaRequirement | None, str]:
    """(the requirement, "") or (None, why it could not be read)."""
    info, reason = info_or_reason(registry, ref)
    return (info[0] if info else None), reason


# A pull keeps each compressed layer while it unpacks it, and gzip'd layers of Python and CUDA
# libraries unpack to about twice their size: derived, not measured on the real image.
UNPACK_FACTOR = 3.0
