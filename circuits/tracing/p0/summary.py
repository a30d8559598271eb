"""The P0 trace's findings in words (Markdown), from its summary and tables."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from circuits._repr import number, percent
from circuits.tracing.edge_text import edge_circuit_text, kinds_text

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
        f"**Node-level first view.** Heads: {', '.join(s['circuit_heads']) or 'none'}; MLPs: "
        f"{', '.join(s['circuit_mlps']) or 'none'} (components whose ablation at P0 lowers the "
        f"late P0 attention by >= {percent(c.keep_share)} of the strongest effect of their kind).",
        f"**Causal confirmation.** Ablating the circuit at P0 removes "
        f"{percent(s['fraction_removed_by_circuit'])} of the drop that ablating every attention "
        f"and MLP output of blocks 0-{f.last_jump} at P0 causes (P0 attention "
        f"{number(conf.loc['all_formation_ablated', 'p0_attention'], '.3f')}); patching only the "
        f"circuit back restores {percent(s['fraction_restored_by_circuit'])}; ablating as many "
        f"random components removes {percent(s['fraction_removed_by_random'])}. Run on each "
        "text alone, the three fractions vary by (sd over texts) "
        + " / ".join(
            number(s.get("sd_over_texts_" + run, math.nan))
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
