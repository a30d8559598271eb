"""MIB's held-out areas of saved IOI runs with their bootstrap intervals, for runs saved before
the intervals were: each run's held-out pairs made again from its record (checked against the
hash of the pairs it recorded), its edges ranked from its importance file, MIB's ten circuits of
each ranking judged again on those pairs (their edge counts and areas must match the run's),
and CPR / CMD written with their 95 % intervals over the pairs (the run's own n_boot and seed)
to RUN/area_intervals.json, whose provenance names this command and the run re-judged.

With `--on OTHER` each run's rankings are judged instead on the held-out pairs of OTHER (a run
of the same model and graph), with the run's judging settings, and written to
RUN/areas_on_<OTHER's name>.json: two runs judged on the same pairs, e.g. 100 against 1,000
attribution pairs with the held-out set held fixed (OTHER's own areas are its summary's).
With `--on OTHER --paired` OTHER's ranking is judged again beside the run's on OTHER's pairs
(its areas must come out as its summary's), and the difference of each area, the run's minus
OTHER's, is written with its paired interval (both rankings on the same resamples of the pairs)
to RUN/paired_<OTHER's name>.json: whether two rankings differ, not only whether their own
intervals overlap.

    .venv/bin/python scripts/mib_intervals.py docs/mib/runs/smollm2-135m-s2_io_flip-eap_ig-100 \\
        --importances /tmp/mibruns          # ROOT/<run name>/importances.mib.json

The importance files (9 MB and more) are not committed; without --importances each run's own
folder must hold its file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

AREAS = ("cpr", "cmd")
"""MIB's two areas; `--paired --areas cmd` judges one (each costs ten circuits a ranking)."""

AREA_TOLERANCE = 2e-3
"""How far a re-judged area may lie from the run's own (float noise of other batch shapes)."""


def held_out_pairs(model, summary: dict):
    """The run's held-out pairs, made again as `scripts/mib_ioi.py` made them
    (`ioi.saved_run_pairs`: refused unless they hash as the run recorded)."""
    from attn_sink_circuits.studies.ioi.prompts import saved_run_pairs

    try:
        return saved_run_pairs(model, summary)[1]
    except ValueError as e:
        raise SystemExit(str(e)) from None


def judging(model, settings: dict, held) -> tuple:
    """(the runner judging circuits on the pairs `held` with a run's `settings`, the metric per
    pair with every edge ablated)."""
    from attn_sink_circuits.discovery.chunk_runner import judging_runner
    from attn_sink_circuits.discovery.evaluation import empty_metric

    runner = judging_runner(model, held, batch_size=settings["batch_size"],
                            kv_inputs=settings["kv_inputs"], seed=settings["seed"])  # fmt: skip
    return runner, empty_metric(runner)


def ranking_keys(runner, empty, importances: Path, summary: dict) -> tuple[float, dict]:
    """(the sign that made higher scores help the metric, the growth key per `RankBy`) of the
    importance file's scores, as the run ranked its edges: the run's recorded sign (taken on
    its fit pairs), or for runs saved before it was recorded the sign on the judged pairs."""
    from attn_sink_circuits.discovery.config import RankBy
    from attn_sink_circuits.discovery.evaluation import metric_direction
    from attn_sink_circuits.discovery.methods.base import EdgeScores
    from attn_sink_circuits.discovery.protocol import read_mib_scores

    values = read_mib_scores(importances, runner.space)[None]  # one row: the run's mean scores
    scores = EdgeScores(values, per_text=False, signed=True)
    direction = summary["mib"]["heldout"].get("direction")
    if direction is None:
        direction = metric_direction(runner, empty)
    return direction, {s: scores.key(s, direction) for s in RankBy}


