"""The secondary trace's findings in words (Markdown)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from circuits.tracing.secondary.pipeline import SecondaryTrace


def summary_text(trace: SecondaryTrace) -> str:
    """Corpus, rule, thresholds, events per label and tau, prompt / generated split, what
    each preset finds, and why nothing was traced if so."""
    s = trace.census.summary()
    c = trace.census
    parts = s["tokens_by_part"]
    split = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in parts.items())
    lines = [
        f"Model **{trace.model}**, "
        f"{s['n_texts']} texts, {s['n_tokens']} tokens ({s['n_unique_tokens']} with a new "
        f"prefix; {split}). Detection rule **{c.rule.name}** "
        f"({c.rule.describe(c.report.n_layers).split(': ', 1)[1]}); layers searched: "
        f"{s['searched_layers']}. Traced: labels {', '.join(c.labels)} at tau {c.tau:g}.",
    ]
    items = []
    for tau in c.taus:
        counts = ", ".join(
            f"{s[f'n_{label}_unique@{tau:g}']} {label}"
            for label in ("secondary", "primary-like", "noise")
        )
        items.append(
            f"- tau {tau:g}: {counts} (unique events); {s[f'n_levels@{tau:g}']} levels"
            + (f"; top: {s[f'top_level@{tau:g}']}" if f"top_level@{tau:g}" in s else "")
        )
    lines.append("\n".join(items))
    sel = s["selected_by_part"]
    if sel:
        where = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in sel.items())
        ranges = "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in s.get("ranges", {}).items())
        lines.append(f"Traced events by position: {where}. {ranges}.")
    lines.append(
        "Every preset on the same hidden states (table rule_comparison): "
        + "; ".join(f"**{name}** {line}" for name, line in s["rule_comparison"].items())
        + "."
    )
    if c.selected().empty:
        lines.append(
            f"**No {'/'.join(c.labels)} sinks at tau {c.tau:g}** in this corpus: of "
            f"{s['candidate_cos_total']} (token, layer) cosines, "
            f"{s['candidate_cos_above'].get(f'{c.tau:g}', 0)} pass the test at some layer (see "
            f"the histogram; layers searched: {s['searched_layers']}). The threshold was not "
            "lowered; experiments 2-6 have nothing to trace."
        )
        others = [
            f"{s[f'n_{label}_unique@{c.tau:g}']} {label}"
            for label in ("secondary", "primary-like", "noise")
            if label not in c.labels and s[f"n_{label}_unique@{c.tau:g}"]
        ]
        if others:
            lines.append(
                f"Events with other labels at tau {c.tau:g}: {', '.join(others)} (unique); "
                "trace them explicitly with `labels` (CLI: `--labels secondary primary-like`)."
            )
    lines += skipped_text(trace.swaps.skipped)
    if not trace.forming.frame.empty:
        lines.append(
            "Forming MLP (table forming_summary): block l_start's MLP output at each sink token "
            "against never-sink-like control tokens at the same layer; `crossed_at_mlp` is the "
            "share whose cosine with the sink first exceeds tau after the MLP (not already "
            "after the attention)."
        )
    fits = trace.fit.to_frame()
    if len(fits):
        items = [
            f"- {r.y} on log(MLP norm), {r.subset} sink tokens: slope {r.slope:.3g}, R^2 "
            f"{r.r2:.3g}, n {r.n}"
            for r in fits.itertuples()
        ]
        counts = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in trace.fit.counts.items())
        lines.append(f"Norm fits (table fits; points: {counts}):\n" + "\n".join(items))
    lines.append(
        "Weights are dequantised GGUF (Q4) approximations of the originals: absolute numbers "
        "differ slightly from full-precision models."
    )
    return "\n\n".join(lines)


def skipped_text(skipped: list[dict]) -> list[str]:
    """Why some chosen events were not swapped (empty when all were)."""
    if not skipped:
        return []
    where = ", ".join(f"text {d['text']} pos {d['position']}" for d in skipped[:8])
    return [
        f"{len(skipped)} chosen events were not swapped ({where}): every token of their run "
        "exceeds tau at some layer, so there is no never-sink-like token to average."
    ]
