"""Known answers (Tracr-compiled programs): every edge method against the derived truth, the
truth itself beside ACDC's, and the design sinks. Writes the run folder docs/ground_truth/run
(summary.json with provenance, and the Markdown tables docs/ground_truth/README.md includes).

    python scripts/known_answers.py [--out docs/ground_truth/run] [--programs reverse hist]
    python scripts/known_answers.py --planted [--out docs/ground_truth/planted]

`--planted` scores the same methods on the planted P0-sink models instead
(`attn_sink_circuits.studies.known_answers.planted`: the P0 study's metric and ablation) and writes its own run
folder, docs/ground_truth/planted.

Everything runs on one CPU core in a few minutes (the compiled models have at most 41
residual dimensions and 77 edges).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from attn_sink_circuits.models.compiled import load_compiled
from attn_sink_circuits.runs.io import atomic_folder, write_json
from attn_sink_circuits.runs.provenance import provenance, stamped
from attn_sink_circuits.studies.known_answers.planted import (
    ABLATION,
    AMPLIFY,
    N_TOKENS,
    planted_models,
    planted_runner,
    planted_truth,
    score_planted,
    truth_check,
)
from attn_sink_circuits.studies.known_answers.scoring import (
    ALL_METHODS,
    cell_dict,
    circuit_faithfulness,
    runner_for,
    score_cell,
    truth_mask,
    used_mask,
)
from attn_sink_circuits.studies.known_answers.sinks import design_table, p0_tracer
from attn_sink_circuits.studies.known_answers.task import SEED, TASK_LENGTH, task_tokens
from attn_sink_circuits.studies.known_answers.truth import (
    ACDC_DIFFERENCES,
    ACDC_TRUTH,
    merged,
    zero_truth,
)

OUT = Path(__file__).resolve().parents[1] / "docs" / "ground_truth" / "run"
PLANTED_OUT = OUT.parent / "planted"
PROGRAMS = ("reverse", "frac_prevs", "hist", "sort")
ACDC_TASK = {"reverse": "tracr-reverse", "frac_prevs": "tracr-xproportion"}
PUBLISHED = {
    ("resample", "reverse"): (0.200, 0.656, 0.416),
    ("resample", "frac_prevs"): (0.600, 0.679, 0.400),
    ("zero", "reverse"): (1.000, 0.656, 0.692),
    ("zero", "frac_prevs"): (1.000, 0.679, 0.561),
}
"""ACDC, HISP, SP edge ROC AUCs as ACDC's repository tables them
(experiments/results/auc_tables.tex, June 2023), against ACDC's own truth."""


def _row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(header: list[str], rows: list[list]) -> str:
    return "\n".join([_row(header), _row(["---"] * len(header)), *map(_row, rows)]) + "\n"


def methods_md(cells: list[dict]) -> str:
    header = ["program", "ablation", "method", "edges (empty)", "true (declared / used)",
              "AUC declared", "AUC declared, no empty", "AUC used", "P = R at used size",
              "missed (used)", "added", "ACDC / HISP / SP"]  # fmt: skip
    rows = []
    for c in cells:
        pub = PUBLISHED.get((c["ablation"], c["program"]))
        rows.append([
            c["program"], c["ablation"], c["method"], f"{c['n_edges']} ({c['n_empty_edges']})",
            f"{c['n_true']} / {c['n_used']}", f"{c['auc']:.3f}", f"{c['auc_without_empty']:.3f}",
            f"{c['auc_used']:.3f}",
            f"{c['precision_at_used_size']:.2f}", ", ".join(c["missed"]) or "-",
            ", ".join(c["added"]) or "-",
            " / ".join(f"{x:.3f}" for x in pub) if pub else "-",
        ])  # fmt: skip
    return _table(header, rows)


