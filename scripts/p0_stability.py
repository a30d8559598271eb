"""The P0 circuit's stability study (issue 33, item 4): the three main models' P0 runs on five
fit / held-out splits (`--edge-seed` 0-4) and two edge ablations at position 0 (mean over the
text's other positions, the default; zero), then what stays and what moves.

    python scripts/p0_stability.py run [--root runs/stability] [--snapshot DIR --commit SHA]
    python scripts/p0_stability.py analyse [--root runs/stability] [--docs docs/p0]

`run` works through the queue one run at a time with one CPU thread (`circuits p0 --threads 1`),
each into ROOT/<model>/<variant>/; a run whose summary.json exists is skipped and an
interrupted one resumes from its finished steps (ROOT/<model>/<variant>.steps). With
`--snapshot`, the runs import the package from that folder (a `git archive` of `--commit`,
which provenance records through CIRCUITS_COMMIT). Each run's start, end, seconds and exit
status go to ROOT/queue.log (JSON lines).

    python scripts/p0_stability.py docs [--root runs/stability] [--docs docs/p0]

`analyse` (re-runnable, on whatever runs have finished) is `p0_stability_analysis.py`, its
Markdown `p0_stability_report.py`. `docs` copies the finished runs: seed 0 (the defaults) to
DOCS/<model>/ (replacing the folder; every file the run wrote but the duplicate graph formats:
circuit.graphml stays, .gexf / .json / .dot go), the others compact to
DOCS/stability/<model>/<variant>/ (`COMPACT`, the graph gzip'd).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from attn_sink_circuits.runs.io import atomic_write, read_stored, write_bytes

MODELS = ("smollm2-135m", "qwen2.5-0.5b", "gemma-3-270m")
SLOWEST = "qwen2.5-0.5b"
"""Its extra seeds go last: the queue's end is what a deadline cuts."""
LAUNCH = "import sys; from attn_sink_circuits.cli import main; sys.argv[0] = 'circuits'; sys.exit(main())"


COMPACT = (
    "summary.json", ".circuits-run.json", "edge_circuit.csv", "faithfulness_curve.csv",
    "faithfulness_curve_by_kind.csv", "heldout_by_kind.csv", "heads.csv", "mlps.csv",
)  # fmt: skip
DUPLICATE_GRAPHS = ("circuit.gexf", "circuit.json", "circuit.dot")
"""Formats of the circuit graph that repeat circuit.graphml (`circuits graph convert` makes
them again), under their plain names or gzip'd (NAME.gz: a large run writes them so)."""


def same_run(a: Path, b: Path) -> bool:
    """Whether two summary.json files were written by one run (same recorded start)."""
    if not b.is_file():
        return False
    start = [json.loads(p.read_text())["provenance"]["time"]["started"] for p in (a, b)]
    return start[0] == start[1]


def copy_to_docs(root: Path, docs: Path) -> None:
    """The finished runs into `docs` (see the module docstring)."""
    for summary in sorted(root.glob("*/*/summary.json")):
        run, model = summary.parent, summary.parent.parent.name
        if run.name == "seed0":
            dest = docs / model
            if same_run(summary, dest / "summary.json"):
                continue  # copied before (and maybe made lean since): keep it as it is
            if dest.exists():
                shutil.rmtree(dest)
            duplicates = [*DUPLICATE_GRAPHS, *(f"{name}.gz" for name in DUPLICATE_GRAPHS)]
            shutil.copytree(run, dest, ignore=shutil.ignore_patterns(*duplicates))
            continue
        dest = docs / "stability" / model / run.name
        dest.mkdir(parents=True, exist_ok=True)
        for name in COMPACT:  # a large table gzip'd (NAME.gz), no stale copy under the other
            write_bytes(dest / name, read_stored(run / name), lean=True)
        write_bytes(dest / "circuit.graphml.gz", read_stored(run / "circuit.graphml"))


def write_readme(readme: Path, figures: dict) -> None:
    """The README's stability section for the models whose seed-0 run in its folder is today's
    (it records the size rule)."""
    from p0_stability_section import write_section

    models = [
        m for m in MODELS
        if (p := readme.parent / m / "summary.json").is_file()
        and "size_rule" in json.loads(p.read_text())["summary"]
    ]  # fmt: skip
    text = write_section(readme, figures, models)
    with atomic_write(readme) as fh:
        fh.write(text)


def variant_name(seed: int, ablation: str) -> str:
    return f"seed{seed}" if ablation == "mean" else f"{ablation}-seed{seed}"


LIGHT = ("--no-edge-mib-areas", "--edge-n-random", "2")
"""Extra flags of every run but the seed-0 defaults: MIB's areas off and 2 random circuits (not
10): neither changes the split, the scores, the curve or the circuit; they save ~1/4 of a run."""


def queue() -> list[tuple[str, int, str]]:
    """(model, seed, ablation) in run order: seed 0 (the defaults, `make demo`'s settings) of
    each model; then, for the two faster models in turn, seed 1, the zero ablation and seeds
    2-4; the slowest model's seed 1, zero ablation and seeds 2-4 last (what a deadline cuts: on
    the shared machine a run took 12-55 min at seed 0, 7-8 min for the faster models after)."""
    fast = [m for m in MODELS if m != SLOWEST]
    runs = [(m, 0, "mean") for m in MODELS]
    runs += [(m, 1, "mean") for m in fast] + [(m, 0, "zero") for m in fast]
    runs += [(m, s, "mean") for s in (2, 3, 4) for m in fast]
    runs += [(SLOWEST, 1, "mean"), (SLOWEST, 0, "zero")]
    runs += [(SLOWEST, s, "mean") for s in (2, 3, 4)]
    return runs


