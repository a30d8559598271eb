"""Which files of an output folder a run owns: the marker of a run folder lists the files the
run wrote and names the program that wrote them (`circuits p0`, a script's name), so a later run
into the same folder replaces only those and refuses a folder holding anything else: a user's
file, or the run of another command. A marker written before the list existed owns the folder
only when every file in it is one the library writes (`library_file`).

The command line says which command is writing and whether `--force` was given (`writing_as`);
a library call or a script writes as the program it runs in (`sys.argv[0]`)."""

from __future__ import annotations

import contextlib
import contextvars
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from attn_sink_circuits.runs.provenance import MARKER_NAME

LIBRARY_SUFFIXES = (
    ".csv", ".json", ".png", ".svg", ".graphml", ".gexf", ".dot", ".mmd", ".html", ".jsonl",
    ".pt", ".safetensors",
)  # fmt: skip
"""What the library's writers write (each also gzip'd, NAME.gz): tables, records, figures,
graphs, reports, training checkpoints and model weights."""
LIBRARY_TEXTS = {"summary.md", "summary.txt", "circuit.md", "claims.md", "table.md", "runs.md"}
"""Text files the library writes by these names only (a user's notes.md is not one of them)."""

_WRITER: contextvars.ContextVar[str | None] = contextvars.ContextVar("writer", default=None)
_FORCE: contextvars.ContextVar[bool] = contextvars.ContextVar("force", default=False)


@contextlib.contextmanager
def writing_as(writer: str, force: bool = False) -> Iterator[None]:
    """Within: output folders are written by `writer` (e.g. "circuits kv"), and with `force` a
    folder holding other files has only its run's listed files replaced (`forced`)."""
    tokens = _WRITER.set(writer), _FORCE.set(force)
    try:
        yield
    finally:
        _WRITER.reset(tokens[0])
        _FORCE.reset(tokens[1])


def forced() -> bool:
    """True inside `writing_as(..., force=True)` (`--force`)."""
    return _FORCE.get()


def program(argv: list[str] | None) -> str | None:
    """The program a command line ran: "circuits COMMAND" for the command line (its entry point
    or `python -m attn_sink_circuits.cli`), else the script's file name; None when it cannot be told
    (`python -c`, an empty argv)."""
    if not argv or argv[0] in ("", "-c", "-m"):
        return None
    first = Path(argv[0])
    module = first.name == "__main__.py" and first.parent.parts[-2:] == ("circuits", "cli")
    if first.name == "circuits" or module:
        return f"circuits {argv[1]}" if len(argv) > 1 and not argv[1].startswith("-") else None
    return first.name


def writer() -> str | None:
    """Who is writing now: the command `writing_as` names, else this process's program."""
    return _WRITER.get() or program(sys.argv)


def marker_writer(record: dict) -> str | None:
    """Who wrote a run folder: its marker's `writer`, else the program of its recorded command."""
    command = record.get("provenance", {}).get("command")
    return record.get("writer") or program(command if isinstance(command, list) else None)


def files_in(folder: Path) -> list[str]:
    """Every file below `folder` (links included, not followed), as sorted relative POSIX paths,
    the marker left out."""
    found = []
    for path in folder.rglob("*"):
        if path.is_symlink() or not path.is_dir():
            found.append(path.relative_to(folder).as_posix())
    return sorted(name for name in found if name != MARKER_NAME)


def library_file(name: str) -> bool:
    """Whether a file of an old run folder (relative path) is one the library writes."""
    base = PurePosixPath(name).name.removesuffix(".gz")
    return base in LIBRARY_TEXTS or base.endswith(LIBRARY_SUFFIXES)


def owned(folder: Path, record: dict) -> tuple[list[str], list[str]]:
    """(the files of `folder` its run wrote, the others), by its marker's `record`: the files it
    lists, or for an old marker without a list the `library_file`s (the folder is its run's
    only when there are no others)."""
    present = files_in(folder)
    listed = record.get("files")
    ours = [n for n in present if (library_file(n) if listed is None else n in set(listed))]
    return ours, [n for n in present if n not in set(ours)]


def kept_files(folder: Path, record: dict) -> list[str]:
    """The files of the run folder `folder` (marker `record`) that a new run keeps: none, or
    under --force (`attn_sink_circuits.runs.owned.forced`) every file its run did not write. Without --force,
    a ValueError naming the first file its run did not write (a user's), or the program whose
    run it is when that is another one: replacing the folder would delete them."""
    ours, others = owned(folder, record)
    if forced():
        return others
    if others:
        more = f" (and {len(others) - 1} other files)" if len(others) > 1 else ""
        raise ValueError(
            f"--out {folder} holds {others[0]}{more}, which its run did not write, and a new run "
            "would replace the folder; move it out of the folder or write to another one (--force "
            "replaces only the run's own files and keeps the others)"
        )
    theirs, mine = marker_writer(record), writer()
    if theirs is not None and mine is not None and theirs != mine:
        raise ValueError(
            f"--out {folder} holds a run of `{theirs}`, not of `{mine}`, and a new run would "
            "replace it; write to another folder (--force replaces that run's files)"
        )
    return []


def add_to_run(folder: str | Path, *paths: str | Path) -> None:
    """Append files written into a finished run folder afterwards (e.g. a script's re-judging
    of its circuit) to its marker's list, so the folder's next run replaces them and they do
    not read as a user's; nothing when `folder` has no marker."""
    from attn_sink_circuits.runs.io import read_marker, write_json  # _io imports this module

    folder = Path(folder)
    record = read_marker(folder)
    if record is None:
        return
    names = {Path(p).resolve().relative_to(folder.resolve()).as_posix() for p in paths}
    listed = record.get("files")
    if listed is None:  # an old marker: its own files are the library's (`owned`)
        listed = owned(folder, record)[0]
    record["files"] = sorted(set(listed) | names)
    write_json(folder / MARKER_NAME, record)


def replace_listed(tmp: Path, folder: Path, record: dict, keep: list[str]) -> None:
    """Move the new run's files from `tmp` into `folder` in place of its earlier run's (those
    its marker `record` lists), keeping the files in `keep`; a ValueError before anything
    changes when the new run writes one of them. The marker goes first and comes back last:
    an interruption leaves a folder no run replaces without a look (and `keep` intact)."""
    new = files_in(tmp)
    clash = sorted(set(keep) & set(new))
    if clash:
        raise ValueError(
            f"--out {folder}: {clash[0]} is not the earlier run's and this run writes a file of "
            "that name; move it out of the folder first"
        )
    (folder / MARKER_NAME).unlink()
    for name in owned(folder, record)[0]:
        (folder / name).unlink(missing_ok=True)
    for name in [*new, MARKER_NAME]:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp / name, folder / name)
    shutil.rmtree(tmp, ignore_errors=True)


__all__ = [
    "LIBRARY_SUFFIXES",
    "LIBRARY_TEXTS",
    "add_to_run",
    "files_in",
    "forced",
    "kept_files",
    "library_file",
    "marker_writer",
    "owned",
    "program",
    "replace_listed",
    "writer",
    "writing_as",
]
