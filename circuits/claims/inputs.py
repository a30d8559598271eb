"""What every P0 claim is measured on: the texts as token rows under each first-token variant
(the P0 tracer's `variant_tokens`), the main variant, and where the P0 state forms (the P0
tracer's `find_formation` on these texts)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from circuits.claims.config import ClaimsConfig
from circuits.sites import hook_name
from circuits.tracing.p0.formation import Formation, find_formation
from circuits.tracing.p0.inputs import variant_tokens


@dataclass
class Inputs:
    """`variants`: token rows per first-token variant (the P0 tracer's, without `repeated`,
    where nothing but the position differs); `main`: the variant the model reads by default
    ("bos" when it prepends one, else "no_bos"); `p0_norm`: [text, layer] L2 norm of each
    block's output at P0 under the main variant; `formation` and whether the P0 norm really
    jumps there (`formed`: it grows at least jump_factor times across the last jump block; the
    formation falls back to the largest growth when no block qualifies)."""

    model_name: str
    variants: dict[str, Int[Tensor, "text pos"]]
    main: str
    p0_norm: Float[Tensor, "text layer"]
    formation: Formation
    formed: bool

    @property
    def tokens(self) -> Int[Tensor, "text pos"]:
        return self.variants[self.main]

    @property
    def formation_layers(self) -> list[int]:
        """Blocks 0 .. the last jump: where the P0 state is made."""
        return list(range(self.formation.last_jump + 1))

    def growth(self) -> float:
        """How many times the P0 norm grows across the last jump block (mean over texts)."""
        n = self.formation.p0_norm
        return n[self.formation.last_jump] / n[self.formation.last_jump - 1]

    def no_jump(self) -> str | None:
        """Why the P0 claims cannot hold (no P0 norm jump), or None."""
        if self.formed:
            return None
        return (
            f"no P0 norm jump: the largest growth across a block is {self.growth():.3g}x "
            f"(block {self.formation.last_jump}) < jump_factor"
        )

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
    _, cache = model.run_with_cache(variants[main], names_filter=names)
    norms = torch.stack([cache[n].norm(dim=-1) for n in names], 1)  # [text, layer, pos]
    p0 = norms[:, :, 0]
    other = norms[:, :, 1:].median(-1).values
    ratio = (p0.mean(0) / other.mean(0)).tolist()
    formation = find_formation(
        p0.mean(0).tolist(), ratio, jump_factor=config.jump_factor,
        massive_ratio=config.massive_ratio,
    )  # fmt: skip
    last = formation.last_jump
    formed = bool(p0.mean(0)[last] >= config.jump_factor * p0.mean(0)[last - 1])
    name = info.key if info else model.cfg.model_name
    return Inputs(name, variants, main, p0, formation, formed)
