"""Check that `make demo` writes the documented run again: run the demo's command
(`circuits p0 --model smollm2-135m`, every default, at one thread like the documented run) into a
temporary folder and compare every number of its data files with `docs/p0/smollm2-135m`.

    python scripts/check_demo.py                       # run the demo (tens of minutes), compare
    python scripts/check_demo.py --out out/demo-check  # keep the new run there (resumes)
    python scripts/check_demo.py --compare A B         # compare two run folders, run nothing

Compared: every .json, .csv and .graphml file (gzipped too) that either folder holds, JSON by key
path, CSV by row (counted from 0 below the header) and column, GraphML by graph, node and edge attribute. Two numbers agree when
|a - b| <= tolerance * max(1, |a|, |b|): an absolute tolerance for values up to 1 in size, a
relative one above (a norm of 25,101.87 may move by 0.0025). Text, booleans and empty cells must be
equal. Left out: what differs between two faithful runs (the provenance's time, code commit,
command with its output path and environment; the step timings under "seconds" and the steps a
resumed run loaded, "resumed_steps").

Prints a one-line verdict, then each difference; exit 0 when equal, 1 on any difference, 2 when a
folder is missing or the demo run fails.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import math
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO_MODEL = "smollm2-135m"
DOCUMENTED = ROOT / "docs" / "p0" / DEMO_MODEL
TOLERANCE = 1e-4
IGNORED = (
    ("provenance", "time"),
    ("provenance", "code"),
    ("provenance", "command"),
    ("provenance", "environment"),
    ("seconds",),
    ("resumed_steps",),
)
KINDS = (".json", ".csv", ".graphml")


@dataclass
class Comparison:
    """Differences found so far between run A and run B, and how much was compared."""

    tolerance: float = TOLERANCE
    n_files: int = 0
    n_values: int = 0
    largest: tuple[float, str] = (0.0, "")
    differences: list[str] = field(default_factory=list)

    def value(self, where: str, a: object, b: object) -> None:
        """Compare one value of A with the same value of B."""
        self.n_values += 1
        if isinstance(a, float) and isinstance(b, float):
            if math.isnan(a) and math.isnan(b) or a == b:
                return
            gap = abs(a - b) / max(1.0, abs(a), abs(b))
            if not gap <= self.tolerance:
                self.differences.append(f"{where}: {a!r} vs {b!r} (difference {abs(a - b):.3g})")
            elif gap > self.largest[0]:
                self.largest = (gap, where)
        elif a != b:
            self.differences.append(f"{where}: {a!r} vs {b!r}")

    def values(self, name: str, a: dict[str, object], b: dict[str, object]) -> None:
        """Compare two files' flattened values, key by key."""
        for key in sorted(a.keys() | b.keys()):
            if key not in b:
                self.differences.append(f"{name}: {key}: only in A ({a[key]!r})")
            elif key not in a:
                self.differences.append(f"{name}: {key}: only in B ({b[key]!r})")
            else:
                self.value(f"{name}: {key}", a[key], b[key])

    def verdict(self) -> str:
        scope = f"{self.n_values} values in {self.n_files} files"
        if self.differences:
            n = len(self.differences)
            return f"DIFFERENT: {n} differences ({scope} compared, tolerance {self.tolerance:g})"
        gap, where = self.largest
        at = f"; the largest |a - b| / max(1, |a|, |b|), {gap:.1e}, at {where}" if where else ""
        return f"equal: {scope} agree within {self.tolerance:g}{at}"


def number(x: object) -> object:
    """Numbers as floats (booleans stay booleans); everything else unchanged."""
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else x


def flatten(obj: object, path: tuple[str, ...] = ()) -> dict[str, object]:
    """Every leaf of a JSON value by its key path (`a.b[2].c`), the ignored paths left out."""
    if path in IGNORED:
        return {}
    if isinstance(obj, dict):
        return {k: v for key, item in obj.items() for k, v in flatten(item, (*path, key)).items()}
    if isinstance(obj, list):
        out = {}
        for i, item in enumerate(obj):
            *head, last = path or ("",)
            out.update(flatten(item, (*head, f"{last}[{i}]")))
        return out
    return {".".join(path): number(obj)}


def cell(text: str) -> object:
    """A CSV cell: a float where it reads as a number, else its text."""
    try:
        return float(text)
    except ValueError:
        return text


