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
  (`circuits.discovery.saved.judge_saved`; the diagonal repeats each run's own judgement);
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

from circuits._io import write_csv, write_json

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ("seed0", "seed1", "seed2", "seed3", "seed4")
ABLATIONS = ("seed0", "zero-seed0")
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
            "edges": pd.read_csv(folder / "edge_circuit.csv"),
            "by_kind": pd.read_csv(folder / "heldout_by_kind.csv"),
            "curve": pd.read_csv(folder / "faithfulness_curve_by_kind.csv"),
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
    """The edges in every split's circuit (mean ablation), strongest mean |direct effect|
    first."""
    splits = [v for v in SEEDS if v in runs]
    frames = [runs[v]["edges"].assign(variant=v) for v in splits]
    names = set.intersection(*(edge_names(f) for f in frames)) if frames else set()
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


def heldout_texts(run: dict) -> list[str]:
    """The run's held-out texts, from the texts file and indices its provenance records (a
    snapshot's file that is gone is read from this checkout's data/texts/ of the same name);
    the texts' sha256 must be the one recorded."""
    from circuits.discovery.texts import read_kinded_texts
    from circuits.provenance import texts_sha256

    record = run["doc"]["provenance"]["texts"]
    source = Path(record["source"])
    if not source.is_file():
        source = ROOT / "data" / "texts" / source.name
    texts, kinds = read_kinded_texts(source)
    if texts_sha256(texts, kinds) != record["sha256"]:
        raise ValueError(f"{source}: not the texts {run['folder']} ran on (sha256 differs)")
    return [texts[i] for i in record["heldout_indices"]]


def cross_rows(model_key: str, runs: dict[str, dict], threads: int = 1) -> list[dict]:
    """Each split's circuit (mean ablation) judged on every split's held-out texts."""
    import torch

    from circuits.discovery.saved import judge_saved
    from circuits.graph import read
    from circuits.models import load_model

    torch.set_num_threads(threads)
    splits = [v for v in SEEDS if v in runs]
    if len(splits) < 2:
        return []
    model = load_model(model_key)
    texts = {v: heldout_texts(runs[v]) for v in splits}
    rows = []
    for a in splits:
        graph = read(runs[a]["folder"] / "circuit.graphml")
        for b in splits:
            r = judge_saved(model, graph, texts[b], n_random=0, n_boot=1000, seed=0)
            rows.append({"model": model_key, "circuit": a, "texts": b,
                         "faithfulness": r["faithfulness"], "ci_low": r["faithfulness_ci"][0],
                         "ci_high": r["faithfulness_ci"][1], "n_edges": r["n_edges"]})  # fmt: skip
    return rows


def analyse(root: Path, out: Path, cross: bool = True) -> dict:
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
    if cross:
        tables["cross"] = pd.DataFrame([r for m in runs for r in cross_rows(m, runs[m])])
    elif (out / "cross.csv").exists():
        tables["cross"] = pd.read_csv(out / "cross.csv")
    for name, frame in tables.items():
        write_csv(out / f"{name}.csv", frame)
    figures = stability_figures(tables)
    write_json(out / "stability.json", figures)
    return tables


def stability_figures(tables: dict[str, pd.DataFrame]) -> dict:
    """Per model: the splits, mean / min / max Jaccard between splits (edges, nodes), edges in
    every split, cross-split faithfulness (off the diagonal: mean, min, max)."""
    out: dict = {}
    runs, overlap = tables["runs"], tables["overlap"]
    for model, group in runs.groupby("model"):
        splits = group[group.variant.isin(SEEDS)]
        pairs = overlap[(overlap.model == model) & overlap.a.isin(SEEDS) & overlap.b.isin(SEEDS)]
        common = tables["common_edges"]
        if not len(pairs):
            continue
        fig = {
            "n_splits": len(splits),
            "edges_min": int(splits.edges.min()), "edges_max": int(splits.edges.max()),
            "heldout_f_min": float(splits.heldout_f.min()),
            "heldout_f_max": float(splits.heldout_f.max()),
            "edges_jaccard_mean": float(pairs.edges_jaccard.mean()),
            "edges_jaccard_min": float(pairs.edges_jaccard.min()),
            "edges_jaccard_max": float(pairs.edges_jaccard.max()),
            "nodes_jaccard_mean": float(pairs.nodes_jaccard.mean()),
            "edges_in_every_split": int((common.model == model).sum()) if len(common) else 0,
        }  # fmt: skip
        cross = tables.get("cross")
        if cross is not None and len(cross):
            off = cross[(cross.model == model) & (cross.circuit != cross.texts)]
            fig.update(cross_f_mean=float(off.faithfulness.mean()),
                       cross_f_min=float(off.faithfulness.min()),
                       cross_f_max=float(off.faithfulness.max()))  # fmt: skip
        out[model] = {k: (None if isinstance(v, float) and math.isnan(v) else v)
                      for k, v in fig.items()}  # fmt: skip
    return out


__all__ = ["analyse", "load_runs", "rule_circuit"]
