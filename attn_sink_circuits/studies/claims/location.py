"""Seed 001's literal claim about where the P0 sink circuit sits: "in the first two transformer
blocks". Read from where the P0 state is formed, per text: the last block of its P0 norm jump
by the P0 tracer's rule (`find_formation`: blocks whose P0 norm grows >= `jump_factor` times
into a massive state, > `massive_ratio` times the other positions' median; with none, the block
of largest growth if that reaches `jump_factor`), with block 0 included: the embedding is its
input. The claim holds when that block is at most `formed_by_block` (block 1: blocks 0 and 1 are
the first two).

The other Peng rows read the P0 tracer's formation on the mean over texts, which starts at
block 1 (no norm before block 0 is given to it): where block 0 makes the state (Gemma 3), the
two differ, and the detail says so."""

from __future__ import annotations

import math

from attn_sink_circuits.studies.claims.config import ClaimsConfig
from attn_sink_circuits.studies.claims.identification import PAPER
from attn_sink_circuits.studies.claims.inputs import Basis
from attn_sink_circuits.studies.claims.table import AUTO, Claim, claim_row
from attn_sink_circuits.studies.claims.verdict import Interval
from attn_sink_circuits.studies.p0.formation import find_formation


def text_blocks(inputs: Basis, config: ClaimsConfig) -> list[float] | None:
    """Per text, the last block of its P0 norm jump (the P0 tracer's `find_formation` on that
    text's norms, the embedding put before them as block 0's input when it was kept; nan where
    the block it finds grows the norm less than jump_factor times); None when the per-text
    norms were not kept."""
    if inputs.p0_norm is None or inputs.norm_ratio is None:
        return None
    embed = inputs.embed_norm is not None and inputs.embed_ratio is not None
    shift = 1 if embed else 0  # list index of block 0's output
    out = []
    for t in range(inputs.n_texts):
        norm, ratio = inputs.p0_norm[t].tolist(), inputs.norm_ratio[t].tolist()
        if embed:
            norm = [float(inputs.embed_norm[t]), *norm]
            ratio = [float(inputs.embed_ratio[t]), *ratio]
        last = find_formation(norm, ratio, jump_factor=config.jump_factor,
                              massive_ratio=config.massive_ratio).last_jump  # fmt: skip
        grown = norm[last] >= config.jump_factor * norm[last - 1]
        out.append(float(last - shift) if grown else math.nan)
    return out


def _block_zero(inputs: Basis) -> str:
    if inputs.embed_norm is None or inputs.p0_norm is None:
        return "block 0 not judged (this run kept no embedding norms)"
    growth = float((inputs.p0_norm[:, 0] / inputs.embed_norm).mean())
    return f"block 0: P0 norm x{growth:.3g} from the embedding"


def location_claims(inputs: Basis, config: ClaimsConfig) -> list[Claim]:
    """One row: per text, the block after which the P0 state is formed, against
    `formed_by_block` (see the module). Not applicable without a P0 norm jump. A run saved before the per-text norms were kept gives the P0
    tracer's last jump block, found on the mean over texts."""
    f = inputs.formation
    per_text = text_blocks(inputs, config)
    given, values, missing = None, per_text or [], inputs.no_jump()
    if per_text is None:
        given = Interval(float(f.last_jump), math.nan, math.nan, inputs.n_texts)
        how = (
            "the P0 tracer's last jump block on the mean over texts (this run kept no per-text "
            "or embedding norms: block 0 not judged)"
        )
    else:
        found = sorted({b for b in per_text if math.isfinite(b)})
        how = "per text: " + (", ".join(f"{b:g} x{per_text.count(b)}" for b in found) or "none")
        how += f"; {_block_zero(inputs)}"
        if not found and not missing:
            missing = f"no block grows the P0 norm >= jump_factor times in any text ({how})"
    detail = f"the P0 tracer's jump blocks (mean over texts, blocks >= 1) {f.jump_layers}; {how}"
    if f.norm_ratio:
        shown = list(range(config.formed_by_block + 1)) + [f.last_jump]
        detail += "; P0 norm / other positions' median after blocks " + ", ".join(
            f"{b}: {f.norm_ratio[b]:.3g}x" for b in dict.fromkeys(shown)
        )
    return [
        claim_row(
            config, values, "formed_by_block", given=given, ok=None if missing else AUTO,
            sense="<=", family="location", claim="location.first_two_blocks", paper=PAPER,
            wording="the P0 sink circuit sits in the first two transformer blocks (seed 001)",
            measurement="the last block of the P0 norm jump (the P0 tracer's rule, block 0 "
            "from the embedding), per text", rule="block <= formed_by_block",
            detail=missing or detail, over=inputs.over(),
        )
    ]  # fmt: skip
