"""What stays and what moves in the P0 circuit across fit / held-out splits and edge ablations
(`scripts/p0_stability.py analyse`): on the finished runs under ROOT/<model>/<variant>/,

- runs.csv: per run its circuit (edges, components, the size rule that fired), faithfulness
  (fit; held-out with its 95% interval; per kind of held-out text; random; complement), the
  circuit the old rule (fit f >= 0.8) would have kept on the same curve with its held-out f per
  kind, the node-level view (heads, MLPs) and the run's seconds;
- overlap.csv: Jaccard overlap of every pair of runs of a model, for the edges and for the
  node-level heads + MLPs;
- common_edges.csv: the edges in the circuit of every split (mean ablation), with their exact
  direct effects (mean, min, max over the splits where computed) and whether the zero
  ablation's circuit has them; common_nodes.csv the same for the node-level view;
- cross.csv: each split's saved circuit graph judged on every split's held-out texts
  (`attn_sink_circuits.discovery.saved.judge_saved`; the diagonal repeats each run's own judgement);
- stability.json: the per-model figures the docs quote; README.md: the tables in Markdown.

Reads the run folders only (and, for cross.csv, the models), so it can be re-run at any time.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from p0_stability_judge import SEEDS, cross_rows

from attn_sink_circuits.runs.io import stored, write_csv, write_json

ABLATIONS = ("seed0", "zero-seed0")
COMMON_TOP = 8
"""Edges of every split named in stability.json (the strongest by mean |direct effect|)."""
RULES = {"band_by_kind": None, "target": 0.8}


def edge_names(frame: pd.DataFrame) -> set[str]:
    return set(frame.sender + "->" + frame.receiver)


def load_runs(root: Path) -> dict[str, dict[str, dict]]:
    """{model: {variant: run}} of the finished runs: summary (the "summary" part), settings,
    provenance, edges (edge_circuit.csv), by_kind (heldout_by_kind.csv), curve
    (faithfulness_curve_by_kind.csv) and folder."""
    runs: dict[str, dict[str, dict]] = {}
    for path in sorted(root.glob("*/*/summary.json")):
        doc = json.loads(path.read_text())
        folder = path.parent
        runs.setdefault(folder.parent.name, {})[folder.name] = {
            "folder": folder,
            "doc": doc,
            "summary": doc["summary"],
            "edges": pd.read_csv(stored(folder / "edge_circuit.csv")),
            "by_kind": pd.read_csv(stored(folder / "heldout_by_kind.csv")),
            "curve": pd.read_csv(stored(folder / "faithfulness_curve_by_kind.csv")),
        }
    return runs


def rule_circuit(curve: pd.DataFrame, target: float | None, band=(0.9, 1.1)) -> pd.DataFrame:
    """The grown circuit a rule keeps on a run's curve by kind (rows of that circuit, one per
    kind): target None = band_by_kind (fit f in band for every kind), else fit f >= target."""
    grown = curve[curve.source.str.endswith("growth")]
    fit = grown.pivot_table(index="top_n", columns="kind", values="faithfulness_fit")
    if target is None:
        ok = ((fit >= band[0]) & (fit <= band[1]) | fit.isna()).all(axis=1)
    else:
        ok = fit["all"] >= target
    if not ok.any():
        return grown.iloc[0:0]
    return grown[grown.top_n == ok[ok].index[0]]


def run_row(model: str, variant: str, run: dict) -> dict:
    s = run["summary"]
    row = {
        "model": model, "variant": variant, "edges": s["edge_circuit_edges"],
        "components": s["edge_circuit_components"], "rule_fired": s.get("size_rule_fired"),
        "fit_f": s["fit_faithfulness"], "heldout_f": s["heldout_faithfulness"],
        "ci_low": s["heldout_faithfulness_ci"][0], "ci_high": s["heldout_faithfulness_ci"][1],
        "random_f": s["random_faithfulness_mean"], "complement_f": s["complement_faithfulness"],
    }  # fmt: skip
    for kind, k in s["heldout_by_kind"].items():
        if kind != "all":
            row[f"heldout_{kind}"] = k["faithfulness"]
    for r in rule_circuit(run["curve"], RULES["band_by_kind"]).itertuples():
        row[f"fit_{r.kind}"] = r.faithfulness_fit  # the chosen circuit's, per kind of fit text
    old = rule_circuit(run["curve"], RULES["target"])
    if len(old):
        row["target08_edges"] = int(old.n_edges.iloc[0])
        for r in old.itertuples():
            row[f"target08_heldout_{r.kind}"] = r.faithfulness_heldout
    row["node_heads"] = " ".join(s["node_circuit_heads"])
    row["node_mlps"] = " ".join(s["node_circuit_mlps"])
    row["seconds"] = round(sum(run["doc"].get("seconds", {}).values()), 1)
    return row


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else math.nan


def node_set(run: dict) -> set[str]:
    s = run["summary"]
    return set(s["node_circuit_heads"]) | set(s["node_circuit_mlps"])


OVERLAP_COLUMNS = ["model", "a", "b", "edges_a", "edges_b", "edges_common", "edges_jaccard",
                   "nodes_a", "nodes_b", "nodes_common", "nodes_jaccard"]  # fmt: skip


def overlap_rows(model: str, runs: dict[str, dict]) -> list[dict]:
    rows = []
    for a, b in itertools.combinations(sorted(runs), 2):
        ea, eb = edge_names(runs[a]["edges"]), edge_names(runs[b]["edges"])
        na, nb = node_set(runs[a]), node_set(runs[b])
        rows.append(
            {
                "model": model, "a": a, "b": b, "edges_a": len(ea), "edges_b": len(eb),
                "edges_common": len(ea & eb), "edges_jaccard": jaccard(ea, eb),
                "nodes_a": len(na), "nodes_b": len(nb), "nodes_common": len(na & nb),
                "nodes_jaccard": jaccard(na, nb),
            }
        )  # fmt: skip
    return rows


def common_edges(model: str, runs: dict[str, dict]) -> pd.DataFrame:
    """The edges in every split's circuit (mean ablation; at least two splits), strongest mean
    |direct effect| first."""
    splits = [v for v in SEEDS if v in runs]
    frames = [runs[v]["edges"].assign(variant=v) for v in splits]
    names = set.intersection(*(edge_names(f) for f in frames)) if len(frames) >= 2 else set()
    if not names:
        return pd.DataFrame()
    all_rows = pd.concat(frames)
    all_rows["edge"] = all_rows.sender + "->" + all_rows.receiver
    kept = all_rows[all_rows.edge.isin(names)]
    table = kept.groupby("edge").agg(
        direct_mean=("direct_effect", "mean"), direct_min=("direct_effect", "min"),
        direct_max=("direct_effect", "max"), n_direct=("direct_effect", "count"),
        estimated_mean=("estimated_effect", "mean"), stability_mean=("stability", "mean"),
    )  # fmt: skip
    zero = runs.get("zero-seed0")
    table["in_zero_ablation"] = table.index.isin(edge_names(zero["edges"])) if zero else np.nan
    table.insert(0, "model", model)
    table["n_splits"] = len(splits)
    order = table.direct_mean.abs().fillna(0) + table.estimated_mean.abs() * 1e-9
    return table.loc[order.sort_values(ascending=False).index].reset_index()


def common_nodes(model: str, runs: dict[str, dict]) -> pd.DataFrame:
    splits = [v for v in SEEDS if v in runs]
    counts: dict[str, int] = {}
    for v in splits:
        for node in node_set(runs[v]):
            counts[node] = counts.get(node, 0) + 1
    rows = [{"model": model, "node": n, "splits_with_it": c, "n_splits": len(splits)}
            for n, c in counts.items()]  # fmt: skip
    return pd.DataFrame(rows).sort_values(["splits_with_it", "node"], ascending=[False, True])


def judgements(runs: dict, out: Path, judge: dict | None) -> dict[str, pd.DataFrame]:
    """cross.csv and unseen.csv: what `out` holds already, with (when `judge`) the missing
    judgements made (`cross_rows` with the options `judge`) and the diagonal taken from each
    run's own summary."""
    old = {n: pd.read_csv(p) if (p := stored(out / f"{n}.csv")).exists() else pd.DataFrame()
           for n in ("cross", "unseen")}  # fmt: skip
    cross = old["cross"]
    cross = cross[cross.circuit != cross.texts] if len(cross) else cross
    new_cross, new_unseen = [], []
    for m in runs if judge else []:
        done = set()
        if len(cross):
            mine = cross[cross.model == m]
            done |= set(zip(mine.circuit, mine.texts, strict=True))
        if len(old["unseen"]):
            done |= {("unseen", c) for c in old["unseen"][old["unseen"].model == m].circuit}
        rows, unseen = cross_rows(m, runs[m], done, judge)
        new_cross += rows
        new_unseen += unseen
    diagonal = [{"model": m, "circuit": v, "texts": v, "faithfulness": r["summary"][
        "heldout_faithfulness"], "ci_low": r["summary"]["heldout_faithfulness_ci"][0],
        "ci_high": r["summary"]["heldout_faithfulness_ci"][1], "n_edges": r["summary"][
        "edge_circuit_edges"]} for m in runs for v, r in runs[m].items() if v in SEEDS]  # fmt: skip
    frames = [f for f in (cross, pd.DataFrame(new_cross), pd.DataFrame(diagonal)) if len(f)]
    unseen = [f for f in (old["unseen"], pd.DataFrame(new_unseen)) if len(f)]
    return {
        "cross": pd.concat(frames).sort_values(["model", "circuit", "texts"]) if frames
        else pd.DataFrame(), "unseen": pd.concat(unseen) if unseen else pd.DataFrame(),
    }  # fmt: skip


