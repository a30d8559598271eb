"""The KV-cache policy figure: perplexity against the cache budget, one line per policy, the
full cache as a dotted line (a `attn_sink_circuits.studies.kv` table: columns policy, budget, nll, n_scored).
Policies take the category colours, never a role's blue or orange."""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, ScalarFormatter

from attn_sink_circuits.graph.convention import category_style


def pooled_perplexity(table: pd.DataFrame) -> float:
    """exp of the token-weighted mean NLL of the rows (every text's scored tokens together)."""
    return math.exp(float((table.nll * table.n_scored).sum() / table.n_scored.sum()))


def budget_figure(table: pd.DataFrame, title: str) -> Figure:
    """Perplexity (pooled over the table's texts) against the budget, per policy; log axes."""
    fig = Figure(figsize=(5.2, 3.8), layout="constrained")
    ax = fig.add_subplot()
    policies = [p for p in dict.fromkeys(table.policy) if p != "full"]
    for i, policy in enumerate(policies):
        rows = table[table.policy == policy]
        points = [(b, pooled_perplexity(g)) for b, g in rows.groupby("budget")]
        ax.plot(*zip(*points, strict=True), label=policy, **category_style(i + 1))
    full = table[table.policy == "full"]
    if len(full):
        ax.axhline(pooled_perplexity(full), color="0.3", ls=":", lw=1, label="full cache")
    ax.set(xscale="log", yscale="log", title=title, xlabel="cached tokens a query reads (budget)",
           ylabel="perplexity of the scored tokens")  # fmt: skip
    budgets = sorted({int(b) for b in table[table.policy != "full"].budget})
    ax.set_xticks(budgets, [str(b) for b in budgets])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(ScalarFormatter())
    ax.legend(fontsize=7)
    return fig


__all__ = ["budget_figure", "pooled_perplexity"]
