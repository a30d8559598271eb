"""Seed 001's literal claim about where the P0 sink circuit sits: "in the first two transformer
blocks". Read from where the P0 state forms: the last block of the P0 norm jump (the P0
tracer's `find_formation`), per text; the claim holds when it is at most `formed_by_block`
(block 1: blocks 0 and 1 are the first two)."""

from __future__ import annotations

import math

from circuits.claims.config import ClaimsConfig
from circuits.claims.identification import PAPER
from circuits.claims.inputs import Basis
from circuits.claims.table import AUTO, Claim, claim_row
from circuits.claims.verdict import Interval


def location_claims(inputs: Basis, config: ClaimsConfig) -> list[Claim]:
    """One row: per text, the block after which the P0 state is formed, against
    `formed_by_block`. Not applicable without a P0 norm jump (no state is formed). A run saved
    before the per-text norms were kept gives the block found on the mean over texts (with a
    BOS token every text gives that block: its P0 norms are the same)."""
    f = inputs.formation
    per_text = inputs.last_jumps(config.jump_factor, config.massive_ratio)
    given = None
    if per_text is None:
        given = Interval(float(f.last_jump), math.nan, math.nan, inputs.n_texts)
        how = (
            "every text's P0 norms are the same (BOS at P0)"
            if inputs.bos_at_p0
            else ("per-text blocks were not kept by this run: the block found on the mean P0 norm")
        )
    else:
        blocks = sorted(set(per_text))
        how = "blocks per text: " + ", ".join(f"{b} x{per_text.count(b)}" for b in blocks)
    detail = f"P0 norm jump blocks (mean over texts) {f.jump_layers}; {how}"
    if f.norm_ratio:
        shown = list(range(config.formed_by_block + 1)) + [f.last_jump]
        detail += "; P0 norm / other positions' median after blocks " + ", ".join(
            f"{b}: {f.norm_ratio[b]:.3g}x" for b in dict.fromkeys(shown)
        )
    missing = inputs.no_jump()
    return [
        claim_row(
            config, [] if missing else per_text or [], "formed_by_block", given=given,
            ok=None if missing else AUTO, sense="<=", family="location",
            claim="location.first_two_blocks", paper=PAPER,
            wording="the P0 sink circuit sits in the first two transformer blocks (seed 001)",
            measurement="the block after which the P0 state is formed (last block of the P0 "
            "norm jump), per text", rule="block <= formed_by_block",
            detail=missing or detail, over=inputs.over(),
        )
    ]  # fmt: skip
