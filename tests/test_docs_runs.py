"""The docs runner's one list (docs/runs.toml) matches every committed record's command."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIST = ROOT / "docs" / "runs.toml"


def check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/docs_runs.py", "--list", str(path), "check"],
                          cwd=ROOT, capture_output=True, text=True)  # fmt: skip


def entries_text(entries: list[dict]) -> str:
    return "\n".join(f"[[run]]\npaths = {json.dumps(e['paths'])}\ncommand = "
                     f"{json.dumps(e['command'])}\n" for e in entries)  # fmt: skip


def test_the_list_matches_the_committed_records():
    done = check(LIST)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_record_left_out_or_a_command_changed_is_named(tmp_path):
    entries = tomllib.loads(LIST.read_text())["run"]
    p0 = next(e for e in entries if e["paths"] == ["docs/p0/smollm2-135m"])
    gone = tmp_path / "gone.toml"
    gone.write_text(entries_text([e for e in entries if e is not p0]))
    done = check(gone)
    assert done.returncode == 1
    assert "docs/p0/smollm2-135m: a committed record with no entry" in done.stdout
    changed = tmp_path / "changed.toml"
    p0["command"] = p0["command"].replace("--edge-seed 0", "--edge-seed 1")
    changed.write_text(entries_text(entries))
    done = check(changed)
    assert done.returncode == 1 and done.stdout.count("\n") == 1, done.stdout
    assert (
        "docs/p0/smollm2-135m: recorded `circuits p0 --model smollm2-135m --out {out}"
        in done.stdout
    )


def test_every_listed_command_names_a_program_there_is_today():
    # A script moved into the package is listed as `-m MODULE` (run as `python -m MODULE`);
    # a command naming a script that is gone would fail only when the entry is run again.
    import importlib.util
    import shlex

    for entry in tomllib.loads(LIST.read_text())["run"]:
        if not entry["command"]:
            continue
        words = shlex.split(entry["command"])
        if words[0] == "-m":
            assert importlib.util.find_spec(words[1]) is not None, entry
        else:
            assert words[0] == "circuits" or (ROOT / words[0]).is_file(), entry
    listed = subprocess.run([sys.executable, "scripts/docs_runs.py", "list"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "-m attn_sink_circuits.studies.protocols --threads 1 --force" in listed
