"""The stability study's tables in Markdown (docs/p0/stability/README.md), made from the CSVs
`p0_stability_analysis.analyse` writes: nothing here is typed by hand."""

from __future__ import annotations

import math

import pandas as pd

KINDS = ("prose", "code", "german", "table")


def num(x, fmt: str = ".2f") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return format(x, fmt)


def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def kinds_of(runs: pd.DataFrame) -> list[str]:
    found = [c[len("heldout_") :] for c in runs.columns if c.startswith("heldout_")]
    found = [k for k in found if k not in ("f",)]
    return sorted(found, key=lambda k: (KINDS.index(k) if k in KINDS else 99, k))


def runs_table(runs: pd.DataFrame, model: str) -> str:
    group = runs[runs.model == model]
    kinds = kinds_of(group)
    header = ["run", "edges", "rule fired", "fit f", "held-out f (95% CI)"]
    header += [f"held-out {k}" for k in kinds]
    header += ["old rule (fit f >= 0.8): edges", "its held-out f"]
    header += [f"its {k}" for k in kinds] + ["random", "complement", "seconds"]
    rows = []
    for r in group.itertuples():
        d = r._asdict()
        row = [r.variant, f"{r.edges:,}", str(r.rule_fired), num(r.fit_f),
               f"{num(r.heldout_f)} [{num(r.ci_low)}, {num(r.ci_high)}]"]  # fmt: skip
        row += [num(d.get(f"heldout_{k}")) for k in kinds]
        t_edges = d.get("target08_edges")
        row += [f"{int(t_edges):,}" if t_edges == t_edges and t_edges else "-",
                num(d.get("target08_heldout_all"))]  # fmt: skip
        row += [num(d.get(f"target08_heldout_{k}")) for k in kinds]
        row += [num(r.random_f, ".3f"), num(r.complement_f, ".3f"), num(r.seconds, ".0f")]
        rows.append(row)
    return md_table(header, rows)


def overlap_table(overlap: pd.DataFrame, model: str, level: str) -> str:
    """A matrix of Jaccard overlaps between the runs of `model` (`level`: edges or nodes)."""
    group = overlap[overlap.model == model]
    names = sorted(set(group.a) | set(group.b))
    value = {(r.a, r.b): getattr(r, f"{level}_jaccard") for r in group.itertuples()}
    rows = []
    for a in names:
        row = [a]
        for b in names:
            v = 1.0 if a == b else value.get((a, b), value.get((b, a)))
            row.append(num(v))
        rows.append(row)
    return md_table([f"{level} Jaccard", *names], rows)


def common_table(common: pd.DataFrame, model: str, most: int = 40) -> str:
    group = common[common.model == model]
    if group.empty:
        return "(no edge is in every split's circuit)"
    rows = [
        [r.edge, num(r.direct_mean, "+.4f"), f"{num(r.direct_min, '+.4f')} .. "
         f"{num(r.direct_max, '+.4f')}", f"{int(r.n_direct)}", num(r.estimated_mean, "+.4f"),
         num(r.stability_mean), "yes" if r.in_zero_ablation is True else
         ("no" if r.in_zero_ablation is False else "-")]
        for r in group.head(most).itertuples()
    ]  # fmt: skip
    more = f"\n\n({len(group) - most} more in common_edges.csv)" if len(group) > most else ""
    header = ["edge", "direct effect (mean)", "min .. max", "splits with an exact effect",
              "estimated effect (mean)", "stability (mean)", "in the zero ablation's circuit"]  # fmt: skip
    return md_table(header, rows) + more


def nodes_table(nodes: pd.DataFrame, model: str) -> str:
    group = nodes[nodes.model == model]
    if group.empty:
        return "(none)"
    n = int(group.n_splits.iloc[0])
    every = ", ".join(group[group.splits_with_it == n].node) or "none"
    some = ", ".join(f"{r.node} ({r.splits_with_it})" for r in
                     group[group.splits_with_it < n].itertuples()) or "none"  # fmt: skip
    return f"in all {n} splits: {every}; in some (number of splits): {some}"


