"""Where the P0 state forms: the blocks across which the P0 norm jumps to a massive state."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attn_sink_circuits.studies.p0.config import P0Config


@dataclass
class Formation:
    """Per-layer P0 norm (mean over texts) and norm ratio (P0 norm / median norm of the other
    positions), the blocks that amplify it, and the late layers whose attention to P0 is the
    sink being explained."""

    p0_norm: list[float]
    norm_ratio: list[float]
    jump_layers: list[int]
    late_layers: list[int]

    @property
    def last_jump(self) -> int:
        return self.jump_layers[-1]

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def find_formation(
    p0_norm: Sequence[float],
    norm_ratio: Sequence[float],
    *,
    jump_factor: float = P0Config.jump_factor,
    massive_ratio: float = P0Config.massive_ratio,
) -> Formation:
    """Blocks l >= 1 across which the P0 norm grows >= `jump_factor` times and after which it is
    massive (ratio > `massive_ratio`). With no such block, the block with the largest norm
    growth stands in (and the report says the state never became massive)."""
    n = len(p0_norm)
    growth = [p0_norm[layer] / p0_norm[layer - 1] for layer in range(1, n)]
    jumps = [
        layer
        for layer in range(1, n)
        if growth[layer - 1] >= jump_factor and norm_ratio[layer] > massive_ratio
    ]
    if not jumps:
        jumps = [1 + max(range(n - 1), key=growth.__getitem__)]
    late = list(range(jumps[-1] + 1, n)) or [n - 1]
    return Formation(list(map(float, p0_norm)), list(map(float, norm_ratio)), jumps, late)
