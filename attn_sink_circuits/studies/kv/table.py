"""A policy table: every text scored under the full cache and each policy at each budget
(`KVRunConfig`), as a DataFrame, and the perplexity pooled over texts."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import pandas as pd
from jaxtyping import Int
from torch import Tensor

from attn_sink_circuits.studies.kv.config import KVRunConfig
from attn_sink_circuits.studies.kv.evaluate import score
from attn_sink_circuits.studies.kv.policies import READS_SINKS
from attn_sink_circuits.studies.kv.sinks import measured_sinks

COLUMNS = ("text", "kind", "policy", "budget", "perplexity", "nll", "n_scored", "mean_read",
           "seconds")  # fmt: skip


def policy_table(
    model,
    rows: Sequence[Int[Tensor, " _pos"]],
    run: KVRunConfig,
    kinds: Sequence[str] | None = None,
    progress=print,
) -> pd.DataFrame:
    """One row per text, policy and budget (the full cache once per text, at its length):
    `COLUMNS`. Sinks are measured once per text when a policy reads them; the table's
    `attrs["sinks"]` holds them (text -> per layer the positions kept, `layer_sinks`).
    `progress` (None: silent) gets one line per row."""
    kinds = list(kinds) if kinds is not None else ["text"] * len(rows)
    out, kept = [], {}
    for t, tokens in enumerate(rows):
        tokens = tokens[: run.tokens]
        needs_sinks = any(p in READS_SINKS for p in run.policies)
        sinks = measured_sinks(model, tokens.tolist(), run.kv) if needs_sinks else None
        if sinks is not None:
            kept[t] = sinks
        jobs = [("full", len(tokens))]
        jobs += [(p, b) for p in run.policies if p != "full" for b in run.budgets]
        for policy, budget in jobs:
            t0 = time.perf_counter()
            result = score(model, tokens, policy, budget, run.kv, sinks)
            row = {"text": t, "kind": kinds[t], **result.to_dict()}
            out.append({**row, "seconds": round(time.perf_counter() - t0, 2)})
            if progress:
                progress(f"text {t} {policy} budget {budget}: perplexity {result.perplexity:.3f}")
    table = pd.DataFrame(out, columns=list(COLUMNS))
    table.attrs["sinks"] = kept
    return table


def pooled(table: pd.DataFrame) -> pd.DataFrame:
    """Per policy and budget: the perplexity of every text's scored tokens together (exp of
    the token-weighted mean NLL) and the number of texts; the full cache's budget is "full"."""
    table = table.assign(budget=table.budget.where(table.policy != "full", -1))
    rows = []
    for (policy, budget), group in table.groupby(["policy", "budget"], sort=False):
        nll = (group.nll * group.n_scored).sum() / group.n_scored.sum()
        rows.append({"policy": policy, "budget": "full" if budget == -1 else int(budget),
                     "texts": len(group), "perplexity": math.exp(nll)})  # fmt: skip
    return pd.DataFrame(rows)


__all__ = ["COLUMNS", "policy_table", "pooled"]
