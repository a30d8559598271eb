"""The P0 trace's findings in words (Markdown), from its summary and tables."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from attn_sink_circuits._repr import number, percent
from attn_sink_circuits.core.nodes import node_id, parse_node_id
from attn_sink_circuits.discovery.size_rule import rule_text
from attn_sink_circuits.models.registry import display_name
from attn_sink_circuits.stats import MIN_N
from attn_sink_circuits.studies.edge_list import strongest_edges_text
from attn_sink_circuits.studies.edge_text import (
    above_one,
    edge_circuit_text,
    interval_text,
    kinds_text,
)

if TYPE_CHECKING:
    from attn_sink_circuits.studies.p0.config import P0Config
    from attn_sink_circuits.studies.p0.pipeline import P0Trace


def summary_text(trace: P0Trace) -> str:
    """Where the P0 state forms, the circuit, its causal confirmation, position vs content."""
    s = trace.summary()
    c = trace.config
    f = trace.formation
    conf = trace.confirmation.set_index("run")
    massive = max(f.norm_ratio[j] for j in f.jump_layers)
    d = c.edge.discovery
    lines = [
        f"**Edge circuit (held out).** Fitted on {s['n_fit_texts']} texts and judged on "
        f"{s['n_heldout_texts']} others ({c.edge.n_tokens} tokens each), "
        + edge_circuit_text(
            trace.edges,
            what="the late P0 attention",
            units="texts",
            how=f"{d.method}, {d.grow} growth, edges ablated at position 0 with the "
            f"{d.ablation} of the other positions",
        ),  # fmt: skip
        kinds_text(trace.edges_by_kind, units="texts"),
        f"**Where the P0 state forms.** The P0 norm jumps across block(s) "
        f"{', '.join(map(str, f.jump_layers))} "
        f"(growth >= {c.jump_factor}x and norm ratio > {c.massive_ratio}; largest ratio at a "
        f"jump {number(massive, '.1f')}); after block {f.last_jump} it is "
        f"{number(f.p0_norm[f.last_jump], '.0f')}. The "
        f"sink explained is the P0 attention mass over layers {s['late_layers']}: "
        f"{number(s['late_p0_attention_clean'], '.3f')} (mean over heads, queries i >= 1, texts).",
        f"**Node-level first view.** Heads: {', '.join(s['node_circuit_heads']) or 'none'}; MLPs: "
        f"{', '.join(s['node_circuit_mlps']) or 'none'} (components whose ablation at P0 lowers the "
        f"late P0 attention by >= {percent(c.keep_share)} of the strongest effect of their kind)."
        + unstable_text(trace.localisation.heads, trace.localisation.mlps, c),
        f"**Causal confirmation.** On {c.n_texts} texts, ablating the circuit at P0 removes "
        f"{_spread(s, 'node_share_removed_by_circuit', 'circuit_ablated')} of the drop that "
        f"ablating every attention and MLP output of blocks 0-{f.last_jump} at P0 causes (P0 "
        f"attention {number(conf.loc['all_formation_ablated', 'p0_attention'], '.3f')}); "
        "patching only the circuit back restores "
        f"{_spread(s, 'node_share_restored_by_circuit', 'all_but_circuit_ablated')}; ablating "
        "as many random components removes "
        f"{_spread(s, 'node_share_removed_by_random', 'random_control_ablated')} (sd: over the "
        f"texts, each run alone{'' if c.n_texts >= MIN_N else f'; fewer than {MIN_N} texts'}).",
        "**Position, not content.** Per first-token variant: share of texts whose "
        "most-attended / largest-norm token is position 0, and the P0 attention mass: "
        + "; ".join(
            f"{k} {percent(v['by_attention'])} / {percent(v['by_norm'])}, "
            f"mass {number(v['p0_mass'])}"
            for k, v in s["sink_stays_at_0"].items()
        )
        + ". (`repeated`: every position holds the same token, so every position sees what P0 "
        "sees; a low mass there means no single sink forms.)",
        "Weights are dequantised GGUF (Q4) approximations of the originals: absolute numbers "
        "differ slightly from full-precision models.",
    ]
    return "\n\n".join(lines)


def _spread(s: dict, key: str, run: str) -> str:
    """A node-level share with its sd over texts, flagged unstable when the sd is at least as
    large as the share itself and 5 points or more (the sign of the share is then not
    settled)."""
    value, sd = s[key], s.get("node_sd_over_texts_" + run, math.nan)
    flag = ", unstable: the spread is as large as the value" if sd >= max(abs(value), 0.05) else ""
    return f"{percent(value)} (sd {number(sd)}{flag})"


PLATEAU = 0.05
"""Effects within this share of a shared value (relative to that value) count as one value."""


def plateau(values: pd.Series) -> pd.Series:
    """The largest set of entries sharing one value: for each entry's |value| v, the entries
    whose |value| is within PLATEAU * v of v; the biggest such set (ties: the larger v)."""
    size = values.abs()
    best = values.iloc[:0]
    for v in size.sort_values(ascending=False):
        group = values[(size - v).abs() <= PLATEAU * v]
        if len(group) > len(best):
            best = group
    return best


def unstable_text(heads: pd.DataFrame, mlps: pd.DataFrame, config: P0Config) -> str:
    """The node-level effects that matter (>= keep_share of the strongest |effect| of their
    kind, as the node-level circuit is chosen) whose sd over texts is at least their mean: one
    text, not all, carries them; and when three or more share one value, why (a ceiling that
    text reaches, not separate mechanisms)."""
    col = "p0_attention@p0"
    if f"{col}:sd" not in heads:
        return ""
    rows = pd.concat(
        [
            heads.assign(
                name=[node_id("head", int(r.layer), int(r.head)) for r in heads.itertuples()],
                top=heads[col].abs().max(),
            ),
            mlps.assign(
                name=[node_id("mlp", int(r.layer)) for r in mlps.itertuples()],
                top=mlps[col].abs().max(),
            ),
        ],
        ignore_index=True,  # heads and MLPs share index labels
    )
    size, sd = rows[col].abs(), rows[f"{col}:sd"]
    bad = rows[(size >= config.keep_share * rows.top) & (sd >= size)]
    bad = bad.sort_values(col, key=abs, ascending=False, kind="stable")
    if bad.empty:
        return ""
    listed = ", ".join(
        f"{name} ({number(value, '+.3f')}, sd {number(sd)})"
        for name, value, sd in zip(bad.name, bad[col], bad[f"{col}:sd"], strict=True)
    )
    text = (
        f" Unstable across the {config.n_texts} texts (sd over texts at least the mean effect: "
        f"some texts carry it, not all): {listed}."
    )
    same = bad.loc[plateau(bad[col]).index]
    if len(same) >= 3:
        text += (
            f" {len(same)} unrelated components share one effect "
            f"({number(same[col].min(), '+.3f')} to {number(same[col].max(), '+.3f')}): a "
            "ceiling the late P0 attention of those texts reaches whichever of them is ablated "
            f"at P0, not {len(same)} separate mechanisms."
        )
    return text


def _what_it_is(trace: P0Trace) -> str:
    """How much of the exactly measured effect runs between MLPs."""
    frame = trace.edges.edges_frame().dropna(subset=["direct_effect"])
    if frame.empty:
        return "no edge was measured exactly"
    size = frame.direct_effect.abs()
    mlp = frame.sender.str.endswith("MLP") & frame.receiver.str.endswith("MLP")
    return (
        f"{percent(size[mlp].sum() / size.sum())} of the summed |direct effect| of its "
        f"{len(frame)} exactly measured edges runs from one MLP to another"
    )


def why_position_0(trace: P0Trace) -> str:
    """One sentence: what writes the P0 state (the blocks where its norm jumps) and what reads
    it (the circuit's edges into the keys of the late layers' heads, and where they come
    from)."""
    f, frame = trace.formation, trace.edges.edges_frame()
    late = set(f.late_layers)
    into_keys = frame[[_late_key(r, late) for r in frame.receiver]]
    value = into_keys.direct_effect.fillna(into_keys.estimated_effect).abs()
    writers = value.groupby(into_keys.sender).sum().sort_values(ascending=False).index[:3]
    state = (
        f"Why position 0: block(s) {', '.join(map(str, f.jump_layers))} write a massive state "
        f"there (norm {number(f.p0_norm[f.last_jump], ',.0f')} after block {f.last_jump}, "
        f"{number(f.norm_ratio[f.last_jump], '.0f')}x the median of the other positions)"
    )
    if into_keys.empty:
        return (
            f"{state}; none of the circuit's edges enters a late head's key input, so the "
            "circuit does not show how it is read (the claims, `--claims`, measure the keys)."
        )
    return (
        f"{state}, and the heads of layers {min(late)}-{max(late)} read it through their keys: "
        f"{len(into_keys):,} of the circuit's {len(frame):,} edges enter their key inputs at "
        f"position 0, most of it (by |effect|) from {', '.join(writers)}."
    )


def _late_key(receiver: str, late: set[int]) -> bool:
    comp = parse_node_id(receiver)
    return comp.kind == "head" and comp.part == "k" and comp.layer in late


def _left_out(trace: P0Trace) -> str:
    """Why the largest single-head effect is (or is not) in the node-level circuit."""
    heads = trace.localisation.heads
    col = "p0_attention@p0"
    top = heads.loc[heads[col].abs().idxmax()]
    name = node_id("head", int(top["layer"]), int(top["head"]))
    if top[col] < 0:
        return f"The largest single-head effect, {name} ({percent(top[col], 1)}), supports it."
    return (
        f"The largest single-head effect, {name} ({'+' + percent(top[col], 1)} when ablated), "
        "opposes the sink, so the node-level circuit, which keeps only components that support "
        "it, leaves it out."
    )


def stable_split(trace: P0Trace) -> tuple[list[str], list[str]]:
    """The node-level circuit's components (heads, then MLPs) split into those stable across
    the texts and those whose sd over texts is at least their |mean effect|."""
    col = "p0_attention@p0"
    loc, s = trace.localisation, trace.summary()
    sd = {}
    if f"{col}:sd" in loc.heads:
        for kind, frame in (("head", loc.heads), ("mlp", loc.mlps)):
            for r in frame.to_dict("records"):
                name = node_id(kind, int(r["layer"]), *([int(r["head"])] if kind == "head" else []))
                sd[name] = r[f"{col}:sd"] >= abs(r[col])
    names = [*s["node_circuit_heads"], *s["node_circuit_mlps"]]
    return [n for n in names if not sd.get(n)], [n for n in names if sd.get(n)]


def finding_text(trace: P0Trace) -> str:
    """The finding in a few sentences, then the headline numbers (Markdown list)."""
    s, e, cfg = trace.summary(), trace.edges.summary(), trace.edges.config
    f, lo_hi = e["heldout_faithfulness"], e["heldout_faithfulness_ci"]
    late = trace.formation.late_layers
    rough = trace.config.rough()
    sentence = (
        f"In {display_name(trace.model)}, the late P0 attention (the attention layers "
        f"{late[0]}-{late[-1]} pay to position 0: {number(s['late_p0_attention_clean'], '.3f')} "
        f"on average over heads, later queries and texts) is carried by an edge circuit of "
        f"{e['n_edges']:,} of the model's {e['n_edges_total']:,} direct edges between "
        f"components. On {e['n_heldout_texts']} held-out texts the circuit alone keeps f = "
        f"{number(f)} of it{above_one(f, e['complement_faithfulness'])}; random circuits of the "
        f"same size keep {number(e['random_faithfulness_mean'])}. What the circuit is: "
        f"{_what_it_is(trace)}. {why_position_0(trace)} "
        f"{strongest_edges_text(trace.edges.edges_frame(), cfg.method)} Colours and signs "
        "everywhere: blue (a negative change when removed) supports the sink, orange opposes it."
    )
    stable, unstable = stable_split(trace)
    heads = ", ".join(n for n in stable if n in s["node_circuit_heads"]) or "none"
    mlps = ", ".join(n for n in stable if n in s["node_circuit_mlps"]) or "none"
    shaky = f" (left out as unstable across texts: {', '.join(unstable)})" if unstable else ""
    numbers = [
        f"- circuit size: {e['n_edges']:,} direct edges ({e['n_senders']} sending components) "
        f"of {e['n_edges_total']:,}",
        f"- held-out faithfulness f: {number(f)} "
        f"({interval_text(lo_hi, e['n_heldout_texts'], '95% interval ')}), |1 - f| = "
        f"{number(abs(1 - f))}; on the fit texts "
        f"{number(e['fit_faithfulness'])} (size rule: the smallest grown circuit "
        f"{rule_text(cfg.size_rule, cfg.target, cfg.target_band)}; {e['size_rule_fired']})",
        f"- random circuits of the same size: {number(e['random_faithfulness_mean'])} +- "
        f"{number(e['random_faithfulness_sd'])}; the complement (every other edge): "
        f"{number(e['complement_faithfulness'])}",
        f"- edge stability: {percent(e['stability_mean'])} of resamples keep an edge, on average",
        f"- node-level first view (one component at a time, those stable across texts): heads "
        f"{heads}; MLPs {mlps}{shaky}. " + _left_out(trace),
    ]
    return (f"**{rough}**\n\n" if rough else "") + sentence + "\n\n" + "\n".join(numbers)


CAPTIONS = {
    "variants": "Does the sink stay at position 0 whatever token is there? Left: the attention "
    "each layer pays to position 0; right: the norm of position 0's residual, one line per "
    "first-token variant (thick grey: the median norm of the other positions; dotted grey: "
    "blocks where the P0 norm jumps).",
    "heads": "What each attention head does to the sink when ablated at P0 (left) or at a "
    "control position (middle), and to the P0 norm (right): relative change, blue where the "
    "head supports the sink (ablating lowers it), orange where it opposes it; boxed heads make "
    "up the node-level circuit (supporting heads only); hatched cells are unstable: their sd "
    "over the texts is at least their mean effect, which some texts carry and others not.",
    "mlps": "The same for each MLP, one panel per measurement: blue bars support the sink, "
    "orange bars oppose it; * marks the MLPs of the node-level circuit.",
    "position": "Position, not content: the same token at position 0 and at a later position, "
    "its residual norm (left) and the attention it receives (right) per layer.",
    "faithfulness_curve": "How much of the late P0 attention circuits of each size keep, on the "
    "fit and the held-out texts; the vertical line is the chosen circuit, the cross the random "
    "circuits of its size (mean +- sd).",
    "faithfulness_curve_by_kind": "the faithfulness curve per kind of text: for every circuit "
    "size, f on the fit and on the held-out texts of each kind (and all), with their counts",
    "faithfulness_per_text": "with --edge-text-grid: the grown circuit at a fine grid "
    "of sizes on every fit and held-out text (value, model, empty, faithfulness), for trying "
    "size rules without the model (attn_sink_circuits.discovery.grid_rules)",
    "grid_edges": "with --edge-text-grid: every edge of a grid circuit, its rank in "
    "growth order and the smallest grid size that keeps it",
    "edge_circuit": "the circuit's direct edges; direct_effect: exact change of the late P0 "
    "attention when the edge alone is removed, estimated_effect: the method's estimate of the "
    "same (both negative = supports); role in words",
}
"""What each P0 figure and table shows."""

SUMMARY_KEYS = {
    "model": "the model traced",
    "edge_circuit_edges": "edge circuit (experiment 7, the headline): its direct edges",
    "edge_circuit_of_all_edges": "edge circuit: direct edges in the model's whole graph",
    "edge_circuit_components": "edge circuit: components sending at least one of its edges",
    "heldout_faithfulness": "edge circuit: f on the held-out texts, (m(circuit) - m(empty)) / "
    "(m(model) - m(empty)) of the late P0 attention; 1 = reproduces the model, above 1 = the "
    "edges left out oppose the sink on net",
    "heldout_faithfulness_ci": "edge circuit: 95% bootstrap interval of f over held-out texts",
    "random_faithfulness_mean": "edge circuit: mean f of random circuits of the same size",
    "random_faithfulness_sd": "edge circuit: their standard deviation",
    "complement_faithfulness": "edge circuit: f of every edge but the circuit's",
    "fit_faithfulness": "edge circuit: f on the fit texts",
    "size_rule": "edge circuit: the rule that chose its size (band_by_kind: the smallest grown "
    "circuit with fit f inside target_band for every kind of fit text and overall; target: the "
    "smallest with fit f >= target)",
    "size_rule_fired": "edge circuit: the rule that chose it, or the rule's fallback when no "
    "grown circuit met it",
    "target_reached_on_fit": "edge circuit: whether a grown circuit met the size rule on the fit "
    "texts (the name is kept from the target rule)",
    "edge_stability_mean": "edge circuit: share of bootstrap resamples of the fit texts keeping "
    "an edge, mean over its edges",
    "n_fit_texts": "edge circuit: texts it was fitted on",
    "n_heldout_texts": "edge circuit: texts it was judged on",
    "heldout_by_kind": "edge circuit: f per kind of held-out text",
    "edge_ablation": "edge circuit: how an edge is removed",
    "node_ablation": "node-level view: how a component is removed",
    "jump_layers": "blocks across which the P0 norm jumps (where the P0 state forms)",
    "late_layers": "layers whose P0 attention is the sink explained (after the last jump)",
    "p0_norm_after_last_jump": "residual norm at position 0 after the last jump block",
    "late_p0_attention_clean": "the sink: attention of the late layers to position 0 (mean over "
    "heads, queries i >= 1, texts)",
    "node_circuit_heads": "node-level view (experiments 3-6): heads whose ablation at P0 lowers "
    "the sink by >= keep_share of the strongest head's effect (supporting heads only)",
    "node_circuit_mlps": "node-level view: MLPs chosen the same way",
    "node_share_removed_by_circuit": "node-level view: share of the drop (from ablating every "
    "component of the formation blocks) that ablating the node-level circuit causes",
    "node_share_restored_by_circuit": "node-level view: share of that drop undone by patching "
    "only the circuit back",
    "node_share_removed_by_random": "node-level view: share removed by as many random components",
    "node_sd_over_texts_circuit_ablated": "node-level view: sd over texts of the share removed",
    "node_sd_over_texts_all_but_circuit_ablated": "node-level view: sd over texts of the share "
    "restored",
    "node_sd_over_texts_random_control_ablated": "node-level view: sd over texts of the random "
    "share",
    "sink_stays_at_0": "per first-token variant: share of texts whose most-attended / largest-"
    "norm token is position 0, and the P0 attention mass",
    "claims": "with --claims: the papers' claims measured, a verdict each (claims.csv)",
}
"""What each key of the P0 summary means; node-level keys start with node_, the edge circuit's
are marked "edge circuit"."""
