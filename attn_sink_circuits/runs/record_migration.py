"""Rewriting saved records so that they name no machine path (`attn_sink_circuits.runs.record_paths`).

Records written before paths were made portable name the folders of the machine a run happened
on. `migrate_file` rewrites one record in place: each JSON string (keys too) that is an absolute
path is replaced by its `portable` form and nothing else in the file changes, byte for byte
(key order, indentation, escapes, the final newline), which is checked by reading the result
back. A notebook has only its cells' text outputs rewritten (its code, images and scripts are left
as they are); a markdown
report (a `.md` file beside a run's record, not a study's README) is rewritten as text; a
`.gz` file is rewritten inside. `record_files` says which files are records.

What a resume compares verbatim is never touched (`compared_on_resume`): a training run's
`run.json` and everything in its folder (`attn_sink_circuits.training.train`), a checkpoint folder's key
(`CHECKPOINT_KEY`) and a file of generated traces (`attn_sink_circuits.generation` compares each
trace's settings before it resumes).
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from attn_sink_circuits.runs.audit import RUN_FILES
from attn_sink_circuits.runs.io import atomic_write, plain_name
from attn_sink_circuits.runs.record_paths import Roots, portable, portable_text

CHECKPOINT_KEY = "key.json"
"""A checkpoint folder's key (`attn_sink_circuits.runs.steps.KEY_FILE`, named here so that this module needs
no torch), compared on resume."""
TRAINING_RUN = "run.json"
"""A training run's own document (`attn_sink_circuits.training.train.run_doc`), compared on resume."""
JSON_SUFFIXES = (".json", ".jsonl", ".ipynb")
"""Record files rewritten as JSON (each also when gzip'd, with .gz after it)."""
PAGE_NAMES = ("README.md",)
"""Markdown files that are pages (prose), not reports a run wrote: left to their authors."""
TEXT_OUTPUTS = ("text", "evalue", "traceback")
"""A notebook output's text fields (besides `data["text/plain"]`), the only ones rewritten."""
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def compared_on_resume(path: str | Path) -> str | None:
    """Why the file at `path` must stay as it is (a resume compares it verbatim), else None."""
    path = Path(path)
    if path.name == CHECKPOINT_KEY:
        return "a checkpoint folder's key (attn_sink_circuits.runs.steps compares it on resume)"
    for folder in [path.parent, *path.parent.parents]:
        if (folder / TRAINING_RUN).is_file() and (
            (folder / "state.pt").is_file() or (folder / "checkpoints").is_dir()
        ):
            return "a training run's folder (attn_sink_circuits.training.train compares run.json)"
    if path.name == TRAINING_RUN:
        return "a training run's document (attn_sink_circuits.training.train compares it on resume)"
    if plain_name(path).suffix == ".jsonl" and _first_row(path).get("generation") is not None:
        return "generated traces (attn_sink_circuits.generation compares their settings on resume)"
    return None


def _first_row(path: Path) -> dict:
    for line in _read(path).splitlines():
        if line.strip():
            row = json.loads(line)
            return row if isinstance(row, dict) else {}
    return {}


