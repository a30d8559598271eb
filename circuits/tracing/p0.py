"""The P0-sink circuit (Peng et al. 2026): find where a model singles out its first token and
which components make the sink, then confirm them causally.

The claim under test: the sink at position 0 is positional, not semantic (it survives removing
or replacing the BOS token); attention in early blocks identifies position 0 (it can attend only
to itself), and MLPs amplify the P0 state's norm into a fixed direction that later heads attend
to. Nothing here assumes *which* blocks do it: the formation layers are read off the data as the
blocks where the P0 norm jumps (`JUMP_FACTOR`) to a massive state (`MASSIVE_RATIO`).

Ablation throughout is *mean-over-positions at P0*: the component's activation at position 0 is
replaced by its mean over the other positions of the same text. That asks exactly "what does
this component do differently at P0?" and keeps activations on-distribution (zero ablation of an
MLP at P0 also erases the token's ordinary content). Effects are relative changes of a metric:
(patched - clean) / clean. Two metrics: the P0 norm after the last formation block, and the
P0 attention mass over the layers after it (mean over heads and queries i >= 1).

Pipeline: `trace_p0(model, texts)` runs the six experiments and returns a `P0Trace`;
`P0Trace.save(folder)` writes tables, the circuit graph in every format, plots and report.html.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import pandas as pd
import torch
from jaxtyping import Int
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens.model_bridge import TransformerBridge

from circuits.graph import add_component, add_effect, new_graph, node_id
from circuits.patching import (
    Intervention,
    Metric,
    Site,
    Value,
    head_grid,
    neuron_grid,
    p0_attention,
    position_grid,
    resid_norm,
    run_interventions,
    sweep,
)
from circuits.sinks import measure_tokens
from circuits.sinks.attention import sink_score
from circuits.sinks.primary import MASSIVE_RATIO, SINK_EPS

JUMP_FACTOR = 2.0
"""Block l amplifies P0 when the P0 norm grows by at least this factor across it and the P0
state is massive after it (norm ratio > MASSIVE_RATIO)."""
KEEP_SHARE = 0.2
"""A head or MLP joins the circuit when ablating it at P0 lowers the late P0 attention by at
least this share of the strongest such effect among components of its kind."""
N_NEURONS = 10
"""Neurons reported per circuit MLP (largest contributions to the P0 direction)."""
N_SINK_HEADS = 4
"""Downstream sink heads (largest late-layer P0 mass) shown in the circuit graph."""
N_TEXTS = 4
N_TOKENS = 24
"""Texts are cut to a common length so patched runs batch without padding."""
ABLATION = "mean-over-positions at P0"


# ---------------------------------------------------------------------------------------------
# Inputs


def text_tokens(
    model: TransformerBridge,
    texts: Sequence[str],
    n_tokens: int = N_TOKENS,
    first: int | None = None,
) -> Int[Tensor, "text pos"]:
    """Texts as equal-length token rows [text, n_tokens]: without the model's BOS; with token id
    `first` at position 0 when given (then n_tokens - 1 text tokens follow)."""
    if n_tokens < 4:
        raise ValueError(f"n_tokens must be at least 4 (P0 and a few queries), got {n_tokens}")
    if not texts:
        raise ValueError("no texts given; pass a list of strings (e.g. corpus.load_problems())")
    body = n_tokens - (first is not None)
    rows = []
    for i, text in enumerate(texts):
        ids = model.to_tokens(text, prepend_bos=False)[0].tolist()
        if len(ids) < body:
            raise ValueError(
                f"text {i} has {len(ids)} tokens, fewer than n_tokens={n_tokens} needs; use "
                "longer texts or a smaller n_tokens"
            )
        rows.append(([first] if first is not None else []) + ids[:body])
    return torch.tensor(rows)


def default_texts(n: int = N_TEXTS) -> list[str]:
    """The first `n` math problems of the project corpus, each with its instruction appended
    (so they are long enough)."""
    from circuits.corpus import INSTRUCTION, load_problems

    return [f"{p.problem} {INSTRUCTION}" for p in load_problems()[:n]]


# ---------------------------------------------------------------------------------------------
# 1. First-token variants


def variant_first_tokens(model: TransformerBridge, n_texts: int, seed: int) -> dict[str, list]:
    """First tokens per variant: one id for every text, or one per text (`random`)."""
    tok = model.tokenizer
    gen = torch.Generator().manual_seed(seed)
    vocab = len(tok)
    special = set(tok.all_special_ids) | set(tok.added_tokens_decoder)

    def one(text: str) -> int:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        return ids[0]

    def plain(i: int) -> bool:
        # A real vocabulary entry: not special, visible, and it tokenizes back to itself
        # (GGUF vocabularies carry placeholder slots such as "[PAD151935]" that do not).
        text = tok.decode([i])
        return (
            i not in special
            and text.strip() != ""
            and tok(text, add_special_tokens=False)["input_ids"] == [i]
        )

    # BPE vocabularies are ordered by merge frequency: the highest ids are the rarest merges.
    rare = next(i for i in range(vocab - 1, 0, -1) if plain(i))
    randoms = []
    while len(randoms) < n_texts:
        i = int(torch.randint(0, tok.vocab_size, (1,), generator=gen))
        if plain(i):
            randoms.append(i)
    bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    variants = {
        "bos": [bos] * n_texts,
        "no_bos": [None] * n_texts,
        "frequent_word": [one("The")] * n_texts,
        "rare_token": [rare] * n_texts,
        "punctuation": [one(".")] * n_texts,
        "newline": [one("\n")] * n_texts,
        "random_token": randoms,
    }
    return variants


def variant_tokens(
    model: TransformerBridge, texts: Sequence[str], n_tokens: int, seed: int
) -> dict[str, Tensor]:
    """Token rows for every first-token variant, plus `repeated` (the text's first token
    repeated n_tokens times: position is the only thing that differs)."""
    out = {}
    for name, firsts in variant_first_tokens(model, len(texts), seed).items():
        out[name] = torch.cat(
            [text_tokens(model, [t], n_tokens, first=f) for t, f in zip(texts, firsts, strict=True)]
        )
    plain = text_tokens(model, texts, n_tokens)
    out["repeated"] = plain[:, :1].repeat(1, n_tokens)
    return out


@dataclass
class Variants:
    """Sink measurements per first-token variant. `layers`: one row per (variant, layer) with
    P0 mass (mean over heads, texts, queries i >= 1), P0 norm and the median norm of the other
    positions; `summary`: one row per variant."""

    layers: pd.DataFrame
    summary: pd.DataFrame
    first_tokens: dict[str, list[str]]


def first_token_variants(
    model: TransformerBridge,
    texts: Sequence[str],
    *,
    n_tokens: int = N_TOKENS,
    seed: int = 0,
    eps: float = SINK_EPS,
    massive_ratio: float = MASSIVE_RATIO,
) -> Variants:
    """Experiment 1: does the sink stay at position 0 whatever token is there (BOS, no BOS, a
    frequent word, a rare token, punctuation, a newline, a random token, one token repeated)?"""
    rows, summary, firsts = [], [], {}
    for name, tokens in variant_tokens(model, texts, n_tokens, seed).items():
        rep = measure_tokens(
            model, tokens, sink_position=0, eps=eps, massive_ratio=massive_ratio, progress=False
        )
        frame = rep.layers_frame()
        frame.insert(0, "variant", name)
        rows.append(frame[["variant", "layer", "p0_mass", "sink_norm", "other_median_norm",
                           "norm_ratio"]])  # fmt: skip
        firsts[name] = sorted({model.tokenizer.decode([int(t)]) for t in tokens[:, 0]})
        summary.append(
            {
                "variant": name,
                "first_token": " | ".join(repr(t) for t in firsts[name][:3]),
                "sink_rate": rep.sink_rate,
                "p0_mass_mean": float(rep.p0_mass.nanmean()),
                "massive_layer": rep.massive_layer,
                "attention_rise_layer": rep.attention_rise_layer,
                "p0_norm_last": float(frame["sink_norm"].iloc[-1]),
                "max_norm_ratio": float(frame["norm_ratio"].max()),
                "sink_at_0_by_norm": sum(t.sink.by_norm == 0 for t in rep.texts) / len(rep.texts),
                "sink_at_0_by_attention": sum(t.sink.by_attention == 0 for t in rep.texts)
                / len(rep.texts),
            }
        )
    return Variants(pd.concat(rows, ignore_index=True), pd.DataFrame(summary), firsts)


# ---------------------------------------------------------------------------------------------
# 2. Position vs content


def _states(model, tokens: Tensor) -> tuple[Tensor, Tensor]:
    """Block outputs [text, layer, pos, d_model] and sink scores [text, layer, pos] (attention
    each position receives, mean over heads and later queries)."""
    n = model.cfg.n_layers
    with torch.no_grad():
        _, cache = model.run_with_cache(
            tokens,
            names_filter=lambda h: h.endswith(("hook_resid_post", "attn.hook_pattern")),
        )
    resid = torch.stack([cache[f"blocks.{layer}.hook_resid_post"] for layer in range(n)], 1)
    score = torch.stack(
        [sink_score(cache[f"blocks.{layer}.attn.hook_pattern"]).mean(1) for layer in range(n)], 1
    )
    return resid, score


def position_vs_content(
    model: TransformerBridge,
    texts: Sequence[str],
    *,
    n_tokens: int = N_TOKENS,
    position: int | None = None,
) -> pd.DataFrame:
    """Experiment 2: the same token (each text's own first token) at position 0 and again at
    `position` (default n_tokens // 2). Per layer, mean over texts: the L2 norm of both copies,
    their cosine with each other, and the attention each receives (mean over heads and later
    queries). A positional sink shows a large gap; a content sink would not."""
    tokens = text_tokens(model, texts, n_tokens)
    k = n_tokens // 2 if position is None else position
    if not 1 <= k < n_tokens - 1:
        raise ValueError(f"position must be in 1..{n_tokens - 2} (queries must follow it), got {k}")
    tokens = tokens.clone()
    tokens[:, k] = tokens[:, 0]
    resid, score = _states(model, tokens)
    cos = torch.nn.functional.cosine_similarity(resid[:, :, 0], resid[:, :, k], dim=-1)
    return pd.DataFrame(
        {
            "layer": range(model.cfg.n_layers),
            "norm_at_0": resid[:, :, 0].norm(dim=-1).mean(0).tolist(),
            f"norm_at_{k}": resid[:, :, k].norm(dim=-1).mean(0).tolist(),
            "cosine_0_vs_k": cos.mean(0).tolist(),
            "score_at_0": score[:, :, 0].mean(0).tolist(),
            f"score_at_{k}": score[:, :, k].mean(0).tolist(),
        }
    ).assign(position=k)


# ---------------------------------------------------------------------------------------------
# Where the P0 state forms


@dataclass
class Formation:
    """Where the P0 state becomes massive: per-layer P0 norm (mean over texts), the blocks that
    amplify it, and the late layers whose attention to P0 is the sink being explained."""

    p0_norm: list[float]
    norm_ratio: list[float]
    jump_layers: list[int]
    late_layers: list[int]

    @property
    def last_jump(self) -> int:
        return self.jump_layers[-1]

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def find_formation(
    p0_norm: Sequence[float],
    norm_ratio: Sequence[float],
    *,
    jump_factor: float = JUMP_FACTOR,
    massive_ratio: float = MASSIVE_RATIO,
) -> Formation:
    """Blocks l >= 1 across which the P0 norm grows >= `jump_factor` times and after which it is
    massive (ratio > `massive_ratio`). With no such block, the block with the largest norm
    growth stands in (and the report says the state never became massive)."""
    n = len(p0_norm)
    growth = [p0_norm[layer] / p0_norm[layer - 1] for layer in range(1, n)]
    jumps = [
        layer
        for layer in range(1, n)
        if growth[layer - 1] >= jump_factor and norm_ratio[layer] > massive_ratio
    ]
    if not jumps:
        jumps = [1 + max(range(n - 1), key=growth.__getitem__)]
    late = list(range(jumps[-1] + 1, n)) or [n - 1]
    return Formation(list(map(float, p0_norm)), list(map(float, norm_ratio)), jumps, late)


# ---------------------------------------------------------------------------------------------
# 3-4. Localise heads, MLPs, neurons


def p0_ablation(n_pos: int, at: int = 0) -> Value:
    """Replace the activation at `at` by its mean over the other positions of the same text."""
    return Value.token_swap([p for p in range(1, n_pos) if p != at])


@dataclass
class Localisation:
    """Effects (relative change, (patched - clean) / clean) of ablating each component at P0,
    and at a control position, on the two metrics; `circuit` lists the components kept."""

    heads: pd.DataFrame
    mlps: pd.DataFrame
    neurons: pd.DataFrame
    circuit_heads: list[tuple[int, int]]
    circuit_mlps: list[int]
    baselines: dict[str, float]


def _relative(values: Tensor, baseline: float) -> Tensor:
    """(patched - clean) / clean; the plain difference when the clean value is 0."""
    return (values - baseline) / baseline if baseline else values - baseline


def _sweeps(model, tokens, grid_for, metrics, progress) -> dict[str, Tensor]:
    out = {}
    for (where, at), grid in grid_for.items():
        for mname, metric in metrics.items():
            if at and mname == "p0_norm":
                continue  # under causal attention, nothing at a later position reaches P0
            res = sweep(model, tokens, grid, metric, progress=progress)
            out[f"{mname}@{where}"] = _relative(res.values, res.baseline)
            out[f"baseline:{mname}"] = res.baseline
    return out


def _keep(effects: Sequence[float], share: float) -> list[int]:
    # A component counts when ablating it *lowers* the sink by a large enough share.
    strongest = max((-e for e in effects), default=0.0)
    if strongest <= 0:
        return []
    return [i for i, e in enumerate(effects) if -e >= share * strongest]


def localise(
    model: TransformerBridge,
    tokens: Int[Tensor, "text pos"],
    formation: Formation,
    *,
    keep_share: float = KEEP_SHARE,
    n_neurons: int = N_NEURONS,
    control_position: int | None = None,
    progress: bool = True,
) -> Localisation:
    """Experiments 3 and 4: ablate every head and every MLP of blocks 0..last jump at P0 (and at
    a control position), measuring the P0 norm after the last jump block and the late P0
    attention; then, in each circuit MLP, the neurons that write most onto the P0 direction."""
    n_pos = tokens.shape[1]
    ctrl = n_pos // 2 if control_position is None else control_position
    layers = list(range(formation.last_jump + 1))
    metrics = {
        "p0_norm": resid_norm(formation.last_jump, 0),
        "p0_attention": p0_attention(formation.late_layers),
    }
    head_grids = {
        (where, at): head_grid(
            model, tokens, p0_ablation(n_pos, at), layers=layers, positions=[at],
            per_position=False,
        )
        for where, at in (("p0", 0), ("control", ctrl))
    }  # fmt: skip
    mlp_grids = {
        (where, at): position_grid(
            model, tokens, p0_ablation(n_pos, at), kind="mlp_out", layers=layers, positions=[at],
            per_position=False,
        )
        for where, at in (("p0", 0), ("control", ctrl))
    }  # fmt: skip
    h = _sweeps(model, tokens, head_grids, metrics, progress)
    m = _sweeps(model, tokens, mlp_grids, metrics, progress)
    n_heads = model.cfg.n_heads
    heads = pd.DataFrame(
        [
            {"layer": layer, "head": hh}
            | {k: float(v[i, hh]) for k, v in h.items() if not k.startswith("baseline")}
            for i, layer in enumerate(layers)
            for hh in range(n_heads)
        ]
    )
    mlps = pd.DataFrame(
        [
            {"layer": layer}
            | {k: float(v[i]) for k, v in m.items() if not k.startswith("baseline")}
            for i, layer in enumerate(layers)
        ]
    )
    keep_h = _keep(heads["p0_attention@p0"].tolist(), keep_share)
    keep_m = _keep(mlps["p0_attention@p0"].tolist(), keep_share)
    heads["in_circuit"] = [i in keep_h for i in range(len(heads))]
    mlps["in_circuit"] = [i in keep_m for i in range(len(mlps))]
    circuit_heads = [(int(heads["layer"][i]), int(heads["head"][i])) for i in keep_h]
    circuit_mlps = [int(mlps.layer[i]) for i in keep_m]
    neurons = top_neurons(model, tokens, circuit_mlps, n_neurons, progress=progress)
    baselines = {k.split(":")[1]: float(v) for k, v in h.items() if k.startswith("baseline")}
    return Localisation(heads, mlps, neurons, circuit_heads, circuit_mlps, baselines)


def _mlp_weights_out(model, layer: int) -> Tensor:
    """W_out as [d_mlp, d_model]: neuron n writes W_out[n] into the residual stream."""
    weight = model.blocks[layer].mlp.out.weight  # nn.Linear layout [d_model, d_mlp]
    return weight.detach().T


def top_neurons(
    model: TransformerBridge,
    tokens: Int[Tensor, "text pos"],
    mlp_layers: Sequence[int],
    n_neurons: int = N_NEURONS,
    *,
    progress: bool = True,
) -> pd.DataFrame:
    """Per MLP layer m: each neuron's contribution to the P0 direction, post[n] at P0 times
    W_out[n] . u, with u the unit P0 state after block m (mean over texts); the top
    `n_neurons` by contribution, each with the relative change of the P0 norm after block m
    when that neuron alone is ablated at P0, and the cumulative share of the MLP's own
    projection onto u that the top k neurons carry."""
    if not mlp_layers:
        return pd.DataFrame(
            columns=["layer", "neuron", "contribution", "share_cumulative", "ablation_effect"]
        )
    n_pos = tokens.shape[1]
    names = {f"blocks.{m}.mlp.hook_post" for m in mlp_layers}
    names |= {f"blocks.{m}.hook_resid_post" for m in mlp_layers}
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda h: h in names)
    rows = []
    for m in mlp_layers:
        post = cache[f"blocks.{m}.mlp.hook_post"][:, 0]  # text d_mlp
        u = torch.nn.functional.normalize(cache[f"blocks.{m}.hook_resid_post"][:, 0].mean(0), dim=0)
        contrib = (post * (_mlp_weights_out(model, m) @ u)).mean(0)  # d_mlp
        total = float(contrib.sum())
        top = contrib.argsort(descending=True)[:n_neurons].tolist()
        res = sweep(
            model,
            tokens,
            neuron_grid(model, tokens, p0_ablation(n_pos), layers=[m], neurons=top, positions=[0]),
            resid_norm(m, 0),
            progress=progress,
        )
        rel = _relative(res.values, res.baseline)[0]
        cum = 0.0
        for k, n in enumerate(top):
            cum += float(contrib[n])
            rows.append(
                {
                    "layer": m,
                    "neuron": n,
                    "contribution": float(contrib[n]),
                    "share_cumulative": cum / total if total else math.nan,
                    "ablation_effect": float(rel[k]),
                }
            )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# 5. Causal confirmation


def _formation_sites(formation: Formation) -> list[Site]:
    return [
        Site(kind, layer, pos=0)
        for layer in range(formation.last_jump + 1)
        for kind in ("attn_out", "mlp_out")
    ]


def confirm(
    model: TransformerBridge,
    tokens: Int[Tensor, "text pos"],
    formation: Formation,
    circuit_heads: Sequence[tuple[int, int]],
    circuit_mlps: Sequence[int],
    *,
    seed: int = 0,
    progress: bool = False,
) -> pd.DataFrame:
    """Experiment 5: the late P0 attention (mean over late layers, heads, texts) when, at P0,
    (a) the circuit is ablated, (b) every attention and MLP output of blocks 0..last jump is
    ablated, (c) everything in (b) is ablated except the circuit, whose clean activations are
    patched back in, (d) as many random non-circuit components as the circuit are ablated
    (control). `fraction` is the share of the (b) drop each run reproduces:
    (clean - run) / (clean - all_ablated); for (c) the restored share (run - all) / (clean - all)."""
    n_pos = tokens.shape[1]
    ablate = p0_ablation(n_pos)
    clean = Value.from_run(tokens)
    metric = p0_attention(formation.late_layers)
    heads = [Site("head", layer, head=h, pos=0) for layer, h in circuit_heads]
    mlps = [Site("mlp_out", m, pos=0) for m in circuit_mlps]
    circuit = heads + mlps
    everything = _formation_sites(formation)
    head_layers = {layer for layer, _ in circuit_heads}
    restore = [
        Intervention(s, ablate)
        for s in everything
        if not (s.kind == "mlp_out" and s.layer in circuit_mlps)
        and not (s.kind == "attn_out" and s.layer in head_layers)
    ]
    for layer in sorted(head_layers):
        for h in range(model.cfg.n_heads):
            site = Site("head", layer, head=h, pos=0)
            restore.append(Intervention(site, clean if (layer, h) in circuit_heads else ablate))
    restore += [Intervention(s, clean) for s in mlps]
    gen = torch.Generator().manual_seed(seed)
    pool = [
        Site("head", layer, head=h, pos=0)
        for layer in range(formation.last_jump + 1)
        for h in range(model.cfg.n_heads)
        if (layer, h) not in circuit_heads
    ]
    mlp_pool = [Site("mlp_out", layer, pos=0) for layer in range(formation.last_jump + 1)]
    mlp_pool = [s for s in mlp_pool if s.layer not in circuit_mlps]
    pick_h = [pool[i] for i in torch.randperm(len(pool), generator=gen)[: len(heads)].tolist()]
    pick_m = [
        mlp_pool[i] for i in torch.randperm(len(mlp_pool), generator=gen)[: len(mlps)].tolist()
    ]
    runs = {
        "circuit_ablated": [Intervention(s, ablate) for s in circuit],
        "all_formation_ablated": [Intervention(s, ablate) for s in everything],
        "all_but_circuit_ablated": restore,
        "random_control_ablated": [Intervention(s, ablate) for s in pick_h + pick_m],
    }
    runs = {k: v for k, v in runs.items() if v}
    res = run_interventions(model, tokens, list(runs.values()), metric, progress=progress)
    base = res.baseline
    values = dict(zip(runs, res.mean.tolist(), strict=True))
    drop = base - values["all_formation_ablated"]
    rows = [{"run": "clean", "p0_attention": base, "fraction": math.nan, "n_components": 0}]
    for name, value in values.items():
        frac = (value - values["all_formation_ablated"] if name == "all_but_circuit_ablated"
                else base - value) / drop if drop else math.nan  # fmt: skip
        rows.append(
            {"run": name, "p0_attention": value, "fraction": frac, "n_components": len(runs[name])}
        )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# 6. The circuit graph


def _mlp_out_norm(layer: int) -> Metric:
    hook = f"blocks.{layer}.hook_mlp_out"
    return Metric(
        f"mlp_out_norm(L{layer}, pos=0)", (hook,), lambda acts, _: acts[hook][:, 0].norm(dim=-1)
    )


def _effects_on(model, tokens, sites: Sequence[Site], metric: Metric) -> list[float]:
    ablate = p0_ablation(tokens.shape[1])
    res = run_interventions(
        model, tokens, [[Intervention(s, ablate)] for s in sites], metric, progress=False
    )
    return _relative(res.mean, res.baseline).tolist()


def circuit_graph(
    model: TransformerBridge,
    tokens: Int[Tensor, "text pos"],
    formation: Formation,
    loc: Localisation,
    sink_heads: Sequence[tuple[int, int, float]],
    *,
    data: str,
    seed: int,
) -> nx.DiGraph:
    """Experiment 6: circuit heads -> circuit MLPs -> downstream sink heads -> the late P0
    attention. Edge effects are relative changes measured by ablating the source at P0: on the
    target MLP's output norm at P0, on a sink head's P0 mass, on the P0 norm / attention targets.
    Sink heads link to the attention target with their clean P0 mass (observed, not ablated)."""
    late = formation.late_layers
    attn_target = node_id("target", name=f"p0_attention[L{late[0]}-{late[-1]}]")
    norm_target = node_id("target", name=f"p0_norm[L{formation.last_jump}]")
    g = new_graph(
        model,
        data=data,
        metric=f"relative change under {ABLATION}",
        seed=seed,
        thresholds={"keep_share": KEEP_SHARE, "jump_factor": JUMP_FACTOR},
        ablation=ABLATION,
    )
    add_component(g, attn_target, score=loc.baselines["p0_attention"])
    add_component(g, norm_target, score=loc.baselines["p0_norm"])
    comps = [
        (node_id("head", layer, h), Site("head", layer, head=h, pos=0))
        for layer, h in loc.circuit_heads
    ]
    comps += [(node_id("mlp", m), Site("mlp_out", m, pos=0)) for m in loc.circuit_mlps]
    heads = loc.heads.set_index(["layer", "head"])
    mlps = loc.mlps.set_index("layer")
    for nid, site in comps:
        row = heads.loc[(site.layer, site.head)] if site.kind == "head" else mlps.loc[site.layer]
        add_component(g, nid, score=float(row["p0_attention@p0"]), role="formation")
        for target, col in ((attn_target, "p0_attention@p0"), (norm_target, "p0_norm@p0")):
            add_effect(g, nid, target, float(row[col]), intervention=ABLATION,
                       metric=target.removeprefix("target:"))  # fmt: skip
    for m in loc.circuit_mlps:
        upstream = [
            (nid, s) for nid, s in comps if s.layer < m or (s.kind == "head" and s.layer == m)
        ]
        if upstream:
            effects = _effects_on(model, tokens, [s for _, s in upstream], _mlp_out_norm(m))
            for (nid, _), e in zip(upstream, effects, strict=True):
                add_effect(g, nid, node_id("mlp", m), e, intervention=ABLATION,
                           metric=f"mlp_out_norm(L{m}, P0)")  # fmt: skip
    for layer, head, mass in sink_heads:
        sid = add_component(g, node_id("head", layer, head), score=mass, role="sink")
        add_effect(g, sid, attn_target, mass, intervention="none (observed P0 mass)",
                   metric="p0_mass")  # fmt: skip
        if comps:
            effects = _effects_on(
                model, tokens, [s for _, s in comps], p0_attention(layer, heads=[head])
            )
            for (nid, _), e in zip(comps, effects, strict=True):
                add_effect(
                    g, nid, sid, e, intervention=ABLATION, metric=f"p0_mass(L{layer}.H{head})"
                )
    return g


# ---------------------------------------------------------------------------------------------
# The pipeline


@dataclass
class P0Trace:
    """Everything `trace_p0` measured, with the settings it used."""

    model: str
    settings: dict
    variants: Variants
    position: pd.DataFrame
    formation: Formation
    localisation: Localisation
    confirmation: pd.DataFrame
    """Experiment 5 on all texts together (metrics averaged over texts)."""
    confirmation_by_text: pd.DataFrame
    """Experiment 5 run on each text alone (column `text`), for the spread across texts."""
    sink_heads: list[tuple[int, int, float]]
    graph: nx.DiGraph
    texts: list[str]
    seconds: dict = field(default_factory=dict)

    def summary(self) -> dict:
        conf = self.confirmation.set_index("run")
        frac = conf["fraction"]
        return {
            "model": self.model,
            "jump_layers": self.formation.jump_layers,
            "late_layers": f"{self.formation.late_layers[0]}-{self.formation.late_layers[-1]}",
            "p0_norm_after_last_jump": self.formation.p0_norm[self.formation.last_jump],
            "circuit_heads": [f"L{layer}.H{h}" for layer, h in self.localisation.circuit_heads],
            "circuit_mlps": [f"L{m}.MLP" for m in self.localisation.circuit_mlps],
            "late_p0_attention_clean": float(conf.loc["clean", "p0_attention"]),
            "fraction_removed_by_circuit": float(frac.get("circuit_ablated", math.nan)),
            "fraction_restored_by_circuit": float(frac.get("all_but_circuit_ablated", math.nan)),
            "fraction_removed_by_random": float(frac.get("random_control_ablated", math.nan)),
            # Spread over texts, each confirmed on its own (standard deviation of the fractions).
            **{
                f"sd_over_texts_{run}": float(sd)
                for run, sd in self.confirmation_by_text.groupby("run")["fraction"].std().items()
                if run not in ("clean", "all_formation_ablated")  # its fraction is 1 by definition
            },
            # Per variant: share of texts whose most-attended / largest-norm token is P0, and
            # the P0 mass itself (uniform attention also makes P0 the most-attended token).
            "sink_stays_at_0": {
                r.variant: {
                    "by_attention": r.sink_at_0_by_attention,
                    "by_norm": r.sink_at_0_by_norm,
                    "p0_mass": round(r.p0_mass_mean, 3),
                }
                for r in self.variants.summary.itertuples()
            },
        }

    def to_json(self) -> str:
        return json.dumps(
            {
                "summary": self.summary(),
                "settings": self.settings,
                "formation": self.formation.to_dict(),
                "variants": self.variants.summary.to_dict(orient="records"),
                "confirmation": self.confirmation.to_dict(orient="records"),
                "seconds": self.seconds,
            },
            indent=2,
            default=str,
        )

    def save(self, folder: str | Path, model: TransformerBridge | None = None) -> Path:
        """Write summary.json, CSV tables, the graph (GraphML, GEXF, JSON, DOT, Mermaid), PNG
        plots and report.html into `folder`; returns the report's path. With `model`, the
        report includes circuitsvis views of the sink heads."""
        from circuits.report.p0_report import write_p0_report

        return write_p0_report(self, folder, model)


def trace_p0(
    model: TransformerBridge,
    texts: Sequence[str] | None = None,
    *,
    n_tokens: int = N_TOKENS,
    seed: int = 0,
    keep_share: float = KEEP_SHARE,
    jump_factor: float = JUMP_FACTOR,
    massive_ratio: float = MASSIVE_RATIO,
    eps: float = SINK_EPS,
    n_neurons: int = N_NEURONS,
    n_sink_heads: int = N_SINK_HEADS,
    progress: bool = True,
) -> P0Trace:
    """Run experiments 1-6 on `texts` (default: the first N_TEXTS corpus problems), all cut to
    `n_tokens` tokens. The circuit is traced on the raw texts (no BOS: position 0 is the
    text's first token) unless the model prepends a BOS, in which case the BOS stays at P0."""
    torch.manual_seed(seed)
    texts = list(texts) if texts is not None else default_texts()
    info = getattr(model, "circuits_info", None)
    key = info.key if info else model.cfg.model_name
    bos = info.prepend_bos if info else bool(model.cfg.default_prepend_bos)
    first = model.tokenizer.bos_token_id if bos else None
    tokens = text_tokens(model, texts, n_tokens, first=first)
    seconds = {}
    steps = tqdm(total=6, desc="p0 circuit", disable=not progress)

    def step(name, fn):
        t = time.perf_counter()
        out = fn()
        seconds[name] = round(time.perf_counter() - t, 2)
        steps.update(1)
        return out

    variants = step(
        "variants",
        lambda: first_token_variants(
            model, texts, n_tokens=n_tokens, seed=seed, eps=eps, massive_ratio=massive_ratio
        ),
    )
    position = step("position", lambda: position_vs_content(model, texts, n_tokens=n_tokens))
    main = variants.layers[variants.layers.variant == ("bos" if bos else "no_bos")]
    formation = find_formation(
        main.sink_norm.tolist(), main.norm_ratio.tolist(),
        jump_factor=jump_factor, massive_ratio=massive_ratio,
    )  # fmt: skip
    loc = step(
        "localise",
        lambda: localise(
            model, tokens, formation, keep_share=keep_share, n_neurons=n_neurons,
            progress=progress,
        ),
    )  # fmt: skip

    def confirm_on(rows: Tensor) -> pd.DataFrame:
        return confirm(model, rows, formation, loc.circuit_heads, loc.circuit_mlps, seed=seed)

    confirmation = step("confirm", lambda: confirm_on(tokens))
    by_text = step(
        "confirm_by_text",
        lambda: pd.concat(
            [confirm_on(tokens[i : i + 1]).assign(text=i) for i in range(len(tokens))],
            ignore_index=True,
        ),
    )
    rep = measure_tokens(model, tokens, sink_position=0, eps=eps, progress=False)
    late = set(formation.late_layers)
    masses = [
        (layer, h, float(rep.p0_mass[layer, h])) for layer, h in rep.sink_heads if layer in late
    ]
    sink_heads = sorted(masses, key=lambda x: -x[2])[:n_sink_heads]
    data = f"{len(texts)} corpus texts x {n_tokens} tokens ({'BOS' if bos else 'no BOS'} at P0)"
    graph = step(
        "graph",
        lambda: circuit_graph(model, tokens, formation, loc, sink_heads, data=data, seed=seed),
    )
    steps.close()
    settings = {
        "model": key,
        "n_texts": len(texts),
        "n_tokens": n_tokens,
        "p0": "BOS" if bos else "first text token",
        "seed": seed,
        "ablation": ABLATION,
        "keep_share": keep_share,
        "jump_factor": jump_factor,
        "massive_ratio": massive_ratio,
        "eps": eps,
        "n_neurons": n_neurons,
        "n_sink_heads": n_sink_heads,
    }
    return P0Trace(
        key, settings, variants, position, formation, loc, confirmation, by_text, sink_heads,
        graph, texts, seconds,
    )  # fmt: skip