def truth_md(truths: list[dict]) -> str:
    header = ["program", "ablation", "declared", "used", "declared, not used (inert)",
              "true circuit MSE", "empty circuit MSE"]  # fmt: skip
    rows = [[t["program"], t["ablation"], len(t["declared"]), len(t["used"]),
             ", ".join(sorted(set(t["declared"]) - set(t["used"]))) or "-",
             f"{t['mse_true_circuit']:.2g}", f"{t['mse_empty_circuit']:.3f}"] for t in truths]  # fmt: skip
    return _table(header, rows)


def acdc_md() -> str:
    header = ["program", "edge (derived, not in ACDC's truth)", "why no ablation sees it"]
    rows = [[p, e, why] for p, diffs in ACDC_DIFFERENCES.items() for e, why in diffs.items()]
    return _table(header, rows)


def sinks_md(rows: list[dict]) -> str:
    header = ["program", "head", "kind", "length", "predicted BOS mass", "measured",
              "max abs error", "Gu's alpha", "Sink^0.3 by alpha", "Sink^0.3 by mass"]  # fmt: skip
    body = [[r["program"], r["head"], r["kind"], r["length"], f"{r['predicted_mean']:.4f}",
             f"{r['measured_mean']:.4f}", f"{r['max_abs_error']:.1e}", f"{r['gu_alpha']:.3f}",
             "yes" if r["gu_sink"] else "no", "yes" if r["mass_sink"] else "no"] for r in rows]  # fmt: skip
    return _table(header, body)


def tracer_md(rows: list[dict]) -> str:
    header = ["program", "P0 norm / median norm (per block)", "formation block (stand-in)",
              "late layers", "late P0 attention", "named heads", "named MLPs",
              "largest rise (relative)", "largest drop"]  # fmt: skip
    body = [[r["program"], ", ".join(f"{x:.2f}" for x in r["norm_ratio"]),
             r["formation_block"], ", ".join(map(str, r["late_layers"])),
             f"{r['late_p0_attention']:.2g}", ", ".join(r["named_heads"]) or "none",
             ", ".join(r["named_mlps"]) or "none", f"{r['largest_rise']:.3g}",
             f"{r['largest_drop']:.3g}"] for r in rows]  # fmt: skip
    return _table(header, body)


def truth_record(compiled, ablation: str) -> dict:
    runner = runner_for(compiled, ablation)
    declared = truth_mask(compiled, runner, ablation)
    used = used_mask(runner, declared)
    names = runner.space.edge_names()
    return {
        **circuit_faithfulness(compiled, ablation),
        "declared": [n for n, t in zip(names, declared.tolist(), strict=True) if t],
        "used": [n for n, t in zip(names, used.tolist(), strict=True) if t],
    }


def run(programs, out: Path) -> None:
    started = time.time()
    torch.set_num_threads(1)
    cells, truths, sinks, tracer, acdc = [], [], [], [], {}
    for name in programs:
        compiled = load_compiled(name)
        for ablation in ("zero", "resample"):
            truths.append(truth_record(compiled, ablation))
            for method in ALL_METHODS:
                cells.append(cell_dict(score_cell(compiled, ablation, method)))
                print(f"{name} {ablation} {method}: AUC {cells[-1]['auc_used']:.3f}", flush=True)
        sinks += [vars(r) for r in design_table(compiled)]
        traced = p0_tracer(compiled, task_tokens(compiled))
        tracer += [traced] if traced is not None else []
        if name in ACDC_TRUTH:
            derived = [e.name for e in zero_truth(compiled, split=True)]
            acdc[name] = {"acdc": list(ACDC_TRUTH[name]), "derived_split": derived,
                          "acdc_merged": merged(ACDC_TRUTH[name])}  # fmt: skip
    settings = {"programs": list(programs), "seed": SEED, "task_length": TASK_LENGTH,
                "methods": list(ALL_METHODS), "metric": "mse_to_clean (ACDC's L2)"}  # fmt: skip
    record = provenance(settings=settings, started=started)
    doc = {"cells": cells, "truth": truths, "design_sinks": sinks, "p0_tracer": tracer,
           "acdc": acdc,
           "published": {f"{a}/{p}": v for (a, p), v in PUBLISHED.items()}}  # fmt: skip
    with atomic_folder(out, {"report": "known answers"}, record) as tmp:
        write_json(tmp / "summary.json", stamped(doc, record))
        (tmp / "methods.md").write_text(methods_md(cells))
        (tmp / "truth.md").write_text(truth_md(truths))
        (tmp / "acdc.md").write_text(acdc_md())
        (tmp / "sinks.md").write_text(sinks_md(sinks))
        (tmp / "tracer.md").write_text(tracer_md(tracer))
    print(f"wrote {out}")


