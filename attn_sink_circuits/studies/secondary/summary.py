"""The secondary trace's findings in words (Markdown)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attn_sink_circuits.models.registry import display_name

if TYPE_CHECKING:
    from attn_sink_circuits.studies.secondary.census import SecondaryCensus
    from attn_sink_circuits.studies.secondary.pipeline import SecondaryTrace


def summary_text(trace: SecondaryTrace) -> str:
    """Corpus, rule, thresholds, events per label and tau, prompt / generated split, what
    each preset finds, and why nothing was traced if so."""
    s = trace.census.summary()
    lines = _census_lines(trace, s)
    if trace.census.selected().empty:
        lines += _nothing_traced(trace.census, s)
    lines += skipped_text(trace.swaps.skipped)
    lines += _forming_lines(trace)
    lines.append(
        "Weights are dequantised GGUF (Q4) approximations of the originals: absolute numbers "
        "differ slightly from full-precision models."
    )
    return "\n\n".join(lines)


def _census_lines(trace: SecondaryTrace, s: dict) -> list[str]:
    """The corpus and the rule, events per label and tau, where the traced ones are, and what
    every preset finds (`s`: the census's summary)."""
    c = trace.census
    split = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in s["tokens_by_part"].items())
    lines = [
        f"Model **{display_name(trace.model)}**, "
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
    if sel := s["selected_by_part"]:
        where = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in sel.items())
        ranges = "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in s.get("ranges", {}).items())
        lines.append(f"Traced events by position: {where}. {ranges}.")
    lines.append(
        "Every preset on the same hidden states (table rule_comparison): "
        + "; ".join(f"**{name}** {line}" for name, line in s["rule_comparison"].items())
        + "."
    )
    return lines


def _nothing_traced(c: SecondaryCensus, s: dict) -> list[str]:
    """Why no event was traced (how many cosines pass the test), and the events of other labels
    that could be (`s`: the census's summary)."""
    lines = [
        f"**No {'/'.join(c.labels)} sinks at tau {c.tau:g}** in this corpus: of "
        f"{s['candidate_cos_total']} (token, layer) cosines, "
        f"{s['candidate_cos_above'].get(f'{c.tau:g}', 0)} pass the test at some layer (see "
        f"the histogram; layers searched: {s['searched_layers']}). The threshold was not "
        "lowered; experiments 2-6 have nothing to trace."
    ]
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
    return lines


def _forming_lines(trace: SecondaryTrace) -> list[str]:
    """What the forming-MLP table compares, and the norm fits."""
    lines = []
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
    return lines


def skipped_text(skipped: list[dict]) -> list[str]:
    """Why some chosen events were not swapped (empty when all were)."""
    if not skipped:
        return []
    where = ", ".join(f"text {d['text']} pos {d['position']}" for d in skipped[:8])
    return [
        f"{len(skipped)} chosen events were not swapped ({where}): every token of their run "
        "exceeds tau at some layer, so there is no never-sink-like token to average."
    ]
