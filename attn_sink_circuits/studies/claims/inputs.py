"""What every P0 claim is measured on: the texts as token rows under each first-token variant
(the P0 tracer's `variant_tokens`), the main variant, and where the P0 state forms (the P0
tracer's `find_formation` on these texts). `Basis` is the part a saved run keeps (no tokens),
from which `attn_sink_circuits.studies.claims.rejudge` judges it again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.studies.claims.config import ClaimsConfig
from attn_sink_circuits.studies.p0.formation import Formation, find_formation
from attn_sink_circuits.studies.p0.inputs import variant_tokens


@dataclass
class Basis:
    """What the P0 claims are measured on, without the tokens (a saved run can be judged again
    from it): the model, `main` (the first-token variant the model reads by default: "bos"
    when it prepends one, else "no_bos"), the texts' count and length, where the P0 state forms
    (the P0 tracer's `find_formation` on the mean over texts; it falls back to the largest
    growth when no block qualifies), whether the P0 norm really jumps there (`formed`: it grows
    at least jump_factor times across the last jump block, `growth` times), and per text and
    layer the P0 norm and its ratio to the other positions' median (None in runs saved before
    they were kept), and the same at the embedding (block 0's input; None in runs saved before
    it was kept)."""

    model_name: str
    main: str
    n_texts: int
    n_tokens: int
    formation: Formation
    formed: bool
    growth: float
    p0_norm: Float[Tensor, "text layer"] | None = None
    norm_ratio: Float[Tensor, "text layer"] | None = None
    embed_norm: Float[Tensor, " text"] | None = None
    embed_ratio: Float[Tensor, " text"] | None = None

    @property
    def formation_layers(self) -> list[int]:
        """Blocks 0 .. the last jump: where the P0 state is made."""
        return list(range(self.formation.last_jump + 1))

    @property
    def bos_at_p0(self) -> bool:
        """Whether P0 is the same token in every text (a BOS token), so that every text's P0
        state is the same by construction (P0 attends only to itself)."""
        return self.main == "bos"

    def over(self, blocks: bool = False) -> str:
        """What a row's numbers range over, in words."""
        span = f", blocks 0-{self.formation.last_jump}" if blocks else ""
        return f"{self.n_texts} texts x {self.n_tokens} tokens{span}, P0 = {self.main}"

    def no_jump(self) -> str | None:
        """Why the P0 claims cannot hold (no P0 norm jump), or None."""
        if self.formed:
            return None
        return (
            f"no P0 norm jump: the largest growth across a block is {self.growth:.3g}x "
            f"(block {self.formation.last_jump}) < jump_factor"
        )

    def norm_table(self) -> pd.DataFrame:
        """Per layer (block output; layer -1: the embedding, block 0's input, when kept): the P0
        norm and its ratio to the other positions' median, means over texts and per text
        (`*_by_text`); the mean ratio is the formation's (mean P0 norm / mean of the other
        positions' medians). Empty when they were not kept."""
        if self.p0_norm is None or self.norm_ratio is None:
            return pd.DataFrame()
        norm, ratio, first = self.p0_norm, self.norm_ratio, 0
        if self.embed_norm is not None and self.embed_ratio is not None:
            norm = torch.cat([self.embed_norm[:, None], norm], 1)
            ratio = torch.cat([self.embed_ratio[:, None], ratio], 1)
            first = -1
        return pd.DataFrame(
            {"layer": range(first, first + norm.shape[1]),
             "p0_norm": norm.mean(0).tolist(),
             "norm_ratio": (norm.mean(0) / (norm / ratio).mean(0)).tolist(),
             "p0_norm_by_text": norm.T.tolist(),
             "norm_ratio_by_text": ratio.T.tolist()}
        )  # fmt: skip


@dataclass
class Inputs(Basis):
    """A `Basis` with the token rows per first-token variant (`variants`: the P0 tracer's,
    without `repeated`, where nothing but the position differs)."""

    variants: dict[str, Int[Tensor, "text pos"]] = field(default_factory=dict)

    @property
    def tokens(self) -> Int[Tensor, "text pos"]:
        return self.variants[self.main]

    def jump(self) -> Float[Tensor, " text"]:
        """Per text, how much the P0 norm grows from before the first jump block to after the
        last (the jump the components' causal shares divide)."""
        first = self.formation.jump_layers[0]
        before = self.p0_norm[:, first - 1] if first > 0 else torch.zeros(len(self.p0_norm))
        return self.p0_norm[:, self.formation.last_jump] - before


@torch.no_grad()
def prepare(model: TransformerBridge, texts: Sequence[str], config: ClaimsConfig) -> Inputs:
    """Token rows of the first `config.n_texts` texts and the formation blocks."""
    if len(texts) < config.n_texts:
        raise ValueError(
            f"{len(texts)} texts given, n_texts={config.n_texts} needed: add texts or lower it"
        )
    texts = list(texts)[: config.n_texts]
    info = getattr(model, "circuits_info", None)
    bos = info.prepend_bos if info else bool(model.cfg.default_prepend_bos)
    variants = variant_tokens(model, texts, config.n_tokens, config.seed)
    variants.pop("repeated")
    main = "bos" if bos else "no_bos"
    n_layers = model.cfg.n_layers
    names = [hook_name("resid_post", layer) for layer in range(n_layers)]
    embed = hook_name("resid_pre", 0)
    _, cache = model.run_with_cache(variants[main], names_filter=[embed, *names])
    norms = torch.stack([cache[n].norm(dim=-1) for n in names], 1)  # [text, layer, pos]
    p0 = norms[:, :, 0]
    other = norms[:, :, 1:].median(-1).values
    e = cache[embed].norm(dim=-1)  # [text, pos]
    ratio = (p0.mean(0) / other.mean(0)).tolist()
    formation = find_formation(
        p0.mean(0).tolist(), ratio, jump_factor=config.jump_factor,
        massive_ratio=config.massive_ratio,
    )  # fmt: skip
    last = formation.last_jump
    mean = p0.mean(0)
    growth = float(mean[last] / mean[last - 1])
    name = info.key if info else model.cfg.model_name
    return Inputs(
        name, main, len(texts), int(variants[main].shape[1]), formation,
        growth >= config.jump_factor, growth, p0, p0 / other, e[:, 0],
        e[:, 0] / e[:, 1:].median(-1).values, variants,
    )  # fmt: skip
