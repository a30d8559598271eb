"""Tiny models with hand-set mechanisms: ground truth that the tracers must recover exactly.

Each starts from `tiny_model` (a seeded random Llama whose weights are small, std 0.02) and
overwrites a few weights so that one known set of components implements the mechanism. The
residual stream is split into named subspaces (`Layout`): a constant direction every token
carries, a token-identity subspace, a scratch subspace for the planted head's output and one
"sink" direction.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.models.tiny import VOCAB, tiny_model


class Layout:
    """Residual dimensions used by the planted weights (d_model 64, d_head 16)."""

    const = 0
    token = slice(1, 17)
    scratch = slice(17, 33)
    sink = 33


@dataclass
class PlantedP0:
    """A model whose P0 sink is made by exactly `head` (identifies P0) and `mlp` (amplifies).

    Mechanism (positional, not semantic): `head` attends uniformly over the causal context and
    copies the token-identity subspace into the scratch subspace. Only at position 0 is that
    average a single unit vector; later positions average several tokens and get a shorter
    vector. MLP `mlp` squares the scratch norm (pairs of SwiGLU neurons compute z^2) and writes
    it onto the sink direction, so P0's state stands out; every head in `sink_layers` queries
    with the constant direction and keys on the sink direction, so they attend to P0.
    """

    model: TransformerBridge
    head: tuple[int, int]
    mlp: int
    sink_layers: tuple[int, ...]
    layout: Layout


def _token_vectors(seed: int, dim: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    vecs = torch.randn(VOCAB, dim, generator=gen)
    return vecs / vecs.norm(dim=-1, keepdim=True)


def _plant_sink_heads(model: TransformerBridge, layers, lay, gain: float) -> None:
    """Every head of `layers` queries with the constant direction and keys on the sink
    direction, so it attends to whichever position carries the largest sink component."""
    hf = model.original_model
    d_head = model.cfg.d_model // model.cfg.n_heads
    with torch.no_grad():
        for layer in layers:
            a = hf.model.layers[layer].self_attn
            for hh in range(model.cfg.n_heads):
                q = a.q_proj.weight[hh * d_head : (hh + 1) * d_head]
                q.zero_()
                # The last rotary pair turns slowest (~3e-4 rad per position): keep q.k there.
                q[d_head - 1, lay.const] = gain
            for kk in range(model.cfg.n_key_value_heads):
                k = a.k_proj.weight[kk * d_head : (kk + 1) * d_head]
                k.zero_()
                k[d_head - 1, lay.sink] = gain


P0_TEXTS = (
    "Natalia sold clips to friends in May.",
    "The quick brown fox jumps over dogs.",
    "Weights: 12 kg, 7 kg and 30 kg total",
    "Sara reads pages daily; how many now?",
    "Lena paints red boats by the river.",
    "Every cat likes milk, fish and naps.",
    "Ten birds sat on a wire at dusk now.",
    "Max wrote 3 letters to his aunt Joy.",
)
"""Short texts of one length on which the planted P0 sink forms (it does not on every text of
distinct-ish bytes): demos and tests of the P0 tracer on `planted_p0_model`."""


def planted_p0_model(seed: int = 0, folder=None, amplify: float = 1.0) -> PlantedP0:
    """The 4-layer tiny model with a P0 circuit planted at head L0.H0 and MLP L1.

    The planted head's query-head partner (sharing its key/value head) keeps random weights.
    `amplify` scales what the MLP writes on the sink direction: at 1 the P0 norm barely grows
    (the sink lives in the direction after the norm); at 10 it triples across block 1, a P0
    norm jump as Peng et al. describe, and the sink heads still attend to P0.
    Heads in layers 2-3 are the downstream sink heads. Scales were chosen so that P0 attention in
    layers 2-3 is near 1 on texts of distinct characters, and is checked by the tests.
    """
    model = tiny_model(seed=seed, folder=folder)
    lay = Layout()
    hf = model.original_model
    d_head = model.cfg.d_model // model.cfg.n_heads
    head, mlp, sink_layers = (0, 0), 1, (2, 3)
    with torch.no_grad():
        emb = hf.model.embed_tokens.weight
        emb.zero_()
        emb[:, lay.const] = 1.0
        emb[:, lay.token] = _token_vectors(seed, lay.token.stop - lay.token.start)
        # After RMSNorm each token's residual (|const|=1, |token|=1, 64 dims) is scaled by
        # sqrt(64 / 2); the weights below undo that so the head writes a unit vector at P0.
        norm_scale = (model.cfg.d_model / 2) ** 0.5

        attn = hf.model.layers[head[0]].self_attn
        h, kv = head[1], head[1] // (model.cfg.n_heads // model.cfg.n_key_value_heads)
        attn.q_proj.weight[h * d_head : (h + 1) * d_head] = 0.0  # uniform causal attention
        v = attn.v_proj.weight[kv * d_head : (kv + 1) * d_head]
        v.zero_()
        v[:, lay.token] = torch.eye(d_head)
        o = attn.o_proj.weight[:, h * d_head : (h + 1) * d_head]
        o.zero_()
        o[lay.scratch, :] = torch.eye(d_head) / norm_scale

        # |scratch|^2 through pairs of neurons: silu(a z) z + silu(-a z)(-z) ~= a z^2.
        m = hf.model.layers[mlp].mlp
        n = lay.scratch.stop - lay.scratch.start
        gain, out = 10.0, 0.003 * amplify
        for j in range(n):
            for k, sign in ((2 * j, 1.0), (2 * j + 1, -1.0)):
                m.gate_proj.weight[k].zero_()
                m.up_proj.weight[k].zero_()
                m.gate_proj.weight[k, lay.scratch.start + j] = sign * gain
                m.up_proj.weight[k, lay.scratch.start + j] = sign
                m.down_proj.weight[:, k] = 0.0
                m.down_proj.weight[lay.sink, k] = out

        _plant_sink_heads(model, sink_layers, lay, gain=12.0)
    return PlantedP0(model, head, mlp, sink_layers, lay)


class SecondaryLayout(Layout):
    """`Layout` plus a marker dimension that only the planted secondary-sink token carries."""

    marker = 34


@dataclass
class PlantedSecondary:
    """A model with one planted secondary sink: MLP `l_start` maps `token` onto the P0 sink
    direction and MLP `l_start + lifetime` takes it off again.

    Mechanism: the BOS embedding carries a large component on the sink direction, so P0 is the
    primary sink from layer 0 on. Only `token` has the marker dimension set; one neuron of MLP
    `l_start` reads it (its gate opens only where the marker is set) and writes `sink_write`
    onto the sink direction, which makes that token's state point along P0's from block
    `l_start` on (cosine ~0.99). The same neuron in MLP `l_start + lifetime` writes the
    opposite, so the run lasts `lifetime` layers. Every head in `sink_layers` queries with the constant direction and keys on the sink direction, so it
    attends to P0 and, while the run lasts, to the planted token.
    """

    model: TransformerBridge
    token: str
    token_id: int
    l_start: int
    lifetime: int
    neuron: int
    sink_layers: tuple[int, ...]
    layout: SecondaryLayout

    @property
    def l_end(self) -> int:
        """Last layer of the run (block l_start + lifetime's MLP ends it)."""
        return self.l_start + self.lifetime - 1


def _calibrate_writes(model, token: str, token_id: int, targets: dict, neuron: int, lay) -> None:
    """Set each planted MLP's write on the sink direction so the token's component changes by
    `targets[layer]`, measured on a probe text: the neuron's activation depends on the RMS norm
    of the token's residual, which the write itself changes (so layers go in order)."""
    probe = model.to_tokens("ab" + token + "cd" + token + "e")
    where = (probe[0] == token_id).nonzero()[:, 0]
    for layer, target in sorted(targets.items()):
        hook = hook_name("neuron", layer)
        _, cache = model.run_with_cache(probe, names_filter=[hook], stop_at_layer=layer + 1)
        act = float(cache[hook][0, where, neuron].mean())
        model.original_model.model.layers[layer].mlp.down_proj.weight[lay.sink, neuron] = (
            target / act
        )


def planted_secondary_model(
    token: str = ",",
    *,
    n_layers: int = 8,
    l_start: int = 3,
    lifetime: int = 3,
    sink_norm: float = 20.0,
    sink_write: float = 10.0,
    seed: int = 0,
    folder=None,
) -> PlantedSecondary:
    """A tiny Llama (`n_layers`, d_model 64) with a secondary sink on the byte `token`, formed by
    MLP `l_start` and ended by MLP `l_start + lifetime` (which must be a block of the model).

    `sink_norm` is P0's component on the sink direction, `sink_write` what the planted MLP writes
    there; the MLP weights are calibrated on a probe text so that the token's sink component is
    `sink_write` during the run and ~0 after it.
    """
    if len(token.encode("utf-8")) != 1:
        raise ValueError(
            f"token must be one byte (the tiny tokenizer is byte-level), got {token!r}"
        )
    if l_start < 1 or lifetime < 1 or l_start + lifetime >= n_layers:
        raise ValueError(
            f"need 1 <= l_start and l_start + lifetime < n_layers (the ending MLP must exist): "
            f"got l_start={l_start}, lifetime={lifetime}, n_layers={n_layers}"
        )
    model = tiny_model(n_layers=n_layers, seed=seed, folder=folder)
    lay = SecondaryLayout()
    hf = model.original_model
    token_id = token.encode("utf-8")[0] + 3
    neuron = 0
    sink_layers = tuple(range(1, n_layers))
    with torch.no_grad():
        emb = hf.model.embed_tokens.weight
        emb.zero_()
        emb[:, lay.const] = 1.0
        emb[:, lay.token] = _token_vectors(seed, lay.token.stop - lay.token.start)
        emb[1, lay.sink] = sink_norm  # <bos>, always at position 0
        emb[token_id, lay.marker] = 1.0

        for layer in (l_start, l_start + lifetime):
            m = hf.model.layers[layer].mlp
            m.gate_proj.weight[neuron].zero_()
            m.up_proj.weight[neuron].zero_()
            m.down_proj.weight[:, neuron] = 0.0
            # gate = 8 (marker - const / 2): open for the planted token (marker 1), shut for
            # the rest, whose marker holds only the small drift other layers write there.
            m.gate_proj.weight[neuron, lay.marker] = 8.0
            m.gate_proj.weight[neuron, lay.const] = -4.0
            m.up_proj.weight[neuron, lay.marker] = 1.0

        _plant_sink_heads(model, sink_layers, lay, gain=1.0)

        writes = {l_start: sink_write, l_start + lifetime: -sink_write}
        _calibrate_writes(model, token, token_id, writes, neuron, lay)
    return PlantedSecondary(model, token, token_id, l_start, lifetime, neuron, sink_layers, lay)


def planted_noop_sink_model(seed: int = 0, folder=None, gain: float = 3.0):
    """A one-layer tiny model whose heads use the sink to output nothing (Gu et al.'s reading
    of a sink: a no-op). `<bos>` carries only the constant and the sink direction, so its value
    (read from the token subspace) is zero; every head queries with the constant and keys on
    the sink direction, so it puts nearly all its attention on `<bos>` at position 0 and adds
    nearly nothing. The values of the other tokens (their token vectors, copied to the scratch
    subspace that the unembedding reads) are large: blocking the sink spreads the attention
    over them and changes the output; blocking any other token changes almost nothing."""
    model = tiny_model(n_layers=1, seed=seed, folder=folder)
    lay = Layout()
    hf = model.original_model
    cfg = model.cfg
    d_head = cfg.d_model // cfg.n_heads
    with torch.no_grad():
        emb = hf.model.embed_tokens.weight
        emb.zero_()
        emb[:, lay.const] = 1.0
        emb[:, lay.token] = _token_vectors(seed, lay.token.stop - lay.token.start)
        emb[1, lay.token] = 0.0
        emb[1, lay.sink] = 1.0
        attn = hf.model.layers[0].self_attn
        for kv in range(cfg.n_key_value_heads):
            v = attn.v_proj.weight[kv * d_head : (kv + 1) * d_head]
            v.zero_()
            v[:, lay.token] = torch.eye(d_head)
        attn.o_proj.weight.zero_()
        for h in range(cfg.n_heads):
            attn.o_proj.weight[lay.scratch, h * d_head : (h + 1) * d_head] = torch.eye(d_head)
        hf.model.layers[0].mlp.down_proj.weight.zero_()
        gen = torch.Generator().manual_seed(seed + 1)
        hf.lm_head.weight[:, lay.scratch] = torch.randn(VOCAB, d_head, generator=gen)
        _plant_sink_heads(model, (0,), lay, gain=gain)
    return model
