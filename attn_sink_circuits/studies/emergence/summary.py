"""What a series says, per training run: when the sink forms, where it first forms, where it
ends, the final circuit, and the sequence of phases (`run_summary`); and the text of it."""

from __future__ import annotations

import pandas as pd

from attn_sink_circuits.studies.emergence.measure import NO_SINK


def phase_sequence(phases: list[str], steps: list) -> list[dict]:
    """Runs of equal phases in checkpoint order: phase, first and last step, checkpoints."""
    runs: list[dict] = []
    for p, s in zip(phases, steps, strict=True):
        if runs and runs[-1]["phase"] == p:
            runs[-1] |= {"last_step": s, "checkpoints": runs[-1]["checkpoints"] + 1}
        else:
            runs.append({"phase": p, "first_step": s, "last_step": s, "checkpoints": 1})
    return runs


def _value(row: pd.Series, key: str):
    value = row.get(key)
    return None if value is None or (isinstance(value, float) and value != value) else value


def run_summary(table: pd.DataFrame) -> dict:
    """The closing numbers of one run's checkpoints (rows in step order)."""
    formed = table[table.phase != NO_SINK]
    first = formed.iloc[0] if len(formed) else None
    last = table.iloc[-1]
    with_edges = (
        table[table.get("edges", pd.Series(dtype=float)).notna()] if "edges" in table else []
    )
    final_edges = with_edges.iloc[-1] if len(with_edges) else None
    return {
        "checkpoints": len(table),
        "last_step": int(last.step),
        "final_heldout_loss": _value(last, "heldout_loss"),
        "sink_forms_at_step": None if first is None else int(first.step),
        "first_sink": None if first is None else {
            "phase": first.phase, "sink_position": int(first.sink_position),
            "massive_layer": _value(first, "massive_layer"), "p0_mass": float(first.p0_mass),
        },
        "final": {
            "phase": last.phase, "sink_position": int(last.sink_position),
            "massive_layer": _value(last, "massive_layer"), "p0_mass": float(last.p0_mass),
            "sink_rate": float(last.sink_rate), "circuit_heads": _value(last, "circuit_heads"),
            "circuit_mlps": _value(last, "circuit_mlps"),
        },
        "final_edge_circuit": None if final_edges is None else {
            "step": int(final_edges.step), "edges": int(final_edges.edges),
            "edges_total": int(final_edges.edges_total),
            "heldout_faithfulness": _value(final_edges, "heldout_faithfulness"),
            "heldout_cmd": _value(final_edges, "heldout_cmd"),
            "random_faithfulness": _value(final_edges, "random_faithfulness"),
            "edge_stability": _value(final_edges, "edge_stability"),
        },
        "phases": phase_sequence(list(table.phase), [int(s) for s in table.step]),
    }  # fmt: skip


def summary_text(run: str, s: dict) -> str:
    """A few lines saying what the run's series shows."""
    lines = [f"{run}: {s['checkpoints']} checkpoints to step {s['last_step']}"]
    if s["sink_forms_at_step"] is None:
        lines.append("  no checkpoint reaches the sink threshold (phase 'no sink' throughout)")
    else:
        f = s["first_sink"]
        lines.append(
            f"  sink first at step {s['sink_forms_at_step']}: {f['phase']}, position "
            f"{f['sink_position']}, P0 massive after block {f['massive_layer']}"
        )
    e = s["final"]
    lines.append(
        f"  final: {e['phase']}, position {e['sink_position']}, massive after block "
        f"{e['massive_layer']}, P0 mass {e['p0_mass']:.2f}, sink rate {e['sink_rate']:.2f}, "
        f"node circuit {e['circuit_heads'] or '-'} / {e['circuit_mlps'] or '-'}"
    )
    if (c := s["final_edge_circuit"]) is not None:
        lines.append(
            f"  edge circuit at step {c['step']}: {c['edges']} of {c['edges_total']} edges, "
            f"held-out f {c['heldout_faithfulness']:.2f} (|1-f| {c['heldout_cmd']:.2f}), "
            f"random {c['random_faithfulness']:.2f}, stability {c['edge_stability']:.2f}"
        )
    seq = " -> ".join(f"{p['phase']} ({p['first_step']}-{p['last_step']})" for p in s["phases"])
    lines.append(f"  phases: {seq}")
    return "\n".join(lines)


TRAJECTORY_COLUMNS = (
    "step", "heldout_loss", "p0_mass", "p0_mass_max_head", "p1_mass", "sink_rate",
    "sink_position", "norm_position", "norm_position_share", "p0_norm_ratio_max",
    "massive_layer", "jump_layers", "circuit_heads", "circuit_mlps", "edges",
    "heldout_faithfulness", "random_faithfulness", "phase",
)  # fmt: skip
"""The columns of the trajectory table in the docs (see `EmergenceResult.table`)."""


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:.0f}" if value.is_integer() and abs(value) >= 10 else f"{value:.3f}"
    return str(value)


def trajectory_markdown(table: pd.DataFrame) -> str:
    """One markdown row per checkpoint with the `TRAJECTORY_COLUMNS` present in `table`."""
    cols = [c for c in TRAJECTORY_COLUMNS if c in table]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for rec in table[cols].astype(object).to_dict(orient="records"):
        lines.append("| " + " | ".join(_cell(rec[c]) for c in cols) + " |")
    return "\n".join(lines)
