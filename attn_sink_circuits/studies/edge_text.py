"""What every tracer says about its edge circuit (Markdown), as `figures.py` is what it draws."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attn_sink_circuits._repr import number, percent
from attn_sink_circuits.discovery.size_rule import rule_text
from attn_sink_circuits.stats import MIN_N, N_TOO_SMALL, has_interval
from attn_sink_circuits.studies.edge_list import sign_disagreement_text, strongest_edges_text

if TYPE_CHECKING:
    import pandas as pd

    from attn_sink_circuits.discovery import EdgeCircuit


def edge_circuit_text(circuit: EdgeCircuit, *, what: str, units: str, how: str) -> str:
    """The circuit's size, its faithfulness on the held-out `units` (keeping `what`) against
    random circuits of its size and the complement, its edge stability, its strongest edges
    (`strongest_edges_text`, the list every text names) and where the method's estimate and the
    exact effect disagree in sign; `how` says how it was found (method, growth, ablation)."""
    s, cfg = circuit.summary(), circuit.config
    frame = circuit.edges_frame()
    disagree = sign_disagreement_text(frame, cfg.method)
    return (
        f"the smallest circuit {rule_text(cfg.size_rule, cfg.target, cfg.target_band, units)} "
        f"has {s['n_edges']:,} of {s['n_edges_total']:,} direct edges "
        f"({s['n_senders']} sending components; {how}). On the held-out {units} it keeps "
        f"{number(s['heldout_faithfulness'])} of {what} ("
        f"{interval_text(s['heldout_faithfulness_ci'], s['n_heldout_texts'], '95% bootstrap interval ')}"
        f"; |1 - f| = {number(abs(1 - s['heldout_faithfulness']))})"
        f"{above_one(s['heldout_faithfulness'], s['complement_faithfulness'])}; "
        f"{len(circuit.heldout.random_faithfulness)} random circuits "
        f"of the same size keep {number(s['random_faithfulness_mean'])} +- "
        f"{number(s['random_faithfulness_sd'])}, the complement "
        f"{number(s['complement_faithfulness'])}. Its edges are kept in "
        f"{percent(s['stability_mean'])} of bootstrap resamples of the fit {units} on average. "
        + (
            ""
            if s["reached_on_fit"]
            else f"No grown circuit met the size rule on the fit {units}: kept "
            f"{s['size_rule_fired']}. "
        )  # fmt: skip
        + strongest_edges_text(frame, cfg.method)
        + (f" {disagree}" if disagree else "")
    )


def interval_text(ci, n: int, lead: str = "") -> str:
    """ "95% bootstrap interval 0.88-1.10" (`lead` + the interval) from `n` items, or "n too
    small for an interval: 4 < 5" below `attn_sink_circuits.stats.MIN_N`."""
    if not has_interval(n):
        return f"{N_TOO_SMALL} for an interval: {n} < {MIN_N}"
    return f"{lead}{number(ci[0])}-{number(ci[1])}"


def above_one(f: float, complement: float) -> str:
    """Why a faithfulness above 1 is possible, when it is (else ""). Faithfulness is
    (m(circuit) - m(empty)) / (m(model) - m(empty)): the circuit alone, every other edge
    removed, against the whole model."""
    if not f > 1:
        return ""
    return (
        f". A faithfulness above 1 means the circuit alone gives more of it than the whole "
        f"model: the edges left out oppose it on net, so removing them raises it (the "
        f"complement alone keeps {number(complement)})"
    )


def kinds_text(by_kind: pd.DataFrame, *, units: str) -> str:
    """The held-out judgement by kind (`attn_sink_circuits.discovery.kinds.judge_by_kind`) as a Markdown
    table: kind, held-out `units`, faithfulness with its 95% interval, |1 - f|, random
    circuits of the same size."""
    rows = [
        f"| {r.kind} | {r.n_texts} | {number(r.heldout_faithfulness)} "
        f"({interval_text((r.ci_low, r.ci_high), r.n_texts)}) | {number(r.abs_1_minus_f)} | "
        f"{number(r.random_mean)} +- {number(r.random_sd)} |"
        for r in by_kind.itertuples()
    ]
    return "\n".join(
        [
            f"**By kind of text.** The circuit on the held-out {units} of each kind (95% "
            f"bootstrap interval over them, made from {MIN_N} {units} or more; |1 - f| is 0 for "
            "a circuit that reproduces the model):",
            "",
            f"| kind | held-out {units} | faithfulness (95% CI) | abs(1 - f) | random circuits |",
            "|---|---|---|---|---|",
            *rows,
        ]
    )


__all__ = ["above_one", "edge_circuit_text", "interval_text", "kinds_text"]