def judged(model, summary: dict, held, importances: Path) -> dict:
    """MIB's scores (`areas.mib_scores`) of the importance file's two rankings on the pairs
    `held`, judged with the run's settings (batch size, bootstrap resamples and seed)."""
    from attn_sink_circuits.discovery.areas import mib_scores

    settings = summary["provenance"]["settings"]
    runner, empty = judging(model, settings, held)
    direction, key = ranking_keys(runner, empty, importances, summary)
    out = mib_scores(runner, key, empty, batch_size=settings["batch_size"],
                     n_boot=settings["n_boot"], seed=settings["seed"])  # fmt: skip
    return {"direction": direction, "n_boot": settings["n_boot"], "seed": settings["seed"], **out}


def rejudged(area: str, rank: str, value: float, n: int, ran: dict) -> None:
    """Refuse a re-judged `area` on `n` edges that is not the run's own (`ran`: its held-out
    MIB record) within `AREA_TOLERANCE`."""
    if n != ran[f"n_edges_{rank}"] or abs(value - ran[area]) > AREA_TOLERANCE:
        raise SystemExit(f"{area}: re-judged {value:.4f} on {n} edges, the run had "
                         f"{ran[area]:.4f} on {ran[f'n_edges_{rank}']}")  # fmt: skip


def intervals(model, summary: dict, importances: Path) -> dict:
    """CPR and CMD on the run's held-out pairs with their intervals (see the module docstring)."""
    again = judged(model, summary, held_out_pairs(model, summary), importances)
    out = {k: again[k] for k in ("direction", "n_boot", "seed")}
    for rank, area in (("signed", "cpr"), ("abs", "cmd")):
        rejudged(area, rank, again[area], again[f"n_edges_{rank}"], summary["mib"]["heldout"])
        out[f"{area}_heldout"], out[f"{area}_heldout_ci"] = again[area], again[f"{area}_ci"]
    return out


def same_graph(summary: dict, other: dict) -> dict:
    """`other`'s held-out pairs as a record (hash, indices); refused unless both runs are of one
    model and graph."""
    for key in ("model", "n_edges_total", "protocol"):
        if summary.get(key) != other.get(key):
            raise SystemExit(
                f"the runs differ in {key} ({summary.get(key)} against {other.get(key)}): "
                "judge on the pairs of a run of the same model and graph"
            )
    texts = other["provenance"]["texts"]
    pairs = {"sha256": texts["sha256"], "heldout_indices": texts["heldout_indices"]}
    return {"pairs_of": other["provenance"]["command"], "pairs": pairs}


def on_other_pairs(model, summary: dict, other: dict, importances: Path) -> dict:
    """The run's areas on `other`'s held-out pairs (see the module docstring)."""
    pairs = same_graph(summary, other)
    out = judged(model, summary, held_out_pairs(model, other), importances)
    areas = {f"{a}_heldout{ci}": out[f"{a}{ci}"] for a in ("cpr", "cmd") for ci in ("", "_ci")}
    return {**pairs, **areas, "mib": out}


