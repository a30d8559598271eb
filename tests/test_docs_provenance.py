"""Every committed run under docs/ carries its provenance and a schema version this code reads
(issue 33): the record the run wrote, or one reconstructed after it (`provenance.json`, marked
`recorded: false`, with the page that shows the run saying so). No model runs here."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from attn_sink_circuits.runs.audit import RECONSTRUCTED_FILE, provenance_gaps, run_folders
from attn_sink_circuits.runs.provenance import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
HAS_GIT = shutil.which("git") is not None and (ROOT / ".git").exists()


def _docs_files() -> list[Path] | None:
    """The tracked files under docs/ that are in the working tree (None outside a checkout:
    then every file under docs/ counts)."""
    if not HAS_GIT:
        return None
    done = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--", "docs"], capture_output=True, text=True
    )
    if done.returncode != 0:
        return None
    return [ROOT / f for f in done.stdout.split("\0") if f and (ROOT / f).is_file()]


def _run_folders() -> list[Path]:
    return run_folders(DOCS, _docs_files())


def test_docs_holds_runs():
    folders = _run_folders()
    assert len(folders) >= 10, folders
    assert DOCS / "p0" / "smollm2-135m" in folders


def test_every_run_under_docs_carries_its_provenance():
    missing = {
        str(folder.relative_to(ROOT)): gaps
        for folder in _run_folders()
        if (gaps := provenance_gaps(folder))
    }
    lines = [f"  {folder}: {'; '.join(gaps)}" for folder, gaps in missing.items()]
    assert not missing, (
        f"{len(missing)} run folder(s) under docs/ lack provenance (rerun them with this code, "
        f"or add a {RECONSTRUCTED_FILE} marked recorded: false):\n" + "\n".join(lines)
    )


@pytest.mark.skipif(not HAS_GIT, reason="not run from a git checkout")
def test_reconstructed_records_name_real_commits():
    for folder in _run_folders():
        path = folder / RECONSTRUCTED_FILE
        if not path.is_file():
            continue
        commit = json.loads(path.read_text(encoding="utf-8"))["provenance"]["committed_in"]
        done = subprocess.run(
            ["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True
        )
        assert done.returncode == 0, f"{path.relative_to(ROOT)}: no commit {commit} in this repo"


def _write(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), encoding="utf-8")


RECORD = {
    "code": {"commit": "a" * 40},
    "command": ["circuits", "p0", "--model", "smollm2-135m"],
    "time": {"started": "2026-12-04T00:00:00Z"},
    "settings": {"n_texts": 4},
    "model": {"key": "smollm2-135m", "weights_sha256": "b" * 64},
    "texts": {"sha256": "c" * 64, "n": 4},
}


def test_run_folders_are_the_folders_a_run_wrote(tmp_path):
    for name in ("a/summary.json", "b/.circuits-run.json", "b/part/summary.json", "c/x.csv"):
        _write(tmp_path / name, {})
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "circuit.graphml.gz").write_bytes(b"")
    assert run_folders(tmp_path) == [tmp_path / "a", tmp_path / "b", tmp_path / "d"]
    assert run_folders(tmp_path, [tmp_path / "a" / "summary.json"]) == [tmp_path / "a"]


def test_the_gaps_name_what_is_missing(tmp_path):
    run = tmp_path / "run"
    _write(run / "summary.json", {"schema_version": SCHEMA_VERSION, "provenance": RECORD,
                                  "summary": {}})  # fmt: skip
    assert provenance_gaps(run) == []
    partial = {k: v for k, v in RECORD.items() if k not in ("model", "settings")}
    _write(run / "summary.json", {"provenance": partial, "summary": {"model": "smollm2-135m"}})
    gaps = provenance_gaps(run)
    assert "no settings" in gaps
    assert any("names model 'smollm2-135m'" in g for g in gaps)
    # A model named only by the command's --model counts too (a script's own summary).
    _write(run / "summary.json", {"provenance": partial | {"settings": {}}, "rows": []})
    assert provenance_gaps(run) == [
        "the run names model 'smollm2-135m' but records no model identity"
    ]
    _write(run / "summary.json", {"schema_version": SCHEMA_VERSION + 1, "summary": {}})
    gaps = provenance_gaps(run)
    assert any("upgrade circuits" in g for g in gaps) and any("no provenance" in g for g in gaps)
    # A re-judged run answers for its model with the run it judged.
    judged = {**RECORD, "rejudged": {"folder": "x", "original": None}}
    _write(run / "summary.json", {"provenance": judged, "summary": {}})
    assert provenance_gaps(run) == ["it re-judges a saved run whose provenance was not recorded"]


def test_a_reconstructed_record_says_so(tmp_path):
    run = tmp_path / "docs" / "run"
    _write(run / "summary.json", {"summary": {"model": "smollm2-135m"}})
    record = {
        "recorded": False, "reconstructed": "from git log", "committed_in": "d" * 40,
        "shown_in": "../README.md", **{k: "unknown" for k in RECORD},
    }  # fmt: skip
    _write(run / RECONSTRUCTED_FILE, {"schema_version": SCHEMA_VERSION, "provenance": record})
    assert any("shown_in names no page" in g for g in provenance_gaps(run))
    (tmp_path / "docs" / "README.md").write_text("The numbers of `run/`.\n")
    assert any("does not say" in g for g in provenance_gaps(run))
    (tmp_path / "docs" / "README.md").write_text("`run/` is a pre-provenance run.\n")
    assert provenance_gaps(run) == []
    _write(run / RECONSTRUCTED_FILE, {"provenance": {**record, "recorded": True}})
    assert any("recorded: false" in g for g in provenance_gaps(run))
    del record["texts"]
    _write(run / RECONSTRUCTED_FILE, {"provenance": record})
    assert any("no 'texts'" in g for g in provenance_gaps(run))
