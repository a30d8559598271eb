"""Where a saved result came from: the record every output folder and summary.json carries.

`provenance()` builds it: the code (package version, git commit and whether the tree had
uncommitted changes), the command line, the software (python, torch, transformers,
transformer_lens) and torch's threads, the times, the model (`attn_sink_circuits.models.identity`: key,
exact name, quantisation, weights sha256, device, dtype), the texts (source file if known,
sha256 of the texts and kinds used, count, fit / held-out indices) and the settings. Paths in
it name no machine: relative to the repository, or `<outside>/NAME` (`attn_sink_circuits.runs.record_paths`;
records written before read as they are). `SCHEMA_VERSION` numbers the layout of
saved results; `check_schema_version` lets a reader load the previous layout and refuse a newer
one in one line. Light: nothing here imports torch (a loaded one is asked for its threads).
Checking a saved folder's record for gaps is `attn_sink_circuits.runs.audit`.

The commit comes from `git` in the checkout that holds this package (with a timeout); outside a
checkout (e.g. a `git archive` snapshot) from the environment variable `CIRCUITS_COMMIT`, else
"unknown". It is read once per process, at its first use: the state of the code when the run
began, before the run writes anything beside it.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from attn_sink_circuits.core.texts import texts_sha256, texts_source
from attn_sink_circuits.runs.record_paths import portable, portable_path

SCHEMA_VERSION = 2
"""Layout of saved results (summary.json, .circuits-run.json, graph files). 1: the layout before
it was numbered (no `schema_version` key, no `provenance`); 2: `schema_version` and
`provenance` added."""
COMMIT_VARIABLE = "CIRCUITS_COMMIT"
"""Environment variable naming the code's commit where no git checkout holds the package."""
UNKNOWN = "unknown"
PACKAGE = Path(__file__).resolve().parent.parent
GIT_TIMEOUT = 5.0
"""Seconds each git call may take before the commit counts as unknown."""
SOFTWARE = {
    "torch": "torch",
    "transformers": "transformers",
    "transformer_lens": "transformer-lens",
    "numpy": "numpy",
}
"""Key in the record -> distribution whose version it gives."""

_IMPORTED = time.time()

SUMMARY_NAME = "summary.json"
MARKER_NAME = ".circuits-run.json"
"""`attn_sink_circuits.runs.io.MARKER`: the file naming the run that wrote an output folder."""


def check_schema_version(doc: dict, where: str | Path) -> int:
    """The schema version of a saved document `doc` read from `where`: 1 when it has none (the
    layout before versions), else its `schema_version`; a ValueError in one line when that is
    newer than this code reads (or not a number)."""
    found = doc.get("schema_version", 1)
    if not isinstance(found, int) or isinstance(found, bool) or found < 1:
        raise ValueError(f"{where}: schema_version {found!r} is not a positive whole number")
    if found > SCHEMA_VERSION:
        raise ValueError(
            f"{where} was written with schema version {found}, newer than this circuits reads "
            f"(up to {SCHEMA_VERSION}); upgrade circuits to read it"
        )
    return found


def schema_stamp() -> dict:
    """`{"schema_version": SCHEMA_VERSION}`: the key every saved document starts with."""
    return {"schema_version": SCHEMA_VERSION}