def read_csv(text: str) -> dict[str, object]:
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return {}
    header, out = rows[0], {}
    for i, row in enumerate(rows[1:]):
        for column, value in zip(header, row, strict=False):
            out[f"row {i}.{column}"] = cell(value)
        if len(row) != len(header):
            out[f"row {i}: cells"] = float(len(row))
    return out


def json_text(value: object) -> object:
    """A GraphML attribute; one that holds JSON (a list or mapping) read as JSON."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def read_graphml(text: str) -> dict[str, object]:
    import networkx as nx

    graph = nx.read_graphml(io.StringIO(text))
    out = flatten({k: json_text(v) for k, v in graph.graph.items()}, ("graph",))
    for node, attrs in graph.nodes(data=True):
        out.update(flatten({k: json_text(v) for k, v in attrs.items()}, (f"node {node}",)))
    for u, v, attrs in graph.edges(data=True):
        out.update(flatten({k: json_text(x) for k, x in attrs.items()}, (f"edge {u} -> {v}",)))
    return out


def read_values(path: Path) -> dict[str, object]:
    """A data file's values by key; a ValueError when it cannot be read."""
    raw = path.read_bytes()
    try:
        text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")
        kind = Path(path.name.removesuffix(".gz")).suffix
        if kind == ".json":
            return flatten(json.loads(text))
        return read_csv(text) if kind == ".csv" else read_graphml(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error) as err:
        raise ValueError(f"cannot be read ({err})") from None
    except Exception as err:  # a GraphML parser's error names no common base class
        raise ValueError(f"cannot be read ({type(err).__name__}: {err})") from None


def data_files(folder: Path) -> set[str]:
    """The data files under `folder`, relative to it."""
    return {
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and Path(p.name.removesuffix(".gz")).suffix in KINDS
    }


def compare_folders(a: Path, b: Path, tolerance: float = TOLERANCE) -> Comparison:
    """Every data file of run folders A and B compared value by value."""
    found = Comparison(tolerance)
    in_a, in_b = data_files(a), data_files(b)
    for name in sorted(in_a | in_b):
        if name not in in_b or name not in in_a:
            found.differences.append(f"{name}: file only in {'A' if name in in_a else 'B'}")
            continue
        found.n_files += 1
        try:
            values_a, values_b = read_values(a / name), read_values(b / name)
        except ValueError as err:
            found.differences.append(f"{name}: {err}")
            continue
        found.values(name, values_a, values_b)
    return found


def run_demo(out: Path, threads: int) -> int:
    """`make demo`'s command into `out` (resumed where its steps are kept); its exit status."""
    command = [sys.executable, "-m", "attn_sink_circuits.cli", "p0", "--model", DEMO_MODEL]
    command += ["--out", str(out), "--threads", str(threads)]
    steps = Path(f"{out}.steps")
    if steps.is_dir() and any(steps.iterdir()):
        command.append("--resume")
    print("running: " + " ".join(command[1:]), file=sys.stderr, flush=True)
    return subprocess.run(command, cwd=ROOT, stdout=sys.stderr, check=False).returncode


def report(found: Comparison, a: Path, b: Path, show: int) -> int:
    print(found.verdict())
    print(f"A: {a}\nB: {b}")
    for line in found.differences[:show]:
        print("  " + line)
    if len(found.differences) > show:
        print(f"  ... and {len(found.differences) - show} more (--show N lists more)")
    return 1 if found.differences else 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two run folders only")
    p.add_argument("--out", help="write the new run here and keep it (default: a temporary folder)")
    p.add_argument("--threads", type=int, default=1, help="threads of the demo run (default 1)")
    p.add_argument("--tolerance", type=float, default=TOLERANCE, help="default 1e-4")
    p.add_argument("--show", type=int, default=200, help="differences listed (default 200)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.compare:
        a, b = (Path(x) for x in args.compare)
    else:
        a = DOCUMENTED
        with tempfile.TemporaryDirectory(prefix="demo-check-") as tmp:
            b = Path(args.out) if args.out else Path(tmp) / f"p0-{DEMO_MODEL}"
            if (status := run_demo(b, args.threads)) != 0:
                print(f"error: the demo run failed (exit {status})", file=sys.stderr)
                return 2
            return report(compare_folders(a, b, args.tolerance), a, b, args.show)
    for folder in (a, b):
        if not folder.is_dir():
            print(f"error: {folder} is not a folder", file=sys.stderr)
            return 2
    return report(compare_folders(a, b, args.tolerance), a, b, args.show)


if __name__ == "__main__":
    sys.exit(main())