def run_one(root: Path, model: str, seed: int, ablation: str, env: dict, cwd: str) -> dict:
    """One `circuits p0` run into root/model/variant (skipped when its summary.json exists),
    started in `cwd` (the snapshot: `python -c` imports from its working folder first); seed 0
    with the mean ablation is `make demo`'s run (the defaults, nothing added), the others add
    `LIGHT`."""
    name = variant_name(seed, ablation)
    out = root / model / name
    if (out / "summary.json").exists():
        return {"model": model, "variant": name, "skipped": True}
    steps = root / model / f"{name}.steps"
    cmd = [sys.executable, "-c", LAUNCH, "p0", "--model", model, "--out", str(out),
           "--threads", "1", "--edge-seed", str(seed), "--checkpoints", str(steps)]  # fmt: skip
    if ablation != "mean":
        cmd += ["--edge-ablation", ablation]
    if (seed, ablation) != (0, "mean"):
        cmd += list(LIGHT)
    if steps.exists() and any(steps.iterdir()):
        cmd.append("--resume")
    start = time.time()
    log = root / model / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as fh:
        rc = subprocess.call(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=cwd)
    return {
        "model": model, "variant": name, "seed": seed, "ablation": ablation, "rc": rc,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start)),
        "seconds": round(time.time() - start, 1), "command": cmd[3:],
    }  # fmt: skip


def snapshot_env(snapshot: str | None, commit: str | None) -> tuple[dict, str]:
    """The environment and working folder of runs importing the package from `snapshot`."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    cwd = snapshot or os.getcwd()
    if snapshot:
        env["PYTHONPATH"] = snapshot
        env["CIRCUITS_COMMIT"] = commit or ""
    where = subprocess.run(
        [sys.executable, "-c", "import attn_sink_circuits as circuits; print(circuits.__file__)"],
        env=env, capture_output=True, text=True, check=True, cwd=cwd,
    ).stdout.strip()  # fmt: skip
    if snapshot and not where.startswith(str(Path(snapshot).resolve())):
        raise OSError(f"the runs would import {where}, not the snapshot {snapshot}")
    return env, cwd


def run_queue(root: Path, default: tuple, study: tuple, wait_for: int | None = None) -> None:
    """The queue; the seed-0 defaults from snapshot `default` (folder, commit), the others from
    `study`. With `wait_for`, first wait until that process (a run already under way) ends."""
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    while wait_for and Path(f"/proc/{wait_for}").exists():
        time.sleep(10)
    envs = {key: snapshot_env(*snap) for key, snap in (("default", default), ("study", study))}
    with open(root / "queue.log", "a") as fh:
        fh.write(json.dumps({"queue": "start", "default": default, "study": study}) + "\n")
    for model, seed, ablation in queue():
        env, cwd = envs["default" if (seed, ablation) == (0, "mean") else "study"]
        record = run_one(root, model, seed, ablation, env, cwd)
        with open(root / "queue.log", "a") as fh:
            fh.write(json.dumps(record) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="the queue of P0 runs")
    run.add_argument("--root", type=Path, default=Path("runs/stability"))
    run.add_argument("--snapshot", help="folder the runs import the package from")
    run.add_argument("--commit", help="the snapshot's commit (recorded as provenance)")
    run.add_argument(
        "--study-snapshot", help="folder the other runs import from (default: --snapshot)"
    )
    run.add_argument("--study-commit", help="its commit")
    run.add_argument("--wait-for", type=int, help="a process id to wait for first")
    ana = sub.add_parser("analyse", help="overlap, common edges, cross-split f; the tables")
    ana.add_argument("--root", type=Path, default=Path("runs/stability"))
    ana.add_argument("--out", type=Path, default=Path("docs/p0/stability"))
    ana.add_argument("--no-cross", action="store_true", help="judge nothing new (no model)")
    ana.add_argument(
        "--pairs",
        choices=("all", "seed0"),
        default="all",
        help="cross-split pairs to judge: all, or those with seed 0 (fewer)",
    )
    ana.add_argument(
        "--unseen",
        nargs="*",
        default=list(MODELS),
        help="models whose seed-0 circuit is judged on the left-out texts",
    )
    ana.add_argument("--readme", type=Path, help="write its stability section (docs/p0/README.md)")
    docs = sub.add_parser("docs", help="copy the finished runs into docs/p0 (lean)")
    docs.add_argument("--root", type=Path, default=Path("runs/stability"))
    docs.add_argument("--docs", type=Path, default=Path("docs/p0"))
    args = parser.parse_args()
    if args.command == "run":
        default = (args.snapshot, args.commit)
        study = (args.study_snapshot, args.study_commit) if args.study_snapshot else default
        run_queue(args.root, default, study, args.wait_for)
    elif args.command == "analyse":
        from p0_stability_analysis import analyse, stability_figures
        from p0_stability_report import markdown

        judge = None if args.no_cross else {"pairs": args.pairs, "unseen": args.unseen}
        tables = analyse(args.root, args.out, judge)
        figures = stability_figures(tables)
        with atomic_write(args.out / "README.md") as fh:
            fh.write(markdown(tables, figures))
        if args.readme:
            write_readme(args.readme, figures)
    else:
        copy_to_docs(args.root, args.docs)


if __name__ == "__main__":
    main()