def _git(folder: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True, text=True, timeout=GIT_TIMEOUT, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(folder: str | Path) -> dict:
    """The commit of the git checkout that tracks `folder` and whether it has uncommitted
    changes (modified, staged or untracked files that git does not ignore): `commit`, `dirty`
    (None when unknown) and `commit_from` ("git", the environment variable, or "unknown").
    A folder no checkout tracks (a snapshot, an installed copy) reads `CIRCUITS_COMMIT`."""
    folder = Path(folder)
    tracked = _git(folder, "ls-files", "--error-unmatch", "--", ".")
    commit = _git(folder, "rev-parse", "HEAD") if tracked else None
    status = _git(folder, "status", "--porcelain") if commit else None
    if commit and status is not None:
        return {"commit": commit.strip(), "dirty": bool(status.strip()), "commit_from": "git"}
    given = os.environ.get(COMMIT_VARIABLE, "").strip()
    if given:
        return {"commit": given, "dirty": None, "commit_from": COMMIT_VARIABLE}
    return {"commit": UNKNOWN, "dirty": None, "commit_from": UNKNOWN}


@functools.cache
def code_identity() -> dict:
    """This package's name, version and `git_state`, read once per process (the first call)."""
    from attn_sink_circuits import __version__

    return {"package": "circuits", "version": __version__, **git_state(PACKAGE)}


def _version(distribution: str) -> str | None:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def environment() -> dict:
    """Python and the libraries' versions, and torch's intra-op threads (None when torch is not
    loaded: then nothing ran on it)."""
    torch = sys.modules.get("torch")
    return {
        "python": platform.python_version(),
        **{key: _version(dist) for key, dist in SOFTWARE.items()},
        "torch_threads": torch.get_num_threads() if torch is not None else None,
        "platform": platform.platform(terse=True),
    }


def process_started() -> float:
    """When this process started (seconds since the epoch): from /proc on Linux, else when this
    module was first imported."""
    try:
        stat = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        return boot + int(stat[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def times(started: float | None = None) -> dict:
    """`started` (default: `process_started`), now as `ended`, and the wall seconds between."""
    started = process_started() if started is None else started
    now = time.time()
    return {
        "started": _iso(started),
        "ended": _iso(now),
        "wall_seconds": round(now - started, 3),
        "started_epoch": round(started, 3),
    }


def texts_identity(
    texts: Sequence,
    kinds: Sequence[str] | None = None,
    split: tuple[Sequence[int], Sequence[int]] | None = None,
    source: str | Path | None = None,
) -> dict:
    """What texts a run used: the file they were read from (`source`, else the file
    `attn_sink_circuits.core.texts` last read them from, else None), the sha256 of the texts and
    kinds, their count and count per kind, and the fit / held-out indices among them."""
    if source is None and texts and all(isinstance(t, str) for t in texts):
        source = texts_source(texts)
    items = "texts" if all(isinstance(t, str) for t in texts) else "token-id rows"
    record = {
        "source": portable_path(source) if source is not None else None,
        "sha256": texts_sha256(texts, kinds),
        "sha256_of": f"JSON of [{items}, kinds]" if kinds is not None else f"JSON of {items}",
        "n": len(texts),
        "by_kind": dict(Counter(kinds)) if kinds is not None else None,
    }
    if split is not None:
        record["fit_indices"], record["heldout_indices"] = list(split[0]), list(split[1])
    return record


def provenance(
    model=None,
    texts: Sequence | None = None,
    kinds: Sequence[str] | None = None,
    split: tuple[Sequence[int], Sequence[int]] | None = None,
    settings: dict | None = None,
    *,
    source: str | Path | None = None,
    started: float | None = None,
) -> dict:
    """The provenance record (see the module docstring) of a run, its end time now; `model`,
    `texts` (with `kinds`, the fit / held-out `split` and the `source` file) and `settings`
    (e.g. `config.to_dict()`) are recorded when given. `started` defaults to the process's
    start. Call `finished` on it when the result is written to set the end time then."""
    record = {
        "code": code_identity(),
        "command": portable(list(sys.argv)),
        "environment": environment(),
        "time": times(started),
    }
    if model is not None:
        from attn_sink_circuits.models.identity import model_identity

        record["model"] = model_identity(model)
    if texts is not None:
        record["texts"] = texts_identity(texts, kinds, split, source)
    if settings is not None:
        record["settings"] = settings
    return record


def finished(record: dict | None) -> dict:
    """`record` (default: a `provenance()` with nothing given) with its end time set to now and
    torch's current threads, and every path in it written as `attn_sink_circuits.runs.record_paths.portable`
    does (the folders and files a script put in its settings too); the record passed in is
    left as it was."""
    if record is None:
        return provenance()
    started = record.get("time", {}).get("started_epoch")
    env = {**record.get("environment", {}), **environment()}
    return portable({**record, "environment": env, "time": times(started)})


def stamped(doc: dict, record: dict | None = None) -> dict:
    """`doc` as a saved document (e.g. a summary.json): `schema_version` and `provenance` (the
    `record`, ended now; see `finished`) first, then `doc`'s own keys, where a string that is
    a path as a whole (a model folder, an input file) is written as `portable` does; texts and
    tokens in `doc` are data and stay as they are."""
    return {**schema_stamp(), "provenance": finished(record), **portable(doc, embedded=False)}


def dirty_note(record: dict | None) -> str | None:
    """A one-line note when `record`'s code had uncommitted changes (or an unknown commit),
    else None; for reports, which refuse nothing for it."""
    code = (record or {}).get("code", {})
    commit = code.get("commit", UNKNOWN)
    if code.get("dirty"):
        return f"Made from a tree with uncommitted changes (at commit {commit[:12]})."
    if commit == UNKNOWN:
        return f"Made from code whose commit is unknown (no git checkout, no {COMMIT_VARIABLE})."
    return None


__all__ = [
    "COMMIT_VARIABLE",
    "SCHEMA_VERSION",
    "check_schema_version",
    "code_identity",
    "dirty_note",
    "environment",
    "finished",
    "git_state",
    "process_started",
    "provenance",
    "schema_stamp",
    "stamped",
    "texts_identity",
    "times",
]