def _read(path: Path) -> str:
    raw = path.read_bytes()
    return (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")


def record_files(files: Iterable[str | Path]) -> list[Path]:
    """Which of `files` are records: JSON, JSONL and notebooks (each also gzip'd), and markdown
    reports in a folder a run wrote (it holds one of `attn_sink_circuits.runs.audit.RUN_FILES`), not pages."""
    files = [Path(f) for f in files]
    run_folders = {f.parent for f in files if f.name in RUN_FILES}
    return [
        f for f in files
        if plain_name(f).suffix in JSON_SUFFIXES
        or (f.suffix == ".md" and f.name not in PAGE_NAMES and f.parent in run_folders)
    ]  # fmt: skip


def _changes(value, roots: Roots, found: dict[str, str], embedded: bool) -> None:
    """Collect into `found` each string of `value` (keys too) that `portable` rewrites."""
    if isinstance(value, str):
        new = portable(value, roots, embedded=embedded)
        if new != value:
            found[value] = new
    elif isinstance(value, list):
        for v in value:
            _changes(v, roots, found, embedded)
    elif isinstance(value, dict):
        for k, v in value.items():
            _changes(k, roots, found, embedded)
            _changes(v, roots, found, embedded)


def _text_outputs(output: dict) -> dict:
    """The text an output of a notebook shows (stream text, plain text, an error), by key; its
    images, HTML and scripts are data and are never rewritten."""
    found = {k: output[k] for k in TEXT_OUTPUTS if k in output}
    if "text/plain" in output.get("data", {}):
        found["text/plain"] = output["data"]["text/plain"]
    return found


def _outputs_portable(notebook: dict, roots: Roots) -> dict:
    def one(output: dict) -> dict:
        new = {k: portable(v, roots) for k, v in _text_outputs(output).items()}
        plain = {"text/plain": new.pop("text/plain")} if "text/plain" in new else {}
        return {**output, **new} | ({"data": {**output["data"], **plain}} if plain else {})

    cells = [
        {**c, "outputs": [one(o) for o in c["outputs"]]} if "outputs" in c else c
        for c in notebook.get("cells", [])
    ]
    return {**notebook, "cells": cells}


def _parse(text: str, jsonl: bool):
    if not jsonl:
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def migrate_json_text(text: str, roots: Roots = None, kind: str = ".json") -> tuple[str, int]:
    """`text` (a JSON document, a JSONL file or, `kind` ".ipynb", a notebook whose text outputs
    only are rewritten) with its paths made portable, and how many strings changed; a ValueError
    when the text could not be rewritten without changing something else. In a document the
    strings that are a path as a whole are rewritten (`is_path`: its texts and tokens are data,
    and a text may quote a path), in a notebook's outputs every path in their text."""
    doc = _parse(text, kind == ".jsonl")
    notebook = kind == ".ipynb"
    found: dict[str, str] = {}
    cells = doc["cells"] if notebook else []
    outputs = [_text_outputs(o) for c in cells for o in c.get("outputs", [])]
    _changes(outputs if notebook else doc, roots, found, embedded=notebook)
    if not found:
        return text, 0
    expected = _outputs_portable(doc, roots) if notebook else portable(doc, roots, embedded=False)
    count = 0

    def one(match: re.Match) -> str:
        nonlocal count
        value = json.loads(match[0])
        if value not in found:
            return match[0]
        count += 1
        return json.dumps(found[value], ensure_ascii=match[0].isascii())

    new = _STRING.sub(one, text)
    if _parse(new, kind == ".jsonl") != expected:
        raise ValueError("rewriting its paths would change more than the paths; left as it is")
    return new, count


def migrate_markdown_text(text: str, roots: Roots = None) -> tuple[str, int]:
    """`text` (a markdown report) with its paths made portable, and how many lines changed."""
    lines = text.split("\n")
    new = [portable_text(line, roots) for line in lines]
    return "\n".join(new), sum(a != b for a, b in zip(lines, new, strict=True))


def migrate_file(path: str | Path, roots: Roots = None, *, write: bool = True) -> int:
    """Rewrite the record at `path` (see the module docstring) in place, atomically, when it
    holds paths to rewrite and a resume does not compare it; how many strings (lines of a
    markdown report) it changed, or would change with `write` False. A file that is not valid
    JSON (or UTF-8) is refused with a ValueError naming it."""
    path = Path(path)
    if compared_on_resume(path):
        return 0
    text, kind = _read(path), plain_name(path).suffix
    try:
        if kind == ".md":
            new, count = migrate_markdown_text(text, roots)
        else:
            new, count = migrate_json_text(text, roots, kind)
    except ValueError as err:  # json's errors are ValueErrors too
        raise ValueError(f"{path}: {err}") from None
    if count and write:
        data = new.encode("utf-8")
        with atomic_write(path, "wb") as fh:
            fh.write(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)
    return count


def migrate_records(
    files: Sequence[str | Path], roots: Roots = None, *, write: bool = True
) -> dict[Path, int]:
    """`migrate_file` on each record among `files` (`record_files`): the files with paths to
    rewrite and how many strings each changed (would change, with `write` False)."""
    counts = {f: migrate_file(f, roots, write=write) for f in record_files(files)}
    return {f: n for f, n in counts.items() if n}


__all__ = [
    "CHECKPOINT_KEY",
    "JSON_SUFFIXES",
    "PAGE_NAMES",
    "TEXT_OUTPUTS",
    "TRAINING_RUN",
    "compared_on_resume",
    "migrate_file",
    "migrate_json_text",
    "migrate_markdown_text",
    "migrate_records",
    "record_files",
]