def planted_md(cells: list[dict]) -> str:
    header = ["model", "method", "edges", "true", "AUC", "P = R at true size", "missed",
              "added", "seconds"]  # fmt: skip
    rows = [[c["model"], c["method"], c["n_edges"], c["n_true"], f"{c['auc']:.3f}",
             f"{c['precision_at_true_size']:.2f}", ", ".join(c["missed"]) or "-",
             ", ".join(c["added"]) or "-", f"{c['seconds']:.1f}"] for c in cells]  # fmt: skip
    return _table(header, rows)


def planted_truth_md(checks: list[dict]) -> str:
    header = ["model", "late P0 attention: clean / planted edges only / none",
              "planted edges (exact effect alone)", "weakest planted effect (abs)",
              "strongest other edge (effect)", "other edges >= 1 % of the largest planted",
              "largest three of them (effect)"]  # fmt: skip
    rows = []
    for c in checks:
        others = [(o["edge"], o["effect"]) for o in c["others_used"]]
        rows.append([
            c["model"], f"{c['clean_metric']:.3f} / {c['planted_circuit_metric']:.3f} / "
            f"{c['empty_circuit_metric']:.3f}",
            ", ".join(f"{t['edge']} ({t['effect']:+.3f})" for t in c["true_effects"]),
            f"{c['weakest_true_effect']:.3f}",
            f"{c['strongest_other']} ({c['strongest_other_effect']:+.2g})", len(others),
            ", ".join(f"{n} ({v:+.3f})" for n, v in others[:3]) or "-",
        ])  # fmt: skip
    return _table(header, rows)


def run_planted(out: Path) -> None:
    """Every method on each planted P0-sink model against the planted edges."""
    started = time.time()
    torch.set_num_threads(1)
    cells, checks = [], []
    for name, planted in planted_models().items():
        runner, truth = planted_runner(planted), planted_truth(planted)
        checks.append({"model": name, **truth_check(runner, truth)})
        for method in ALL_METHODS:
            cells.append(cell_dict(score_planted(name, runner, truth, method)))
            print(f"{name} {method}: AUC {cells[-1]['auc']:.3f}", flush=True)
    settings = {"amplify": list(AMPLIFY), "seed": SEED, "n_tokens": N_TOKENS,
                "ablation": f"{ABLATION} at position 0", "methods": list(ALL_METHODS),
                "metric": "late P0 attention (p0_attention of the sink layers)"}  # fmt: skip
    record = provenance(settings=settings, started=started)
    with atomic_folder(out, {"report": "known answers, planted"}, record) as tmp:
        write_json(tmp / "summary.json", stamped({"cells": cells, "truth": checks}, record))
        (tmp / "methods.md").write_text(planted_md(cells))
        (tmp / "truth.md").write_text(planted_truth_md(checks))
    print(f"wrote {out}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None,
                        help=f"run folder (default {OUT.name}, or {PLANTED_OUT.name} with "
                        "--planted, under docs/ground_truth)")  # fmt: skip
    parser.add_argument("--programs", nargs="+", default=list(PROGRAMS), choices=PROGRAMS)
    parser.add_argument("--planted", action="store_true",
                        help="score the methods on the planted P0-sink models instead")  # fmt: skip
    args = parser.parse_args(argv)
    try:
        if args.planted:
            run_planted(args.out or PLANTED_OUT)
        else:
            run(args.programs, args.out or OUT)
    except ValueError as err:
        parser.exit(2, f"{err}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
