"""Rewrite the repository's committed records so that they name no machine path
(`attn_sink_circuits.runs.record_migration`): a path under the repository becomes relative to its root, one
outside it `<outside>/NAME`; everything else in each file stays as it was, and what a resume
compares (a training run's folder, a checkpoint key, generated traces) is left alone.

    python scripts/portable_records.py --check            # list what holds paths; exit 1 if any
    python scripts/portable_records.py                    # rewrite the tracked records
    python scripts/portable_records.py --root /old/clone  # also a copy the runs were made in

A path under a `--root` (a checkout or snapshot of this repository that a run used, e.g.
`/tmp/snapshot-abc1234`) counts as under the repository too. Only files git tracks are
read (default folders: docs and notebooks).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from attn_sink_circuits.runs.record_migration import migrate_records

ROOT = Path(__file__).resolve().parents[1]


def tracked(paths: list[str]) -> list[Path]:
    """The files git tracks under `paths` (relative to the repository root)."""
    done = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--", *paths],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise ValueError(f"git ls-files failed in {ROOT}: {done.stderr.strip()}")
    return [ROOT / f for f in done.stdout.split("\0") if f and (ROOT / f).is_file()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="*", default=["docs", "notebooks"], help="folders or files")
    p.add_argument("--root", action="append", default=[], help="another copy of the repository")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if any path")
    args = p.parse_args(argv)
    roots = [ROOT, ROOT.resolve(), *(Path(r) for r in args.root)]
    try:
        counts = migrate_records(tracked(args.paths), roots, write=not args.check)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for path, n in sorted(counts.items()):
        print(f"{n:5d}  {path.relative_to(ROOT)}")
    verb = "hold" if args.check else "rewritten:"
    print(f"{len(counts)} files {verb} {sum(counts.values())} strings with machine paths")
    return 1 if args.check and counts else 0


if __name__ == "__main__":
    sys.exit(main())