def analyse(root: Path, out: Path, judge: dict | None) -> dict:
    """Every table of the module docstring from the runs under `root`, into `out`."""
    runs = load_runs(root)
    out.mkdir(parents=True, exist_ok=True)
    rows = [run_row(m, v, r) for m in runs for v, r in sorted(runs[m].items())]
    overlap = [r for m in runs for r in overlap_rows(m, runs[m])]
    common = [common_edges(m, runs[m]) for m in runs]
    nodes = [common_nodes(m, runs[m]) for m in runs]
    tables = {
        "runs": pd.DataFrame(rows),
        "overlap": pd.DataFrame(overlap, columns=OVERLAP_COLUMNS),
        "common_edges": pd.concat(common) if common else pd.DataFrame(),
        "common_nodes": pd.concat(nodes) if nodes else pd.DataFrame(),
    }
    tables.update(judgements(runs, out, judge))
    for name, frame in tables.items():
        write_csv(out / f"{name}.csv", frame, lean=True)
    figures = stability_figures(tables)
    write_json(out / "stability.json", figures)
    return tables


def slug(model: str) -> str:
    """A model key make_docs' dotted paths can name (qwen2.5-0.5b -> qwen2_5-0_5b)."""
    return model.replace(".", "_")


def finite(doc: dict) -> dict:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in doc.items()}


