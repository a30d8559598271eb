"""The docs runner: every committed run folder (and every committed result record) with the
command that writes it, from one list, `docs/runs.toml`.

    python scripts/docs_runs.py list                      # each entry: its paths and command
    python scripts/docs_runs.py check                     # the list matches the committed records
    python scripts/docs_runs.py run docs/kv/smollm2-135m  # regenerate these (or --all)

An entry's command is the one its records carry (`provenance.command`), with the output folder
written `{out}` (the entry's path) and a scratch path outside the repository `{work}`
(`runs/docs-runs/work`). `check` fails when a committed record has no entry, an entry's path is
gone, or an entry's command is not its records' (a run made again must be recorded again).
Records whose command was not recorded (reconstructed provenance) have an empty command and
cannot be run; `list` names them. `run` is resumable: each finished entry is noted in
`runs/docs-runs/done.json` with its command and skipped by the next `run` unless `--again`; long
commands resume through their own `--checkpoint(s)` under `{work}`.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIST = ROOT / "docs" / "runs.toml"
WORK = Path("runs") / "docs-runs"
MARKER = ".circuits-run.json"
RECORD_NAMES = ("summary.json", "provenance.json")
"""A record with one of these names stands for its folder; any other names itself."""
PROGRAMS = {".venv/bin/circuits": "circuits", "mib_reference.py": "scripts/mib_reference.py",
            "circuits/claims/judge_saved.py": "attn_sink_circuits/studies/claims/judge_saved.py",
            "scripts/paper_protocols.py": "-m attn_sink_circuits.studies.protocols",
            "scripts/kv_streaming.py": "-m attn_sink_circuits.studies.kv.streaming",
            "scripts/kv_retrieval.py": "-m attn_sink_circuits.studies.kv.passkey_check"}  # fmt: skip
"""Programs recorded under an older name or path -> how they are called today (`-m MODULE`:
run as `python -m MODULE`)."""
SUBCOMMANDS = ("emergence", "claims", "p0")
"""A command recorded without its program (argv from the subcommand on) is the CLI's."""
HEADER = (
    "# Every committed run folder and result record, with the command that writes it.\n"
    "# {out}: the entry's path; {work}: runs/docs-runs/work. Read by scripts/docs_runs.py.\n"
)


