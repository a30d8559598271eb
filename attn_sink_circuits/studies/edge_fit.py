"""The one edge-circuit step every tracer runs: split its items (texts, traces) into fit and
held-out ones, discover the circuit on the fit items (`attn_sink_circuits.discovery.discover`), judge it
on the held-out ones, also by kind of text (`attn_sink_circuits.discovery.kinds`; the size rule and the
curve by kind see the kinds of the fit and held-out items), and turn it into a circuit graph. A tracer says only what its items are (`EdgeTask`); the settings are its
config's `edge` field (`EdgeFitConfig`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import networkx as nx
import pandas as pd
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.discovery import EdgeCircuit, circuit_graph, discover
from attn_sink_circuits.discovery.kinds import judge_by_kind
from attn_sink_circuits.discovery.texts import split_indices
from attn_sink_circuits.patching.metrics import Metric
from attn_sink_circuits.studies.edge_config import MIN_TEXTS, EdgeFitConfig

Positions = list[int] | list[list[int]]
"""Where edges are ablated: the same positions in every item, or one list per item."""


@dataclass(frozen=True)
class EdgeTask:
    """What a tracer fits its edge circuit to. `kinds`: one per item (its text kind); `rows`:
    item indices -> their token rows [n, n_tokens] and where edges are ablated in them;
    `metric`: those positions -> the metric; `spec`: the metric as the graph records it
    (`attn_sink_circuits.discovery.saved.METRICS`); `units` names the items ("texts", "traces"); `note`
    follows the data description; `first`: the token id at P0 when the tracer put one there;
    `up_to`: n_fit / n_heldout are upper bounds (with fewer items half are held out)."""

    kinds: Sequence[str]
    rows: Callable[[list[int]], tuple[Tensor, Positions]]
    metric: Callable[[Positions], Metric]
    spec: dict
    units: str = "texts"
    note: str = ""
    first: int | None = None
    up_to: bool = False


@dataclass
class EdgeFit:
    """An edge circuit with the split it was fitted and judged on (`fit_items`, `heldout_items`:
    item indices) and its held-out judgement by kind (`by_kind`, `judge_by_kind`)."""

    circuit: EdgeCircuit
    graph: nx.DiGraph
    by_kind: pd.DataFrame
    fit_items: list[int]
    heldout_items: list[int]


def edge_split(
    kinds: Sequence[str], config: EdgeFitConfig, up_to: bool = False
) -> tuple[list[int], list[int]]:
    """The fit and held-out item indices `fit_edges` uses (`split_indices` with the config's
    sizes and seed); with `up_to`, at most half of the items are held out and the sizes are
    upper bounds."""
    n_fit, n_held = config.n_fit, config.n_heldout
    if up_to:
        n_held = min(n_held, len(kinds) // 2)
        n_fit = min(n_fit, len(kinds) - n_held)
    if min(n_fit, n_held) < MIN_TEXTS:
        raise ValueError(
            f"{len(kinds)} items give {n_fit} fit + {n_held} held-out; each needs at least "
            f"{MIN_TEXTS}"
        )
    return split_indices(kinds, n_fit, n_held, config.discovery.seed)


def fit_edges(
    model: TransformerBridge, task: EdgeTask, config: EdgeFitConfig, progress: bool = False
) -> EdgeFit:
    """Split -> discover -> judge (overall and by kind) -> graph, as the module docstring says;
    with `progress`, a bar over discover's phases."""
    fit_items, held_items = edge_split(task.kinds, config, task.up_to)
    fit, fit_pos = task.rows(fit_items)
    held, held_pos = task.rows(held_items)
    per_item = bool(fit_pos) and isinstance(fit_pos[0], list)
    held_kinds = [task.kinds[i] for i in held_items]
    circuit = discover(
        model, fit, held, task.metric, positions=fit_pos,
        heldout_positions=held_pos if per_item else None, config=config.discovery,
        progress=progress, kinds=([task.kinds[i] for i in fit_items], held_kinds),
    )  # fmt: skip
    by_kind = judge_by_kind(model, circuit, held, held_pos, task.metric(held_pos), held_kinds)
    data = (
        f"{len(fit_items)} fit + {len(held_items)} held-out {task.units} x "
        f"{config.n_tokens} tokens{task.note}"
    )
    graph = circuit_graph(circuit, model, data=data, metric_spec=task.spec, first_token=task.first)
    return EdgeFit(circuit, graph, by_kind, fit_items, held_items)


__all__ = ["EdgeFit", "EdgeTask", "Positions", "edge_split", "fit_edges"]
