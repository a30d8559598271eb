"""The model's own IOI behaviour and its heads beside an IOI circuit: the logit difference
logit(IO) - logit(S) on clean and corrupted prompts (`behaviour`), and every head's attention,
direct effect, copy score and name-mover verdict (`attn_sink_circuits.studies.ioi.name_movers`)
with its direct edges in the circuit (`head_table`)."""

from __future__ import annotations

import torch

from attn_sink_circuits.discovery.pairs import Pairs
from attn_sink_circuits.studies.ioi.name_movers import name_mover_table


def behaviour(model, *pairs: Pairs) -> dict:
    """The model's own logit(IO) - logit(S) at each pair's last real position on the clean and
    corrupted prompts of all `pairs`: mean, sd and the share of pairs where IO is above S
    (`{kind}_logit_diff_mean`, `{kind}_logit_diff_sd`, `{kind}_io_above_s`)."""
    out = {}
    with torch.no_grad():
        for kind in ("clean", "corrupt"):
            diff = torch.cat([_logit_diff(model, p, getattr(p, kind)) for p in pairs])
            out[f"{kind}_logit_diff_mean"] = float(diff.mean())
            out[f"{kind}_logit_diff_sd"] = float(diff.std())
            out[f"{kind}_io_above_s"] = float((diff > 0).float().mean())
    return out


def _logit_diff(model, pairs: Pairs, tokens) -> torch.Tensor:
    rows = torch.arange(len(pairs))
    last = torch.full_like(rows, tokens.shape[1] - 1) if pairs.last is None else pairs.last
    logits = model(tokens)[rows, last]
    return logits[rows, pairs.answer] - logits[rows, pairs.wrong]


def head_table(model, graph, pairs: Pairs) -> list[dict]:
    """Every head of the model on `pairs` (`name_mover_table`: attention from the last position
    to IO / S1 / S2, direct effect on logit(IO) - logit(S), copy score, name-mover verdict),
    with its direct edges in the circuit `graph`: how many it sends (`edges_out`), how many
    into the logits (`to_logits`) and their summed score (`to_logits_score`: minus the
    estimated effect, positive when the edges support logit(IO) - logit(S)); largest
    |to_logits_score| first. The heads' attention is read at the last position: unpadded
    pairs only."""
    if pairs.last is not None:
        raise ValueError(
            "the heads' table reads the last position; give unpadded pairs (protocol library)"
        )
    cfg = model.cfg
    every = [(layer, h) for layer in range(cfg.n_layers) for h in range(cfg.n_heads)]
    rows = name_mover_table(model, pairs, every)
    for row in rows:
        row.update(in_circuit=False, edges_out=0, to_logits=0, to_logits_score=0.0)
    by_name = {row["head"]: row for row in rows}
    for sender, receiver, d in graph.edges(data=True):
        if d.get("edge_kind") != "direct" or sender not in by_name:
            continue
        row = by_name[sender]
        row["in_circuit"] = True
        row["edges_out"] += 1
        if receiver.startswith("target:"):
            row["to_logits"] += 1
            row["to_logits_score"] -= float(d["estimated_effect"])
    return sorted(rows, key=lambda r: -abs(r["to_logits_score"]))


__all__ = ["behaviour", "head_table"]
