"""Names of what the kit keeps on a box, shared by the box tools and the control side's facts."""

VERIFIED_RECORD = ".laguna-verified.json"  # per checkpoint folder: each file's hash and stat
PARTIAL = ".laguna-partial"  # per checkpoint folder: downloads in progress (never taken for a file)
QUARANTINE = ".laguna-quarantine"  # per checkpoint folder: files that failed their hash
STASH = ".laguna-revisions"  # beside the checkpoint folders: other revisions, kept for rollback
UNIT_DIR = "/etc/systemd/system"
FIREWALL_RULES = (
    "/etc/laguna-kit/firewall.nft"  # the kit's nftables table (files/ units load it too)
)


def releases_dir(kit_dir: str) -> str:
    return f"{kit_dir}/releases"


def gate_result(kit_dir: str) -> str:
    """The last gate's JSON result (written by the gate, read by status and the deploy)."""
    return f"{kit_dir}/state/last-gate.json"
