"""No committed record names a machine path: every JSON, JSONL and notebook the repository
tracks (gzip'd ones read inside) and every markdown report beside a run's record is searched
for the folders of a machine (home, scratch and work folders, a Windows user's). A run that
records one is written with `attn_sink_circuits.runs.record_paths`; old records are rewritten with
`scripts/portable_records.py`. No model runs here."""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MACHINE = re.compile(
    r"(?<![\w.~<>-])/(?:work|root|tmp|home|Users|mnt|scratch|private|var/folders)/"
    r"|(?<![\w])[A-Za-z]:(?:\\\\|\\)(?:Users|Documents and Settings)\b"
)
"""The start of a machine's folder, in a file's text (a JSON string's backslash is escaped)."""
RECORDS = (".json", ".jsonl", ".ipynb", ".json.gz", ".jsonl.gz")
RUN_RECORDS = ("summary.json", ".circuits-run.json", "provenance.json", "claims.json")


def _tracked() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not run from a git checkout")
    done = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return [ROOT / f for f in done.stdout.split("\0") if f and (ROOT / f).is_file()]


def _records(files: list[Path]) -> list[Path]:
    beside_runs = {f.parent for f in files if f.name in RUN_RECORDS}
    return [
        f for f in files
        if f.name.endswith(RECORDS)
        or (f.suffix == ".md" and f.name != "README.md" and f.parent in beside_runs)
    ]  # fmt: skip


def test_the_pattern_finds_machine_paths_and_nothing_else():
    for text in (
        '"/work/main/docs"',
        '"/tmp/x"',
        "'/home/u/m'",
        '"C:\\\\Users\\\\me"',
        "/var/folders/x",
    ):
        assert MACHINE.search(text), text
    for text in (
        '"docs/p0"',
        '"<outside>/tmp"',
        '"runs/x/tmp/y"',
        '"a:\\n"',
        "https://x.io/home/a",
    ):
        assert not MACHINE.search(text), text


def test_no_committed_record_names_a_machine_path():
    records = _records(_tracked())
    assert len(records) > 300 and any(r.suffix == ".md" for r in records)
    found = {}
    for path in records:
        raw = path.read_bytes()
        text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8", "replace")
        if hits := sorted({m[0] for m in MACHINE.finditer(text)}):
            found[str(path.relative_to(ROOT))] = hits
    assert not found, (
        f"{len(found)} committed record(s) name a machine path (rewrite them with "
        "scripts/portable_records.py):\n" + "\n".join(f"  {p}: {h}" for p, h in found.items())
    )
