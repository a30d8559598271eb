"""Auditing saved results: which folders under a tree are run folders, and what each one's
provenance record lacks (`provenance_gaps`). The record itself is built by
`attn_sink_circuits.runs.provenance`; this module only reads what a run left behind, so a docs test, a
reconstruction script or a reviewer can ask "can every number here be traced?" in one call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from attn_sink_circuits.runs.provenance import (
    MARKER_NAME,
    SUMMARY_NAME,
    UNKNOWN,
    check_schema_version,
)

RUN_FILES = (SUMMARY_NAME, MARKER_NAME, "circuit.json", "circuit.json.gz", "circuit.graphml",
             "circuit.graphml.gz")  # fmt: skip
"""Files only a run writes: a folder holding one is a run folder (see `run_folders`)."""
RECONSTRUCTED_FILE = "provenance.json"
"""A provenance record written after the run, for a run that recorded none (or only part):
`{"schema_version", "provenance": {"recorded": false, "reconstructed": how, "committed_in":
the commit that holds the run's files, "shown_in": the page (relative to the folder) that says
so beside its numbers, and RECONSTRUCTED_FIELDS}}`; what could not be recovered is "unknown"."""
RECONSTRUCTED_FIELDS = ("code", "command", "time", "settings", "model", "texts")
PAGE_NOTES = ("pre-provenance run", "provenance partly reconstructed")  # one on its shown_in


def run_folders(root: str | Path, files: Sequence[str | Path] | None = None) -> list[Path]:
    """The run folders under `root`: folders holding a file only a run writes (`RUN_FILES`:
    summary.json, the marker, a circuit), except those inside a folder with a marker (one run
    wrote that whole folder and its marker speaks for it). `files`: the paths to look at (e.g.
    git's tracked files, spelled like `root`); default every file under `root`."""
    root = Path(root)
    paths = [Path(f) for f in files] if files is not None else list(root.rglob("*"))
    inside = [p for p in paths if root in p.parents]
    marked = {p.parent for p in inside if p.name == MARKER_NAME}
    held = {p.parent for p in inside if p.name in RUN_FILES}
    return sorted(f for f in held if not any(m in f.parents for m in marked))


def _documents(folder: Path) -> tuple[dict, list[str]]:
    docs, gaps = {}, []
    for name in (SUMMARY_NAME, MARKER_NAME, RECONSTRUCTED_FILE):
        path = folder / name
        if not path.is_file():
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            check_schema_version(doc, name)
        except ValueError as err:
            gaps.append(f"{name}: {err}")
            continue
        docs[name] = doc
    return docs, gaps


def _named_model(docs: dict, record: dict) -> str | None:
    summary, marker = docs.get(SUMMARY_NAME, {}), docs.get(MARKER_NAME, {})
    command = [str(arg) for arg in record.get("command") or ()]
    flag = command[command.index("--model") + 1] if "--model" in command[:-1] else None
    for named in (
        summary.get("model"), (summary.get("summary") or {}).get("model"),
        (summary.get("settings") or {}).get("model"),
        (marker.get("run") or {}).get("model"), (record.get("settings") or {}).get("model"), flag,
    ):  # fmt: skip
        if isinstance(named, str) and _loadable(named):
            return named
    return None


def _loadable(name: str) -> bool:
    # A model a run loads (a registry key, a folder), not one it trained (claims' trigger-task).
    from attn_sink_circuits.models.registry import MODELS

    return name in MODELS or "/" in name


def _model_gaps(ran: dict, named: str | None) -> list[str]:
    models = ran.get("models") or ([ran["model"]] if "model" in ran else [])
    gaps = [
        f"model {m.get('key', '?')!r} has no {key}"
        for m in models
        for key in ("key", "weights_sha256")
        if not isinstance(m, dict) or m.get(key) in (None, UNKNOWN)
    ]
    if named and not models:
        gaps.append(f"the run names model {named!r} but records no model identity")
    texts = ran.get("texts")
    if models and not (isinstance(texts, dict) and texts.get("sha256") and "n" in texts):
        gaps.append("a model ran but the texts it ran on (sha256, n) are not recorded")
    return gaps


def _recorded_gaps(record: dict, docs: dict) -> list[str]:
    gaps = []
    if (record.get("code") or {}).get("commit") in (None, UNKNOWN):
        gaps.append("the code's commit is unknown")
    if not record.get("command"):
        gaps.append("no command")
    if not (record.get("time") or {}).get("started"):
        gaps.append("no start time")
    if not isinstance(record.get("settings"), dict):
        gaps.append("no settings")
    ran = record
    while isinstance(ran.get("rejudged"), dict):  # judged again from a saved run: its record
        ran = ran["rejudged"].get("original")
        if not isinstance(ran, dict):
            return [*gaps, "it re-judges a saved run whose provenance was not recorded"]
    return gaps + _model_gaps(ran, _named_model(docs, record))


def _reconstructed_gaps(record, folder: Path) -> list[str]:
    if not isinstance(record, dict) or record.get("recorded") is not False:
        return [f"{RECONSTRUCTED_FILE} must hold a provenance record marked recorded: false"]
    gaps = [
        f"{RECONSTRUCTED_FILE} has no {key!r}" for key in RECONSTRUCTED_FIELDS if key not in record
    ]
    if not record.get("reconstructed"):
        gaps.append(f"{RECONSTRUCTED_FILE} does not say how it was reconstructed")
    if not re.fullmatch(r"[0-9a-f]{40}", str(record.get("committed_in", ""))):
        gaps.append(f"{RECONSTRUCTED_FILE} has no committed_in commit (40 hex digits)")
    page = folder / str(record.get("shown_in", ""))
    if not record.get("shown_in") or not page.is_file():
        gaps.append(f"{RECONSTRUCTED_FILE}: shown_in names no page ({record.get('shown_in')!r})")
    elif not any(note in page.read_text(encoding="utf-8").lower() for note in PAGE_NOTES):
        gaps.append(f"{record['shown_in']} does not say {PAGE_NOTES[0]!r} or {PAGE_NOTES[1]!r}")
    return gaps


def provenance_gaps(folder: str | Path) -> list[str]:
    """What run folder `folder` lacks (empty: nothing). Each of summary.json, the marker and
    `RECONSTRUCTED_FILE` it holds must have a schema version `check_schema_version` reads. A
    reconstructed record, when there is one, must be complete as `RECONSTRUCTED_FILE` says;
    else the record in summary.json (or the marker) must give the code's commit, the command,
    the start time and the settings, and where a model ran (the run names one, or the record
    has one) the model's key and weights sha256 and the texts' sha256 and count. A record of
    a re-judged run (`rejudged`) answers for the model and texts with the run it judged."""
    folder = Path(folder)
    docs, gaps = _documents(folder)
    if RECONSTRUCTED_FILE in docs:
        return gaps + _reconstructed_gaps(docs[RECONSTRUCTED_FILE].get("provenance"), folder)
    for name in (SUMMARY_NAME, MARKER_NAME):
        if isinstance(record := docs.get(name, {}).get("provenance"), dict):
            return gaps + _recorded_gaps(record, docs)
    return [
        *gaps,
        f"no provenance record (none in {SUMMARY_NAME} or {MARKER_NAME}, no {RECONSTRUCTED_FILE})",
    ]


__all__ = [
    "PAGE_NOTES",
    "RECONSTRUCTED_FIELDS",
    "RECONSTRUCTED_FILE",
    "RUN_FILES",
    "provenance_gaps",
    "run_folders",
]
