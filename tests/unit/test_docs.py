"""The docs' facts exist: every knob, file, task, box tool, `--limit` group and `--data` key that
README, DEPLOYMENT (the tutorial), docs/ (how-to, reference, explanation), OPERATIONS,
TROUBLESHOOTING and the CHANGELOG name is one the kit has (a newcomer follows them
word for word), and they give the checkpoints one size."""

import re
import tomllib

import pytest

from laguna_kit import KIT_ROOT
from laguna_kit.domain.box_commands import BOX_TOOLS
from laguna_kit.knobs.check import SSH_FIELDS
from laguna_kit.knobs.declared import PER_RUN, defaults
from laguna_kit.knobs.hostsfile import CONNECTION_FIELDS
from laguna_kit.knobs.shapes import PROFILE_FIELDS

DOCS = [
    "README.md",
    "DEPLOYMENT.md",
    "docs/howto.md",
    "docs/reference.md",
    "docs/explanation.md",
    "OPERATIONS.md",
    "TROUBLESHOOTING.md",
    "CONTRIBUTING.md",
    "CHANGELOG.md",
]
KNOBS = set(defaults()) | set(PER_RUN)
# snake_case words in backticks that are not knobs, each what it is.
NOT_KNOBS = {
    "gpu_boxes": "inventory.py's group of the GPU boxes (for --limit)",
    "hub_bytes": "a field of the fetch log (state/fetch-log.jsonl)",
    "peer_bytes": "a field of the fetch log (state/fetch-log.jsonl)",
    "left_peers": "a field of the fetch log (state/fetch-log.jsonl)",
    "refused_from_peers": "a field of the fetch log (state/fetch-log.jsonl)",
    "huggingface_hub": "the Python library",
    "files_metadata": "huggingface_hub's model_info argument",
    "http_get": "huggingface_hub's downloader function",
    "laguna_kit": "the kit's package",
    "minor_number": "an nvidia-smi --query-gpu field",
    "int4_per_token_head": "a vLLM --kv-cache-dtype value",
    "turboquant_k8v4": "a vLLM --kv-cache-dtype value",
    "invalid_api_key": "the router's error code",
    "shm_broadcast": "vLLM's shared-memory broadcast",
    "num_requests_running": "a vLLM metric (vllm:...)",
    "num_requests_waiting": "a vLLM metric (vllm:...)",
    "reasoning_content": "the OpenAI-style response field vLLM's reasoning parser fills",
    "max_tokens": "the OpenAI API request field",
    "base_url": "the OpenAI SDK's argument",
    "api_key": "the OpenAI SDK's argument",
    "extra_headers": "the OpenAI SDK's argument",
    "finish_reason": "the OpenAI API response field",
    "chat_template_kwargs": "vLLM's request field",
    "enable_thinking": "the chat template's switch",
    "fleet_monitor": "the kit firewall's sets of the monitor's addresses (fleet_monitor_v4/v6)",
    "recipe_decode_tok_s": "a column of the profile table in group_data/all.py (not overridable)",
}
GROUPS = {"gpu_boxes", "routers", "monitors", "caches"}  # inventory.py


def doc_text():
    return {name: (KIT_ROOT / name).read_text() for name in DOCS}


def ticked(text):
    return re.findall(r"`([^`\n]+)`", text)


def words_in_ticks():
    out = []
    for name, text in doc_text().items():
        for chunk in ticked(text):
            for w in re.findall(r"(?<![\w./:-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w.(/-])", chunk):
                out.append((name, w, chunk))
    return out


def known_word(word: str) -> bool:
    tasks = {p.stem for p in (KIT_ROOT / "tasks").glob("*.py")}
    fields = set(CONNECTION_FIELDS) | set(SSH_FIELDS) | set(PROFILE_FIELDS)
    return word in KNOBS | fields | tasks | set(NOT_KNOBS) or word.startswith("test_")


def test_every_snake_case_name_in_backticks_is_a_knob_or_a_named_thing():
    unknown = sorted({(doc, w) for doc, w, _ in words_in_ticks() if not known_word(w)})
    assert unknown == [], f"no such knob (or add it to NOT_KNOBS with what it is): {unknown}"


def test_test_names_the_docs_cite_exist():
    tests = "\n".join(p.read_text() for p in (KIT_ROOT / "tests").rglob("test_*.py"))
    cited = {w for _, w, _ in words_in_ticks() if w.startswith("test_")}
    assert [w for w in sorted(cited) if f"def {w}(" not in tests] == []


def test_every_path_the_docs_name_exists():
    missing = []
    for name, text in doc_text().items():
        for path in re.findall(
            r"(?<![\w/.-])((?:tasks|scripts|files|laguna_kit|group_data|tests)/[A-Za-z0-9_./-]*)",
            text,
        ):
            path = path.rstrip(".")
            if path and not (KIT_ROOT / path).exists():
                missing.append((name, path))
        for top in re.findall(r"`((?:deploy|inventory)\.py|hosts\.example\.toml)`", text):
            if not (KIT_ROOT / top).exists():
                missing.append((name, top))
    assert missing == []