def cross_table(cross: pd.DataFrame, model: str) -> str:
    group = cross[cross.model == model]
    if group.empty:
        return "(not measured yet)"
    names = sorted(set(group.circuit) | set(group.texts))
    cell = {(r.circuit, r.texts): r for r in group.itertuples()}
    rows = []
    for a in names:
        row = [a]
        for b in names:
            r = cell.get((a, b))
            row.append(f"{num(r.faithfulness)} [{num(r.ci_low)}, {num(r.ci_high)}]" if r else "-")
        rows.append(row)
    return md_table(["circuit \\ held-out texts of", *names], rows)


def unseen_table(unseen: pd.DataFrame, model: str) -> str:
    group = unseen[unseen.model == model]
    if group.empty:
        return "(not measured yet)"
    rows = [[r.kind, str(int(r.n_texts)), f"{num(r.faithfulness)} [{num(r.ci_low)}, "
             f"{num(r.ci_high)}]"] for r in group.itertuples()]  # fmt: skip
    return md_table(["kind", "texts", "f [95% CI]"], rows)


def markdown(tables: dict[str, pd.DataFrame], figures: dict) -> str:
    parts = [
        "# P0 circuit stability: five splits, two ablations (generated)",
        "",
        "Made by `python scripts/p0_stability.py analyse` from the run folders in this folder "
        "and `docs/p0/<model>/` (seed0); do not edit by hand. Each run is `circuits p0 --model "
        "M --edge-seed S` (seed S draws the fit / held-out split, stratified by kind; seed0 = "
        "`make demo`'s settings), `zero-seed0` adds `--edge-ablation zero`. Faithfulness f: "
        "(m(circuit) - m(empty)) / (m(model) - m(empty)) of the late P0 attention; the size "
        "rule (band_by_kind, fixed before these runs) keeps the smallest grown circuit whose "
        "FIT f lies in [0.9, 1.1] for every kind of fit text (4 fit texts a kind) and overall. "
        "'old rule' is the circuit the previous default (fit f >= 0.8) picks on the same curve "
        "(the curve is refined before both), judged on the same held-out texts.",
    ]
    for model in sorted(tables["runs"].model.unique()):
        fig = figures.get(model.replace(".", "_"), {})
        parts += [
            "", f"## {model}", "", runs_table(tables["runs"], model), "",
            f"Edge overlap between splits (Jaccard, mean {num(fig.get('edges_jaccard_mean'))}, "
            f"min {num(fig.get('edges_jaccard_min'))}, max {num(fig.get('edges_jaccard_max'))}):",
            "", overlap_table(tables["overlap"], model, "edges"), "",
            "Node-level view (circuit heads + MLPs of experiments 3-6), Jaccard:", "",
            overlap_table(tables["overlap"], model, "nodes"), "",
            "Node-level components: " + nodes_table(tables["common_nodes"], model), "",
            "Each split's circuit judged on each split's held-out texts (f [95% CI]; the "
            "diagonal is each run's own judgement):", "",
            cross_table(tables.get("cross", pd.DataFrame(columns=["model"])), model), "",
            "seed0's circuit on every text of the file that its split left out (neither fit "
            "nor held out), per kind:", "",
            unseen_table(tables.get("unseen", pd.DataFrame(columns=["model"])), model), "",
            f"Edges in every split's circuit ({fig.get('edges_in_every_split', 0)}), by mean "
            "|exact direct effect| (metric change when the edge alone is removed, on 2 fit "
            "texts, for the 100 edges of largest |score| of each circuit; negative = supports):",
            "", common_table(tables["common_edges"], model),
        ]  # fmt: skip
    return "\n".join(parts) + "\n"


__all__ = ["markdown"]