def tracked() -> list[str]:
    """The files git tracks under docs/ and train/."""
    done = subprocess.run(["git", "-C", str(ROOT), "ls-files", "docs", "train"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.split()


def recorded_command(path: Path) -> list[str] | None:
    """The argv a record carries (None: not recorded), or `...` when it holds no command."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return ...
    prov = doc.get("provenance") if isinstance(doc, dict) else None
    command = prov.get("command") if isinstance(prov, dict) else None
    if command is None:
        return ...
    if command == "unknown":
        return None
    return shlex.split(command) if isinstance(command, str) else list(command)


def record_commands() -> list[tuple[str, list[str] | None]]:
    """(path, argv or None) of every committed record: a run folder (its marker) or a JSON
    file with a recorded command outside such folders."""
    files = tracked()
    folders = {f.rsplit("/", 1)[0] for f in files if f.endswith("/" + MARKER)}
    found: dict[str, list[str] | None] = {}
    for f in files:
        folder, name = f.rsplit("/", 1)
        if not f.endswith(".json") or (folder in folders and name != MARKER):
            continue
        argv = recorded_command(ROOT / f)
        if argv is not ...:
            found.setdefault(folder if name in (MARKER, *RECORD_NAMES) else f, argv)
    return sorted(found.items())


def program(word: str) -> list[str]:
    """A recorded program as it is called today: `PROGRAMS`' name for it, a module of the
    package (`attn_sink_circuits/a/b.py`, `.../b/__main__.py`) as `-m attn_sink_circuits.a.b`."""
    word = PROGRAMS.get(word, word)
    if word.startswith("-m "):
        return word.split()
    if word.startswith("attn_sink_circuits/") and word.endswith(".py"):
        return ["-m", word.removesuffix(".py").removesuffix("/__main__").replace("/", ".")]
    return [word]


def normalise(argv: list[str] | None, path: str) -> str:
    """The recorded `argv` as an entry's command: today's program name, `--out VALUE` as
    `--out {out}`, `<outside>/` as `{work}/`. '' for a command not recorded."""
    if not argv:
        return ""
    argv = [*program(argv[0]), *argv[1:]]
    if argv[0] in SUBCOMMANDS:
        argv = ["circuits", *argv]
    words = []  # shell-safe stand-ins, so that shlex.join leaves them unquoted
    for i, word in enumerate(argv):
        out = i > 0 and argv[i - 1] == "--out"
        words.append("@OUT@" if out else word.replace("<outside>/", "@WORK@/"))
    return shlex.join(words).replace("@OUT@", "{out}").replace("@WORK@", "{work}")


def read_list(path: Path = LIST) -> list[dict]:
    """The entries of `docs/runs.toml`: {"paths": [...], "command": str}."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))["run"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as err:
        raise SystemExit(f"{path}: cannot read the run list ({err})") from None


def toml_text(entries: list[dict]) -> str:
    """`entries` written as `docs/runs.toml`."""
    blocks = [HEADER]
    for e in entries:
        paths = ", ".join(json.dumps(p) for p in e["paths"])
        blocks.append(f"[[run]]\npaths = [{paths}]\ncommand = {json.dumps(e['command'])}\n")
    return "\n".join(blocks)


def problems(entries: list[dict], records: list[tuple[str, list[str] | None]]) -> list[str]:
    """Why the list does not match the committed records (empty: it does)."""
    owner = {p: e for e in entries for p in e["paths"]}
    out = [f"{p}: listed twice" for p in owner if sum(p in e["paths"] for e in entries) > 1]
    out += [f"{p}: listed but not committed" for p in owner if not (ROOT / p).exists()]
    for path, argv in records:
        entry = owner.get(path)
        if entry is None:
            out.append(f"{path}: a committed record with no entry in {LIST.name}")
        elif normalise(argv, path) != entry["command"]:
            out.append(f"{path}: recorded `{normalise(argv, path)}`, listed `{entry['command']}`")
    return out


def argv_of(command: str, path: str) -> list[str]:
    """The command of an entry as argv to run here, `{out}` = `path`."""
    words = [w.replace("{out}", path).replace("{work}", str(WORK / "work")) for w in
             shlex.split(command)]  # fmt: skip
    if words[0] == "circuits":
        return [sys.executable, "-m", "attn_sink_circuits.cli", *words[1:]]
    return [sys.executable, *words]


def run(entries: list[dict], wanted: list[str], again: bool) -> int:
    """Run the entries holding `wanted` paths (all when empty), skipping those done before."""
    done_file = ROOT / WORK / "done.json"
    done = json.loads(done_file.read_text()) if done_file.is_file() else {}
    chosen = [e for e in entries if not wanted or set(e["paths"]) & set(wanted)]
    missing = set(wanted) - {p for e in chosen for p in e["paths"]}
    if missing:
        raise SystemExit(f"not in {LIST.name}: {', '.join(sorted(missing))}")
    for e in chosen:
        key = e["paths"][0]
        if not e["command"]:
            print(f"skip {key}: its command was not recorded (reconstructed provenance)")
            continue
        if done.get(key) == e["command"] and not again:
            print(f"done before: {key}")
            continue
        print(f"run {key}: {e['command']}", flush=True)
        subprocess.run(argv_of(e["command"], key), cwd=ROOT, check=True)
        done[key] = e["command"]
        done_file.parent.mkdir(parents=True, exist_ok=True)
        done_file.write_text(json.dumps(done, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    sub = p.add_subparsers(dest="action", required=True)
    sub.add_parser("list", help="each entry's paths and command")
    sub.add_parser("check", help="exit 1 unless the list matches the committed records")
    r = sub.add_parser("run", help="regenerate entries (resumable)")
    r.add_argument("paths", nargs="*", help="entries' paths (default: all with a command)")
    r.add_argument("--again", action="store_true", help="also entries done before")
    p.add_argument("--list", type=Path, default=LIST, help=f"the run list (default {LIST.name})")
    args = p.parse_args(argv)
    entries = read_list(args.list)
    if args.action == "list":
        for e in entries:
            print(f"{', '.join(e['paths'])}\n    {e['command'] or '(not recorded)'}")
        return 0
    if args.action == "check":
        found = problems(entries, record_commands())
        print("\n".join(found) or f"{LIST.name}: {len(entries)} entries match the records")
        return 1 if found else 0
    return run(entries, args.paths, args.again)


if __name__ == "__main__":
    sys.exit(main())
