"""Sinks by design: the BOS attention each compiled head is built to pay, against what it pays.

Tracr gives every head a default: BOS's key gets half the score of a matching key, so a query
that matches no key attends to BOS and the head writes nothing (the no-op use). A
SelectorWidth head instead always attends to BOS and to its k matching keys alike, and reads
its width from BOS's share 1/(k + 1) (the counting use). Predicted BOS mass per query:

- SelectorWidth head: 1 / (w + 1), w the program's width at the query (read from Tracr's
  residual stream: the SelectorWidth's own output label);
- categorical or numerical Aggregate head: 1 when the query matches no key, 0 otherwise.

`DESIGN` names each program's heads and the program variables their selectors compare.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from attn_sink_circuits.core.nodes import node_id
from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.models.compiled import CompiledModel
from attn_sink_circuits.sinks import gu_alpha, p0_mass_per_query


@dataclass(frozen=True)
class HeadDesign:
    """What a head is built to do: a SelectorWidth (`width`: the label stem of its output), or
    an Aggregate whose selector compares `key` and `query` label stems with `compare(key,
    query)` (Tracr's `Select(keys, queries, predicate)`)."""

    layer: int
    head: int
    kind: str  # "selector_width" | "aggregate"
    width: str = ""
    key: str = ""
    query: str = ""
    compare: str = ""


COMPARE = {"EQ": operator.eq, "LT": operator.lt, "LEQ": operator.le, "TRUE": lambda k, q: True}

DESIGN: dict[str, tuple[HeadDesign, ...]] = {
    "reverse": (HeadDesign(0, 0, "selector_width", width="length"),
                HeadDesign(3, 0, "aggregate", key="indices", query="opp_idx-1", compare="EQ")),
    "frac_prevs": (HeadDesign(1, 0, "aggregate", key="indices", query="indices",
                              compare="LEQ"),),
    "hist": (HeadDesign(0, 0, "selector_width", width="hist"),),
    "sort": (HeadDesign(1, 0, "selector_width", width="target_pos"),
             HeadDesign(2, 0, "aggregate", key="target_pos", query="indices", compare="EQ")),
}  # fmt: skip
"""Program -> its heads' design (from the RASP source of each program)."""


def _label_name(stem: str, labels: list[str]) -> str:
    names = {x.split(":")[0] for x in labels}
    found = sorted(n for n in names if n == stem or n.rsplit("_", 1)[0] == stem)
    if len(found) != 1:
        raise ValueError(f"label stem {stem!r} names {found or 'no label'} in {sorted(names)}")
    return found[0]


def decode(compiled: CompiledModel, stem: str, length: int) -> Float[Tensor, "batch pos"]:
    """The value of categorical variable `stem` at every position of every input of `length`,
    read from Tracr's final residual stream (argmax over its labels; NaN where none is set,
    e.g. `indices` at BOS)."""
    name = _label_name(stem, compiled.labels)
    dims = [i for i, x in enumerate(compiled.labels) if x.split(":")[0] == name]
    values = torch.tensor([float(compiled.labels[i].split(":")[1]) for i in dims])
    resid = compiled.residuals(length)[:, -1][..., dims]
    best = resid.max(-1)
    return torch.where(best.values > 0.5, values[best.indices], torch.nan)


def predicted_bos(
    compiled: CompiledModel, design: HeadDesign, length: int
) -> Float[Tensor, "batch query"]:
    """Predicted BOS attention [inputs, query] of queries 1..length."""
    if design.kind == "selector_width":
        width = decode(compiled, design.width, length)[:, 1:]
        return 1.0 / (width + 1.0)
    keys = decode(compiled, design.key, length)[:, 1:]  # [batch, key]
    queries = decode(compiled, design.query, length)[:, 1:]  # [batch, query]
    compare = COMPARE[design.compare]
    match = compare(keys[:, None, :], queries[:, :, None])  # [batch, query, key]
    return (~match.any(-1)).float()


@dataclass
class DesignRow:
    """One head at one input length: predicted vs measured BOS mass, and Gu's alpha."""

    program: str
    head: str
    kind: str
    length: int
    predicted_mean: float
    measured_mean: float
    max_abs_error: float
    gu_alpha: float
    gu_sink: bool
    """Gu's alpha above eps (Sink^eps counts the head): BOS's own row included, as the paper's."""
    mass_sink: bool
    """The measured BOS mass of later queries (`p0_mass`) above eps."""


def design_table(compiled: CompiledModel, eps: float = 0.3) -> list[DesignRow]:
    """Per designed head and input length: the mean predicted and measured BOS mass per query
    (`attn_sink_circuits.sinks.p0_mass_per_query`), the largest difference, Gu's alpha at BOS
    (`attn_sink_circuits.sinks.gu_alpha`, mean over inputs) and whether it and the measured mass exceed
    `eps` (Sink^eps)."""
    rows = []
    model = compiled.model
    for length in compiled.lengths:
        tokens = compiled.tokens(length)
        hooks = sorted({hook_name("pattern", d.layer) for d in DESIGN[compiled.name]})
        with torch.no_grad():
            _, cache = model.run_with_cache(tokens, names_filter=hooks)
        for d in DESIGN[compiled.name]:
            pattern = cache[hook_name("pattern", d.layer)][:, d.head : d.head + 1]
            measured = p0_mass_per_query(pattern)[:, 0, 1:]
            predicted = predicted_bos(compiled, d, length)
            alpha = float(gu_alpha(pattern)[:, 0, 0].mean())
            rows.append(DesignRow(
                compiled.name, node_id("head", d.layer, d.head), d.kind, length,
                float(predicted.mean()), float(measured.mean()),
                float((predicted - measured).abs().max()), alpha, alpha > eps,
                float(measured.mean()) > eps,
            ))  # fmt: skip
    return rows


def p0_tracer(compiled: CompiledModel, tokens: Int[Tensor, "batch pos"]) -> dict | None:
    """The P0 tracer's localisation (experiment 3, `attn_sink_circuits.studies.p0.localise`) on the
    program's texts: the formation block (the P0 norm never becomes massive here, so the block
    of largest growth stands in), the heads and MLPs it names as making the sink (expected:
    none; Tracr's BOS attention comes from BOS's embedding alone) and the largest rise and drop
    of the late P0 attention when one component is ablated at P0. None for a one-block
    program (the tracer looks for the sink's formation across blocks)."""
    from attn_sink_circuits.studies.p0.formation import find_formation
    from attn_sink_circuits.studies.p0.localise import localise

    model = compiled.model
    if model.cfg.n_layers < 2:
        return None
    hooks = [hook_name("resid_post", layer) for layer in range(model.cfg.n_layers)]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=hooks)
    p0 = [float(cache[h][:, 0].norm(dim=-1).mean()) for h in hooks]
    ratio = [
        p / float(cache[h][:, 1:].norm(dim=-1).median()) for p, h in zip(p0, hooks, strict=True)
    ]
    formation = find_formation(p0, ratio)
    loc = localise(model, tokens, formation, progress=False)
    effects = [*loc.heads["p0_attention@p0"], *loc.mlps["p0_attention@p0"]]
    return {
        "program": compiled.name, "p0_norm": p0, "norm_ratio": ratio,
        "formation_block": formation.last_jump, "late_layers": formation.late_layers,
        "named_heads": [node_id("head", *h) for h in loc.circuit_heads],
        "named_mlps": [node_id("mlp", m) for m in loc.circuit_mlps],
        "largest_rise": max(effects), "largest_drop": min(effects),
        "late_p0_attention": loc.baselines["p0_attention"],
    }  # fmt: skip


__all__ = ["COMPARE", "DESIGN", "DesignRow", "HeadDesign", "decode", "design_table", "p0_tracer",
           "predicted_bos"]  # fmt: skip