def paired(model, summary: dict, other: dict, importances: tuple[Path, Path], areas=AREAS) -> dict:
    """The run's and `other`'s rankings (`importances`: their files) judged on `other`'s held-out
    pairs with `other`'s settings: each of `areas` with its interval, and the run's minus
    `other`'s with its paired interval (both on the same resamples of the pairs). Refused
    unless `other`'s areas come out as its summary's."""
    import numpy as np

    from attn_sink_circuits.discovery.areas import (
        MIB_FRACTIONS,
        mib_area_difference,
        mib_area_interval,
        mib_areas,
        mib_curve,
    )

    out = same_graph(summary, other)
    settings = other["provenance"]["settings"]
    runner, empty = judging(model, settings, held_out_pairs(model, other))
    keys = [
        ranking_keys(runner, empty, path, s)[1]
        for path, s in zip(importances, (summary, other), strict=True)
    ]
    model_v, empty_v = runner.clean.metric.numpy(), empty.numpy()
    boot = {"n_boot": settings["n_boot"], "seed": settings["seed"]}
    for rank, area, which in (
        r for r in (("signed", "cpr", 0), ("abs", "cmd", 1)) if r[1] in areas
    ):
        batch = settings["batch_size"]
        curves = [mib_curve(runner, k[rank], empty, batch_size=batch) for k in keys]
        for who, (n, f, values) in zip(("run", "other"), curves, strict=True):
            out[f"n_edges_{rank}_{who}"] = n
            out[f"{area}_{who}"] = mib_areas(MIB_FRACTIONS, f)[which]
            out[f"{area}_{who}_ci"] = list(mib_area_interval(
                MIB_FRACTIONS, values, model_v, empty_v, area=which, **boot))  # fmt: skip
        ran = other["mib"]["heldout"]
        rejudged(area, rank, out[f"{area}_other"], out[f"n_edges_{rank}_other"], ran)
        both = np.stack([values for _, _, values in curves])
        diff, ci = mib_area_difference(MIB_FRACTIONS, both, model_v, empty_v, area=which, **boot)
        out[f"{area}_difference"], out[f"{area}_difference_ci"] = diff, list(ci)
    return {**out, **boot}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="folders scripts/mib_ioi.py wrote")
    p.add_argument("--importances", help="ROOT holding <run name>/importances.mib.json")
    p.add_argument("--on", help="a run folder: judge on its held-out pairs instead")
    p.add_argument("--paired", action="store_true",
                   help="with --on: judge OTHER's ranking too, and the difference of the areas "
                   "with its paired interval")  # fmt: skip
    p.add_argument("--areas", nargs="+", choices=AREAS, default=list(AREAS),
                   help="with --paired: the areas to compare (default both)")  # fmt: skip
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    if args.paired and args.on is None:
        p.error("--paired compares a run with the run given by --on: give --on OTHER")
    if tuple(args.areas) != AREAS and not args.paired:
        p.error("--areas chooses what --paired compares: give --on OTHER --paired")

    import torch

    from attn_sink_circuits.discovery.protocol import read_run
    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.runs.io import atomic_write
    from attn_sink_circuits.runs.owned import add_to_run
    from attn_sink_circuits.runs.provenance import code_identity, provenance, stamped

    code_identity()  # the code's state now, before any commit made while this runs
    torch.set_num_threads(args.threads)
    try:
        other = None if args.on is None else read_run(args.on)
        summaries = {run: read_run(run) for run in map(Path, args.runs)}
    except ValueError as err:
        raise SystemExit(str(err)) from None
    for run, summary in summaries.items():
        importances = _importances(run, args.importances)
        model = load_model(summary["model"])
        if other is None:
            out, name = intervals(model, summary, importances), "area_intervals.json"
        elif args.paired:
            files = (importances, _importances(Path(args.on), args.importances))
            out = paired(model, summary, other, files, tuple(args.areas))
            name = f"paired_{Path(args.on).name}.json"
        else:
            out = on_other_pairs(model, summary, other, importances)
            name = f"areas_on_{Path(args.on).name}.json"
        settings = {"run": str(run), "importances": str(importances), "on": args.on,
                    "paired": args.paired, "areas": args.areas}  # fmt: skip
        record = provenance(model, settings=settings)
        record["rejudged"] = {"folder": str(run), "original": summary["provenance"]}
        with atomic_write(run / name, "w") as fh:
            fh.write(json.dumps(stamped(out, record), indent=1) + "\n")
        add_to_run(run, run / name)  # the run's next replacement takes it too
        print(f"{run.name} -> {name}: " + ", ".join(
            f"{k} {out[k]:.4f} {out[k + '_ci']}" for k in out if f"{k}_ci" in out))  # fmt: skip


def _importances(run: Path, root: str | None) -> Path:
    from attn_sink_circuits.discovery.submission import importance_file

    try:
        return importance_file(run, root)
    except FileNotFoundError as err:
        raise SystemExit(f"{err}; give --importances ROOT") from None


if __name__ == "__main__":
    main()
