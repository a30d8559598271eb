"""The held-out judgement of a circuit split by the kind of text (prose, code, a language ...), so
a reader sees where a circuit fitted on a mix transfers and where not."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from jaxtyping import Int
from torch import Tensor

from attn_sink_circuits.discovery.evaluation import (
    bootstrap_interval,
    evaluate,
    faithfulness,
    random_masks,
)
from attn_sink_circuits.discovery.forward import EdgeRunner
from attn_sink_circuits.discovery.pipeline import EdgeCircuit
from attn_sink_circuits.discovery.size_rule import ALL  # the row of every held-out text together
from attn_sink_circuits.patching.metrics import Metric


def judge_by_kind(
    model,
    circuit: EdgeCircuit,
    tokens: Int[Tensor, "heldout pos"],
    positions: Sequence[int] | Sequence[Sequence[int]],
    metric: Metric,
    kinds: Sequence[str],
) -> pd.DataFrame:
    """One row per kind of held-out text (in order of first appearance), then `ALL`: n_texts,
    the circuit's faithfulness on those texts with its bootstrap interval, |1 - f| (0 is a
    circuit that reproduces the model, MIB's CMD convention), and the same-size random circuits'
    faithfulness (mean, sd). The same runs as the circuit's held-out judgement (same ablation,
    random circuits and seeds), split by the texts' `kinds`."""
    cfg = circuit.config
    if len(kinds) != tokens.shape[0]:
        raise ValueError(f"{len(kinds)} kinds for {tokens.shape[0]} held-out texts; give one each")
    runner = EdgeRunner(
        model, tokens, metric, positions=positions, ablation=cfg.ablation, seed=cfg.seed
    )
    n_edges = runner.space.n_edges
    empty = torch.zeros(n_edges, dtype=torch.bool)
    rand = random_masks(n_edges, circuit.n_edges, cfg.n_random, cfg.seed)
    masks = torch.stack([empty, circuit.mask, *rand])
    values = evaluate(runner, masks, batch_size=cfg.batch_size).numpy()
    model_v = runner.clean.metric.numpy()
    kinds = np.asarray(kinds)
    rows = []
    for kind in [*dict.fromkeys(kinds.tolist()), ALL]:
        sel = kinds == kind if kind != ALL else np.ones(len(kinds), dtype=bool)
        m, e, c = model_v[sel], values[0, sel], values[1, sel]
        f = faithfulness(c, m, e)
        lo, hi = bootstrap_interval(c, m, e, n_boot=cfg.n_boot, seed=cfg.seed)
        rand_f = [faithfulness(v[sel], m, e) for v in values[2:]]
        rows.append(
            {
                "kind": kind,
                "n_texts": int(sel.sum()),
                "heldout_faithfulness": f,
                "ci_low": lo,
                "ci_high": hi,
                "abs_1_minus_f": abs(1 - f),
                "random_mean": float(np.mean(rand_f)) if rand_f else np.nan,
                "random_sd": float(np.std(rand_f)) if rand_f else np.nan,
                "model_metric": float(m.mean()),
                "empty_metric": float(e.mean()),
            }
        )
    return pd.DataFrame(rows)


__all__ = ["ALL", "judge_by_kind"]
