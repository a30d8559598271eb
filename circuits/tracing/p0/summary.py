"""The P0 trace's findings in words (Markdown), from its summary and tables."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from circuits._repr import number, percent
from circuits.discovery.size_rule import rule_text
from circuits.tracing.edge_text import above_one, edge_circuit_text, kinds_text

if TYPE_CHECKING:
    from circuits.tracing.p0.pipeline import P0Trace


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
        f"late P0 attention by >= {percent(c.keep_share)} of the strongest effect of their kind).",
        f"**Causal confirmation.** Ablating the circuit at P0 removes "
        f"{percent(s['node_share_removed_by_circuit'])} of the drop that ablating every attention "
        f"and MLP output of blocks 0-{f.last_jump} at P0 causes (P0 attention "
        f"{number(conf.loc['all_formation_ablated', 'p0_attention'], '.3f')}); patching only the "
        f"circuit back restores {percent(s['node_share_restored_by_circuit'])}; ablating as many "
        f"random components removes {percent(s['node_share_removed_by_random'])}. Run on each "
        "text alone, the three fractions vary by (sd over texts) "
        + " / ".join(
            number(s.get("node_sd_over_texts_" + run, math.nan))
            for run in ("circuit_ablated", "all_but_circuit_ablated", "random_control_ablated")
        )
        + ".",
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


def _what_it_is(trace: P0Trace) -> str:
    """The circuit's strongest exactly measured edges and how much of their effect runs
    between MLPs."""
    frame = trace.edges.edges_frame().dropna(subset=["direct_effect"])
    if frame.empty:
        return "no edge was measured exactly"
    size = frame.direct_effect.abs()
    mlp = frame.sender.str.endswith("MLP") & frame.receiver.str.endswith("MLP")
    top = frame.loc[size.sort_values(ascending=False).index[:4]]
    edges = ", ".join(f"{r.sender} -> {r.receiver} ({number(r.direct_effect, '+.3f')})"
                      for r in top.itertuples())  # fmt: skip
    return (
        f"{percent(size[mlp].sum() / size.sum())} of the summed |direct effect| of its "
        f"{len(frame)} exactly measured edges runs from one MLP to another; the strongest "
        f"are {edges}"
    )


def _left_out(trace: P0Trace) -> str:
    """Why the largest single-head effect is (or is not) in the node-level circuit."""
    heads = trace.localisation.heads
    col = "p0_attention@p0"
    top = heads.loc[heads[col].abs().idxmax()]
    name = f"L{int(top['layer'])}.H{int(top['head'])}"
    if top[col] < 0:
        return f"The largest single-head effect, {name} ({percent(top[col], 1)}), supports it."
    return (
        f"The largest single-head effect, {name} ({'+' + percent(top[col], 1)} when ablated), "
        "opposes the sink, so the node-level circuit, which keeps only components that support "
        "it, leaves it out."
    )


def finding_text(trace: P0Trace) -> str:
    """The finding in a few sentences, then the headline numbers (Markdown list)."""
    s, e, cfg = trace.summary(), trace.edges.summary(), trace.edges.config
    f, lo_hi = e["heldout_faithfulness"], e["heldout_faithfulness_ci"]
    late = trace.formation.late_layers
    sentence = (
        f"In {trace.model}, the late P0 attention (the attention layers "
        f"{late[0]}-{late[-1]} pay to position 0: {number(s['late_p0_attention_clean'], '.3f')} "
        f"on average over heads, later queries and texts) is carried by an edge circuit of "
        f"{e['n_edges']:,} of the model's {e['n_edges_total']:,} direct edges between "
        f"components. On {e['n_heldout_texts']} held-out texts the circuit alone keeps f = "
        f"{number(f)} of it{above_one(f, e['complement_faithfulness'])}; random circuits of the "
        f"same size keep {number(e['random_faithfulness_mean'])}. What the circuit is: "
        f"{_what_it_is(trace)}. The P0 state forms where its norm jumps, in block(s) "
        f"{', '.join(map(str, trace.formation.jump_layers))}. Colours and signs everywhere: "
        "blue (a negative change when removed) supports the sink, orange opposes it."
    )
    heads = ", ".join(s["node_circuit_heads"]) or "none"
    mlps = ", ".join(s["node_circuit_mlps"]) or "none"
    numbers = [
        f"- circuit size: {e['n_edges']:,} direct edges ({e['n_senders']} sending components) "
        f"of {e['n_edges_total']:,}",
        f"- held-out faithfulness f: {number(f)} (95% interval {number(lo_hi[0])}-"
        f"{number(lo_hi[1])}), |1 - f| = {number(abs(1 - f))}; on the fit texts "
        f"{number(e['fit_faithfulness'])} (size rule: the smallest grown circuit "
        f"{rule_text(cfg.size_rule, cfg.target, cfg.target_band)}; {e['size_rule_fired']})",
        f"- random circuits of the same size: {number(e['random_faithfulness_mean'])} +- "
        f"{number(e['random_faithfulness_sd'])}; the complement (every other edge): "
        f"{number(e['complement_faithfulness'])}",
        f"- edge stability: {percent(e['stability_mean'])} of resamples keep an edge, on average",
        f"- node-level first view (one component at a time): heads {heads}; MLPs {mlps}. "
        + _left_out(trace),
    ]
    return sentence + "\n\n" + "\n".join(numbers)


CAPTIONS = {
    "variants": "Does the sink stay at position 0 whatever token is there? Left: the attention "
    "each layer pays to position 0; right: the norm of position 0's residual, one line per "
    "first-token variant (dashed black: the median norm of the other positions; dotted grey: "
    "blocks where the P0 norm jumps).",
    "heads": "What each attention head does to the sink when ablated at P0 (left) or at a "
    "control position (middle), and to the P0 norm (right): relative change, blue where the "
    "head supports the sink (ablating lowers it), orange where it opposes it; boxed heads make "
    "up the node-level circuit (supporting heads only).",
    "mlps": "The same for each MLP, one panel per measurement: blue bars support the sink, "
    "orange bars oppose it; * marks the MLPs of the node-level circuit.",
    "position": "Position, not content: the same token at position 0 and at a later position, "
    "its residual norm (left) and the attention it receives (right) per layer.",
    "faithfulness_curve": "How much of the late P0 attention circuits of each size keep, on the "
    "fit and the held-out texts; the vertical line is the chosen circuit, the cross the random "
    "circuits of its size (mean +- sd).",
    "faithfulness_curve_by_kind": "the faithfulness curve per kind of text: for every circuit "
    "size, f on the fit and on the held-out texts of each kind (and all), with their counts",
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
