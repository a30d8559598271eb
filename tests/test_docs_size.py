"""The committed runs stay lean enough to copy with the tree: the tracked files under docs/ weigh
under `DOCS_BUDGET`, each run folder under `RUN_BUDGET`, and no circuit graph or edge table over
`attn_sink_circuits.runs.io.LEAN_OVER` is committed uncompressed (the run writers store those gzip'd,
NAME.gz). A graph or table stored so reads back equal to its plain file."""

from __future__ import annotations

import gzip
import math
import subprocess
from pathlib import Path

import networkx as nx
import pandas as pd
import pytest

from attn_sink_circuits.graph import read
from attn_sink_circuits.runs import io as cio
from attn_sink_circuits.runs.audit import run_folders

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
DOCS_BUDGET = 40 * 10**6
"""Bytes: all tracked files under docs/ together (issue 36: a copy of the tree carries them)."""
RUN_BUDGET = 5 * 10**6
"""Bytes: one run folder's tracked files (those of the run folders inside it apart)."""
LEAN_NAMES = ("circuit.json", "circuit.graphml", "circuit.gexf", "circuit.dot", "edges.csv")
"""The files the run writers store gzip'd when large (`lean=True`) under every name."""


def _docs_files() -> list[Path]:
    """The tracked files under docs/ that are in the working tree (outside a git checkout,
    every file under docs/)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z", "--", "docs"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return [p for p in DOCS.rglob("*") if p.is_file()]
    return [p for name in out.split("\0") if name and (p := ROOT / name).is_file()]


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def test_the_tracked_docs_are_under_their_budget():
    total = sum(p.stat().st_size for p in _docs_files())
    biggest = sorted(_docs_files(), key=lambda p: -p.stat().st_size)[:5]
    assert total < DOCS_BUDGET, (
        f"docs/ weighs {_mb(total)} (budget {_mb(DOCS_BUDGET)}); biggest files: "
        + ", ".join(f"{p.relative_to(ROOT)} {_mb(p.stat().st_size)}" for p in biggest)
    )


def test_every_run_folder_is_under_its_budget():
    files = _docs_files()
    runs = run_folders(DOCS, files)
    assert DOCS / "p0" / "smollm2-135m" in runs
    over = []
    for run in runs:
        inner = [r for r in runs if run in r.parents]
        size = sum(
            p.stat().st_size for p in files
            if run in p.parents and not any(r in p.parents for r in inner)
        )  # fmt: skip
        if size >= RUN_BUDGET:
            over.append(f"{run.relative_to(ROOT)} {_mb(size)}")
    assert not over, f"run folders over {_mb(RUN_BUDGET)} (gzip the large files): {over}"


def test_no_large_graph_or_edge_table_is_committed_uncompressed():
    plain = [
        f"{p.relative_to(ROOT)} {_mb(p.stat().st_size)}"
        for p in _docs_files()
        if p.name in LEAN_NAMES and p.stat().st_size > cio.LEAN_OVER
    ]
    assert not plain, f"store these gzip'd (NAME.gz, as `lean=True` writes do): {plain}"


def _same(a: nx.DiGraph, b: nx.DiGraph) -> bool:
    def eq(x: dict, y: dict) -> bool:
        return x.keys() == y.keys() and all(
            type(x[k]) is type(y[k])
            and (
                x[k] == y[k] or (isinstance(x[k], float) and math.isnan(x[k]) and math.isnan(y[k]))
            )
            for k in x
        )

    return (
        eq(a.graph, b.graph)
        and list(a.nodes) == list(b.nodes)
        and list(a.edges) == list(b.edges)
        and all(eq(a.nodes[n], b.nodes[n]) for n in a)
        and all(eq(a.edges[e], b.edges[e]) for e in a.edges)
    )


@pytest.mark.parametrize(
    "name", ["p0/smollm2-135m/circuit.graphml", "secondary/smollm2-135m/circuit.json"]
)
def test_a_committed_gzipped_circuit_reads_back_equal_to_its_plain_file(tmp_path, name):
    gz = cio.gz_name(DOCS / name)
    if not gz.is_file():
        pytest.skip(f"{gz} is not committed gzip'd")
    plain = tmp_path / Path(name).name
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    graph = read(plain)
    assert graph.number_of_edges() > 0
    assert _same(read(gz), graph) and _same(read(DOCS / name), graph)  # either name


def test_a_large_table_is_written_gzipped_and_reads_back_by_its_plain_name(tmp_path, monkeypatch):
    frame = pd.DataFrame({"sender": ["L0.H1", "L2.MLP"], "effect": [0.25, -1e-7]})
    path = tmp_path / "edges.csv"
    assert cio.write_csv(path, frame, lean=True) == path
    monkeypatch.setattr(cio, "LEAN_OVER", 10)
    gz = cio.write_csv(path, frame, lean=True)
    assert gz.name == "edges.csv.gz" and not path.exists()
    assert cio.read_stored(path) == frame.to_csv(index=False).encode()
    pd.testing.assert_frame_equal(pd.read_csv(cio.stored(path)), frame, check_exact=True)


README_MAX_LINES = 220
"""The README is a front page (what it is, set-up, a first result, the commands, one findings
table, the models); reference material lives in docs/usage.md and the study pages."""


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move reference text to "
        "docs/usage.md and findings to their study page"
    )
    headings = [line for line in lines if line.startswith("## ")]
    assert sum(h.startswith("## What it finds") for h in headings) == 1
    table = "\n".join(lines).split("## What it finds", 1)[1].split("\n## ", 1)[0]
    assert table.count("| study |") == 1, "one findings table"
