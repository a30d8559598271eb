"""The stability study's judgements with the models (`p0_stability_analysis.analyse`): each
split's saved circuit on every split's held-out texts, and seed 0's on the texts its split left
out, per kind; the texts come from the file and indices each run's provenance records."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ("seed0", "seed1", "seed2", "seed3", "seed4")


def run_texts(run: dict) -> tuple[list[str], list[str], dict]:
    """All texts and kinds of the file a run read (a snapshot's file that is gone is read from
    this checkout's data/texts/ of the same name; its sha256 must be the one recorded), and
    the run's texts record (fit / held-out indices)."""
    from attn_sink_circuits.discovery.texts import read_kinded_texts
    from attn_sink_circuits.runs.provenance import texts_sha256

    record = run["doc"]["provenance"]["texts"]
    source = Path(record["source"])
    if not source.is_file():
        source = ROOT / "data" / "texts" / source.name
    texts, kinds = read_kinded_texts(source)
    if texts_sha256(texts, kinds) != record["sha256"]:
        raise ValueError(f"{source}: not the texts {run['folder']} ran on (sha256 differs)")
    return texts, kinds, record


def heldout_texts(run: dict) -> list[str]:
    texts, _, record = run_texts(run)
    return [texts[i] for i in record["heldout_indices"]]


def unseen_rows(model, model_key: str, run: dict, variant: str) -> list[dict]:
    """The run's circuit judged, per kind, on every text of its file that it neither fitted
    nor was judged on (the texts a split leaves out)."""
    from attn_sink_circuits.discovery.saved import judge_saved
    from attn_sink_circuits.graph import read

    texts, kinds, record = run_texts(run)
    used = set(record["fit_indices"]) | set(record["heldout_indices"])
    graph = read(run["folder"] / "circuit.graphml")
    rows = []
    for kind in dict.fromkeys(kinds):
        chosen = [t for i, (t, k) in enumerate(zip(texts, kinds, strict=True))
                  if k == kind and i not in used]  # fmt: skip
        r = judge_saved(model, graph, chosen, n_random=0, n_boot=1000, seed=0)
        rows.append({"model": model_key, "circuit": variant, "kind": kind, "n_texts": len(chosen),
                     "faithfulness": r["faithfulness"], "ci_low": r["faithfulness_ci"][0],
                     "ci_high": r["faithfulness_ci"][1]})  # fmt: skip
    return rows


def cross_rows(model_key: str, runs: dict[str, dict], done: set, options: dict) -> tuple:
    """Each split's circuit (mean ablation) judged on every other split's held-out texts, and
    seed 0's on the texts its split left out (`unseen_rows`), skipping what `done` holds:
    (circuit, texts) pairs, and ("unseen", variant). The diagonal is each run's own judgement
    (the same texts, ablation and seed: it repeats its held-out f to every digit). `options`:
    "pairs" ("all", or "seed0": only the pairs with seed 0's circuit or texts, 2 (n - 1) of
    n (n - 1)), "unseen" (the models to judge on the left-out texts)."""
    import torch

    from attn_sink_circuits.discovery.saved import judge_saved
    from attn_sink_circuits.graph import read
    from attn_sink_circuits.models import load_model

    torch.set_num_threads(1)
    splits = [v for v in SEEDS if v in runs]
    todo = [(a, b) for a in splits for b in splits if a != b and (a, b) not in done
            and (options["pairs"] == "all" or "seed0" in (a, b))]  # fmt: skip
    first = ("unseen", splits[0]) if splits and model_key in options["unseen"] else None
    if not todo and (first is None or first in done):
        return [], []
    model = load_model(model_key)
    unseen = (
        []
        if first is None or first in done
        else unseen_rows(model, model_key, runs[splits[0]], splits[0])
    )
    texts = {v: heldout_texts(runs[v]) for v in splits}
    rows = []
    for a, b in todo:
        graph = read(runs[a]["folder"] / "circuit.graphml")
        r = judge_saved(model, graph, texts[b], n_random=0, n_boot=1000, seed=0)
        rows.append({"model": model_key, "circuit": a, "texts": b,
                     "faithfulness": r["faithfulness"], "ci_low": r["faithfulness_ci"][0],
                     "ci_high": r["faithfulness_ci"][1], "n_edges": r["n_edges"]})  # fmt: skip
    return rows, unseen


__all__ = ["cross_rows", "heldout_texts", "run_texts", "unseen_rows"]
