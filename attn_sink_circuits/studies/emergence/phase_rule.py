"""The phase rule of issue 37 and seed 001's three predictions judged by it (settings:
`PhaseRuleConfig`; measurements: `attn_sink_circuits.studies.emergence.phases.phase_row`). Fixed before the runs
it judges (docs/emergence/PLAN.md).

A checkpoint's phase, in this order:
1. `position 1`: at least `p1_rate` of the heads have Gu's alpha at position 1 above eps;
2. `no sink`: Gu's Sink^eps rate at position 0 is below `formed_rate`;
3. where the sink is: the first block across which the P0 norm ratio grows `jump_factor`
   times (the block that makes the P0 state, seed 001's P0-sink circuit): `first two blocks`
   (block < `early_blocks`), `middle layers`, `last block`, or `sink, no P0 norm jump`.

Per run (checkpoints in step order; formation = the first checkpoint with a sink):
- mid-layer first: the sink's block at formation (the `window` checkpoints from it) is in the
  middle layers;
- a position-1 phase: some checkpoint's rate at position 1 has its lower bound >= `p1_rate`
  (does not hold: every upper bound below it);
- final concentration: the sink's block in the last `window` checkpoints is in the first two;
- convergence: "settled" (first checkpoint from which every later one has a sink made in the
  first two blocks) within `coincide_share` of the run of the loss plateau.
Each reads the block of the P0 norm jump ("state"), and again the lowest layer holding a sink
head ("attention"). With no sink formed, all are "not testable at this scale".
"""

from __future__ import annotations

from attn_sink_circuits.studies.emergence.config import PhaseRuleConfig

POSITION_1 = "position 1"
NO_SINK = "no sink"
NO_JUMP = "sink, no P0 norm jump"
EARLY = "first two blocks"
MIDDLE = "middle layers"
LAST = "last block"
HOLDS, FAILS, UNDECIDED = "holds", "does not hold", "undecided"
NOT_TESTABLE = "not testable at this scale"
READINGS = {"state": "jump_block", "attention": "onset_layer"}
"""The two readings of "where the sink is": the block of the P0 norm jump, the lowest layer
with a sink head."""


def place(block: int | None, n_layers: int, config: PhaseRuleConfig) -> str | None:
    if block is None:
        return None
    if block < config.early_blocks:
        return EARLY
    return LAST if block == n_layers - 1 else MIDDLE


def gu_rate(row: dict, config: PhaseRuleConfig, position: int = 0) -> list[float]:
    """The row's Gu rate at position 0 or 1 (point, low, high), counted as the rule says."""
    key = "gu_rate" if position == 0 else "gu_rate_p1"
    return row[key if config.rate_counting == "per_text" else f"{key}_window_mean"]


def has_sink(row: dict, config: PhaseRuleConfig) -> bool:
    return gu_rate(row, config)[0] >= config.formed_rate


def checkpoint_phase(row: dict, n_layers: int, config: PhaseRuleConfig) -> str:
    if gu_rate(row, config, 1)[0] >= config.p1_rate:
        return POSITION_1
    if not has_sink(row, config):
        return NO_SINK
    return place(row["jump_block"], n_layers, config) or NO_JUMP


def _agreement(places: list[str | None], wanted: str) -> str:
    found = [p for p in places if p is not None]
    if not found:
        return NOT_TESTABLE
    if all(p == wanted for p in found):
        return HOLDS
    return FAILS if wanted not in found else UNDECIDED


def formation_index(rows: list[dict], config: PhaseRuleConfig) -> int | None:
    return next((i for i, r in enumerate(rows) if has_sink(r, config)), None)


def position1_verdict(rows: list[dict], config: PhaseRuleConfig) -> str:
    if formation_index(rows, config) is None:
        return NOT_TESTABLE
    if any(gu_rate(r, config, 1)[1] >= config.p1_rate for r in rows):
        return HOLDS
    if all(gu_rate(r, config, 1)[2] < config.p1_rate for r in rows):
        return FAILS
    return UNDECIDED


def location_verdicts(rows: list[dict], n_layers: int, key: str, config) -> dict:
    """Mid-layer first and final concentration, reading the location from `key`."""
    f = formation_index(rows, config)
    if f is None:
        return {"mid_layer_first": NOT_TESTABLE, "final_first_two": NOT_TESTABLE}
    first = [place(r[key], n_layers, config) for r in rows[f : f + config.window]]
    last_rows = rows[-config.window :]
    last = [place(r[key], n_layers, config) for r in last_rows]
    final = _agreement(last, EARLY) if all(has_sink(r, config) for r in last_rows) else NOT_TESTABLE
    return {"mid_layer_first": _agreement(first, MIDDLE), "final_first_two": final}


def settled_index(rows: list[dict], n_layers: int, config: PhaseRuleConfig) -> int | None:
    """The first checkpoint from which every later one has a sink made in the first blocks."""
    good = [has_sink(r, config) and place(r["jump_block"], n_layers, config) == EARLY for r in rows]
    for i in range(len(rows)):
        if all(good[i:]):
            return i
    return None


def plateau_index(losses: list[float], config: PhaseRuleConfig) -> int:
    final, drop = losses[-1], losses[0] - losses[-1]
    return next(i for i, x in enumerate(losses) if x <= final + config.plateau_share * drop)


def convergence(steps: list[int], losses: list[float], settled: int | None, config) -> dict:
    plateau = plateau_index(losses, config)
    out = {"plateau_step": steps[plateau], "settled_step": None, "verdict": NOT_TESTABLE}
    if settled is not None:
        gap = abs(steps[settled] - steps[plateau])
        ok = gap <= config.coincide_share * steps[-1]
        out |= {"settled_step": steps[settled], "verdict": HOLDS if ok else FAILS}
    return out


def _at(rows: list[dict], steps: list[int], i: int | None) -> dict | None:
    if i is None:
        return None
    r = rows[i]
    keys = ("gu_rate", "jump_block", "onset_layer", "sink_heads_by_layer")
    return {"step": steps[i]} | {k: r[k] for k in keys}


def run_verdicts(
    rows: list[dict],
    steps: list[int],
    losses: list[float],
    n_layers: int,
    config: PhaseRuleConfig = PhaseRuleConfig(),  # noqa: B008 (frozen)
) -> dict:
    """What the rule says of one run: phases, formation, locations, the verdicts, convergence."""
    f = formation_index(rows, config)
    library = next((s for r, s in zip(rows, steps, strict=True)
                    if r["all_head_p0_mass"] >= config.library_mass), None)  # fmt: skip
    p1_steps = [s for r, s in zip(rows, steps, strict=True)
                if checkpoint_phase(r, n_layers, config) == POSITION_1]  # fmt: skip
    verdicts = {"position_1_phase": position1_verdict(rows, config)}
    for reading, key in READINGS.items():
        for name, v in location_verdicts(rows, n_layers, key, config).items():
            verdicts[f"{name}_{reading}"] = v
    return {
        "phases": [checkpoint_phase(r, n_layers, config) for r in rows],
        "formation": _at(rows, steps, f),
        "final": _at(rows, steps, len(rows) - 1),
        "library_sink_step": library,
        "position_1_steps": p1_steps,
        "verdicts": verdicts,
        "convergence": convergence(steps, losses, settled_index(rows, n_layers, config), config),
    }