def split_figures(model: str, tables: dict[str, pd.DataFrame]) -> dict:
    """Across the splits (seeds, mean ablation): their number, edges and held-out f (min, max),
    Jaccard (edges: mean, min, max; nodes: mean), edges in every split, cross-split f off the
    diagonal (mean, min, max)."""
    runs, overlap = tables["runs"], tables["overlap"]
    splits = runs[(runs.model == model) & runs.variant.isin(SEEDS)]
    pairs = overlap[(overlap.model == model) & overlap.a.isin(SEEDS) & overlap.b.isin(SEEDS)]
    if not len(pairs):
        return {"n_splits": len(splits)}
    common = tables["common_edges"]
    fig = {
        "n_splits": len(splits),
        "edges_min": int(splits.edges.min()), "edges_max": int(splits.edges.max()),
        "heldout_f_min": float(splits.heldout_f.min()),
        "heldout_f_max": float(splits.heldout_f.max()),
        "edges_jaccard_mean": float(pairs.edges_jaccard.mean()),
        "edges_jaccard_min": float(pairs.edges_jaccard.min()),
        "edges_jaccard_max": float(pairs.edges_jaccard.max()),
        "nodes_jaccard_mean": float(pairs.nodes_jaccard.mean()),
        "nodes_jaccard_min": float(pairs.nodes_jaccard.min()),
        "target08_edges_min": int(splits.target08_edges.min()),
        "target08_edges_max": int(splits.target08_edges.max()),
        "target08_heldout_min": float(splits.target08_heldout_all.min()),
        "target08_heldout_max": float(splits.target08_heldout_all.max()),
        "edges_in_every_split": int((common.model == model).sum()) if len(common) else 0,
    }  # fmt: skip
    cross = tables.get("cross")
    if cross is not None and len(cross):
        off = cross[(cross.model == model) & (cross.circuit != cross.texts)]
        if len(off):
            fig.update(cross_pairs=len(off), cross_f_mean=float(off.faithfulness.mean()),
                       cross_f_min=float(off.faithfulness.min()),
                       cross_f_max=float(off.faithfulness.max()))  # fmt: skip
    return fig


def stability_figures(tables: dict[str, pd.DataFrame]) -> dict:
    """Per model (`slug`): `split_figures`; "seed0" and "zero" (the two ablations at seed 0):
    each run's row of runs.csv (edges, f, per-kind held-out f, the old rule's circuit on its
    curve); "zero_jaccard_edges" / "_nodes": the two ablations' overlap."""
    out: dict = {}
    runs, overlap = tables["runs"], tables["overlap"]
    for model in sorted(runs.model.unique()):
        fig = split_figures(model, tables)
        rows = runs[runs.model == model].set_index("variant")
        for variant, name in (("seed0", "seed0"), ("zero-seed0", "zero")):
            if variant in rows.index:
                fig[name] = finite(rows.loc[variant].drop("model").to_dict())
        pair = overlap[(overlap.model == model) & (overlap.a == "seed0")
                       & (overlap.b == "zero-seed0")]  # fmt: skip
        if len(pair):
            fig["zero_jaccard_edges"] = float(pair.edges_jaccard.iloc[0])
            fig["zero_jaccard_nodes"] = float(pair.nodes_jaccard.iloc[0])
        unseen = tables.get("unseen")
        if unseen is not None and len(unseen):
            fig["unseen"] = {r.kind: finite({"n_texts": int(r.n_texts), "f": r.faithfulness,
                                             "ci": [r.ci_low, r.ci_high]})
                             for r in unseen[unseen.model == model].itertuples()}  # fmt: skip
        common = tables["common_edges"]
        if len(common) and fig.get("n_splits", 0) >= 2:
            top = common[common.model == model].head(COMMON_TOP)
            fig["common_top"] = [finite({"edge": r.edge, "direct_mean": r.direct_mean,
                                         "n_direct": int(r.n_direct)})
                                 for r in top.itertuples()]  # fmt: skip
        out[slug(model)] = finite(fig)
    return out


__all__ = ["analyse", "load_runs", "rule_circuit"]
