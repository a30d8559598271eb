"""The P0 trace's findings in words (Markdown), from its summary and tables."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from circuits.tracing.p0.pipeline import P0Trace


def summary_text(trace: P0Trace) -> str:
    """Where the P0 state forms, the circuit, its causal confirmation, position vs content."""
    s = trace.summary()
    c = trace.config
    f = trace.formation
    conf = trace.confirmation.set_index("run")
    massive = max(f.norm_ratio[j] for j in f.jump_layers)
    lines = [
        f"**Where the P0 state forms.** The P0 norm jumps across block(s) {f.jump_layers} "
        f"(growth >= {c.jump_factor}x and norm ratio > {c.massive_ratio}; largest ratio at a "
        f"jump {massive:.1f}); after block {f.last_jump} it is {f.p0_norm[f.last_jump]:.0f}. The "
        f"sink explained is the P0 attention mass over layers {s['late_layers']}: "
        f"{s['late_p0_attention_clean']:.3f} (mean over heads, queries i >= 1, texts).",
        f"**Circuit.** Heads: {', '.join(s['circuit_heads']) or 'none'}; MLPs: "
        f"{', '.join(s['circuit_mlps']) or 'none'} (components whose ablation at P0 lowers the "
        f"late P0 attention by >= {c.keep_share:.0%} of the strongest effect of their kind).",
        f"**Causal confirmation.** Ablating the circuit at P0 removes "
        f"{s['fraction_removed_by_circuit']:.0%} of the drop that ablating every attention and MLP "
        f"output of blocks 0-{f.last_jump} at P0 causes (P0 attention "
        f"{conf.loc['all_formation_ablated', 'p0_attention']:.3f}); patching only the circuit "
        f"back restores {s['fraction_restored_by_circuit']:.0%}; ablating as many random "
        f"components removes {s['fraction_removed_by_random']:.0%}. Run on each text alone, "
        "the three fractions vary by (sd over texts) "
        + " / ".join(
            f"{s.get('sd_over_texts_' + run, math.nan):.2f}"
            for run in ("circuit_ablated", "all_but_circuit_ablated", "random_control_ablated")
        )
        + ".",
        "**Position, not content.** Per first-token variant: share of texts whose "
        "most-attended / largest-norm token is position 0, and the P0 attention mass: "
        + "; ".join(
            f"{k} {v['by_attention']:.0%} / {v['by_norm']:.0%}, mass {v['p0_mass']:.2f}"
            for k, v in s["sink_stays_at_0"].items()
        )
        + ". (`repeated`: every position holds the same token, so every position sees what P0 "
        "sees; a low mass there means no single sink forms.)",
        "Weights are dequantised GGUF (Q4) approximations of the originals: absolute numbers "
        "differ slightly from full-precision models.",
    ]
    return "\n\n".join(lines)