def test_box_tools_the_docs_name_are_installed_by_the_kit():
    named = {w for t in doc_text().values() for w in re.findall(r"\blaguna_[a-z]+\.py\b", t)}
    assert named and named <= set(BOX_TOOLS), named - set(BOX_TOOLS)


def example_hosts():
    text = (KIT_ROOT / "hosts.example.toml").read_text()
    names = set(re.findall(r'name = "([^"]+)"', text))
    tomllib.loads(text)  # the example itself loads
    return names


def test_limit_names_a_group_or_an_example_host():
    allowed = GROUPS | example_hosts()
    bad = []
    for name, text in doc_text().items():
        for target in re.findall(r"--limit[ =]([^\s`|)]+)", text):
            if target.isupper() or target.startswith("<"):
                continue  # a placeholder: BOX, <name>
            if any(t not in allowed for t in target.split(",")):
                bad.append((name, target))
    assert bad == [], f"--limit takes a group ({sorted(GROUPS)}) or a host's name: {bad}"


def test_data_keys_on_command_lines_are_knobs():
    bad = []
    for name, text in doc_text().items():
        for key in re.findall(r"--data[ =]([a-z_][a-z0-9_]*)=", text):
            if key not in KNOBS and key != "key":  # `--data key=value`: the form itself
                bad.append((name, key))
    assert bad == []


# tests/data/champion-facts.md: "target checkpoint about 72-77 GB, DFlash drafter about 2.1 GB;
# ~85 GB free storage plus image". The docs call the checkpoints about 80 GB, and 85 GB the free
# space the recipe asks for.
CHECKPOINTS_GB = 80


@pytest.mark.parametrize("doc", [*DOCS, "BENCHMARKS.md", "group_data/all.py"])
def test_the_checkpoints_have_one_size(doc):
    bad = []
    for line in (KIT_ROOT / doc).read_text().splitlines():
        if "checkpoint" not in line.lower():
            continue
        for m in re.finditer(r"(?:~|about |of )(\d+) GB(?! free)", line):
            if int(m.group(1)) != CHECKPOINTS_GB:
                bad.append(line.strip())
    assert bad == [], f"the checkpoints are about {CHECKPOINTS_GB} GB: {bad}"


def test_a_knob_is_written_as_toml_or_as_data_never_as_python():
    """Issue 40 #7: `nvidia_allow_reboot=True` in the docs and the kit's own messages is invalid
    TOML in a hosts file (and `--data` takes `true`): every knob set to a boolean is written
    `name = true` (TOML) or `--data name=true`."""
    import re

    from laguna_kit import KIT_ROOT
    from laguna_kit.knobs.declared import defaults

    knobs = "|".join(sorted(defaults(), key=len, reverse=True))
    python_bool = re.compile(rf"\b({knobs}|force_slower)=(True|False)\b")
    texts = [KIT_ROOT / n for n in (*DOCS, "hosts.example.toml")]
    texts += sorted((KIT_ROOT / "laguna_kit").rglob("*.py")) + sorted(
        (KIT_ROOT / "tasks").glob("*.py")
    )
    found = [
        f"{p.relative_to(KIT_ROOT)}:{n}: {m.group(0)}"
        for p in texts
        for n, line in enumerate(p.read_text().splitlines(), 1)
        for m in python_bool.finditer(line)
        if not re.search(
            rf"\w\({m.group(1)}=|, {m.group(1)}=|^\s+{m.group(1)}=", line
        )  # a call's argument
    ]
    assert found == [], found


def test_every_pyinfra_option_the_docs_use_is_one_pyinfra_has():
    """A command copied from the docs runs: each option on a `pyinfra …` line is in `pyinfra
    --help` of the kit's pinned pyinfra."""
    import subprocess
    import sys
    from pathlib import Path

    used = set()
    for name in (*DOCS, "hosts.example.toml"):
        for line in re.findall(r"pyinfra(?: [^`\n|]*)", (KIT_ROOT / name).read_text()):
            used |= {t.split("=")[0] for t in line.split() if t.startswith("-")}
    helped = subprocess.run(
        [str(Path(sys.executable).with_name("pyinfra")), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert {"--limit", "--data", "-y"} <= used
    assert (
        sorted(
            o for o in used if not re.search(rf"(^|[\s,]){re.escape(o)}([\s,=]|$)", helped, re.M)
        )
        == []
    )


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_between_the_docs_lands_on_a_file_and_a_heading():
    """The docs were split by kind (tutorial, how-to, reference, explanation): a link that names a
    file or a section moved away is a dead end for the reader."""
    from pathlib import Path

    dead = []
    for name in DOCS:
        doc = KIT_ROOT / name
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, frag = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.is_relative_to(KIT_ROOT) or not dest.exists():
                dead.append(f"{name}: {target} (no such file)")
                continue
            if frag and dest.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", Path(dest).read_text(), re.M)
                if frag not in {anchor(h) for h in headings}:
                    dead.append(f"{name}: {target} (no such heading)")
    assert dead == [], dead
