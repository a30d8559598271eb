"""Small transformers on continuous token vectors, with softmax or ReLU attention.

Built from TransformerLens's `HookedRootModule` + `HookPoint`, so they carry the library's hook
names (`hook_embed`, `blocks.{l}.hook_resid_pre`, `blocks.{l}.attn.hook_pattern` [batch, head,
query, key], `attn.hook_z`, `hook_attn_out`, `hook_resid_post`, ...) and `run_with_cache` /
`run_with_hooks` work as on a TransformerBridge. No layer norm: the theorems are about the
attention normalisation alone.

Attention kinds (Ran-Milo 2026):
- "softmax": pattern = softmax of the scaled, causally masked scores (rows sum to 1);
- "relu": pattern = elementwise ReLU of the same scores, no normalisation (rows may sum to 0).
Both expose the weights that mix the values as `hook_pattern`, the masked scores (-inf above the
diagonal) as `hook_attn_scores`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from jaxtyping import Float
from torch import Tensor, nn
from transformer_lens import ActivationCache, HookedRootModule
from transformer_lens.hook_points import HookPoint

from attn_sink_circuits.studies.trigger.checks import check_float, check_int
from attn_sink_circuits.studies.trigger.data import CONTENT, OTHER, TRIGGER, TriggerTask

ATTENTION_KINDS = ("softmax", "relu")


@dataclass(frozen=True)
class TriggerModelConfig:
    """Architecture of a trigger-task model. Field names follow TransformerLens's config."""

    d_input: int
    """Width of one input token vector (3 + d_content for the trigger task)."""
    d_output: int
    """Width of the prediction (d_content)."""
    n_ctx: int
    """Longest sequence (learned absolute position embeddings)."""
    n_layers: int = 1
    n_heads: int = 1
    d_model: int = 32
    d_head: int | None = None
    """Per-head width; None means d_model // n_heads."""
    d_mlp: int | None = None
    """Hidden width of a GELU MLP after each attention layer; None: attention-only."""
    attention: str = "softmax"
    """"softmax" or "relu"."""
    init_scale: float = 0.5
    """Weights start as N(0, (init_scale / sqrt(fan_in))^2); biases at zero. Measured at 1.0: a
    4x4 softmax model starts with a trigger MSE ~750x that of predicting zero and is unsolved
    after 3000 steps; 1x1 ReLU models keep a BOS weight of 0.3-0.6 that they use as a bias."""

    def __post_init__(self) -> None:
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(
                f"unknown attention kind {self.attention!r}: use one of {ATTENTION_KINDS}"
            )
        for name in ("d_input", "d_output", "n_ctx", "n_layers", "n_heads", "d_model"):
            check_int(name, getattr(self, name))
        for name in ("d_head", "d_mlp"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name))
        check_float("init_scale", self.init_scale, 0.0, low_open=True)
        if self.d_head is None:
            if self.d_model % self.n_heads:
                raise ValueError(
                    f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}: "
                    "pick d_model as a multiple of n_heads or set d_head"
                )
            object.__setattr__(self, "d_head", self.d_model // self.n_heads)

    @classmethod
    def for_task(cls, task: TriggerTask, **kwargs) -> TriggerModelConfig:
        """The config whose input, output and context sizes fit `task`."""
        return cls(d_input=task.d_input, d_output=task.d_content, n_ctx=task.seq_len, **kwargs)

    def to_dict(self) -> dict:
        return asdict(self)


class Attention(nn.Module):
    """Multi-head causal self-attention with a softmax or ReLU pattern (TransformerLens layout:
    W_Q/W_K/W_V [head, d_model, d_head], W_O [head, d_head, d_model])."""

    def __init__(self, cfg: TriggerModelConfig):
        super().__init__()
        self.cfg = cfg
        H, M, D = cfg.n_heads, cfg.d_model, cfg.d_head
        self.W_Q = nn.Parameter(torch.zeros(H, M, D))
        self.W_K = nn.Parameter(torch.zeros(H, M, D))
        self.W_V = nn.Parameter(torch.zeros(H, M, D))
        self.W_O = nn.Parameter(torch.zeros(H, D, M))
        self.b_Q = nn.Parameter(torch.zeros(H, D))
        self.b_K = nn.Parameter(torch.zeros(H, D))
        self.b_V = nn.Parameter(torch.zeros(H, D))
        self.b_O = nn.Parameter(torch.zeros(M))
        self.register_buffer("causal", torch.ones(cfg.n_ctx, cfg.n_ctx).tril().bool())
        self.hook_q = HookPoint()  # [batch, pos, head, d_head]
        self.hook_k = HookPoint()
        self.hook_v = HookPoint()
        self.hook_attn_scores = HookPoint()  # [batch, head, query, key]
        self.hook_pattern = HookPoint()  # [batch, head, query, key]
        self.hook_z = HookPoint()  # [batch, pos, head, d_head]
        self.hook_result = HookPoint()  # [batch, pos, head, d_model]

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        T = x.shape[1]
        q = self.hook_q(torch.einsum("bpm,hmd->bphd", x, self.W_Q) + self.b_Q)
        k = self.hook_k(torch.einsum("bpm,hmd->bphd", x, self.W_K) + self.b_K)
        v = self.hook_v(torch.einsum("bpm,hmd->bphd", x, self.W_V) + self.b_V)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.cfg.d_head)
        scores = self.hook_attn_scores(scores.masked_fill(~self.causal[:T, :T], float("-inf")))
        if self.cfg.attention == "softmax":
            pattern = scores.softmax(dim=-1)
        else:
            pattern = scores.relu()  # relu(-inf) = 0: the causal mask carries over
        pattern = self.hook_pattern(pattern)
        z = self.hook_z(torch.einsum("bhqk,bkhd->bqhd", pattern, v))
        result = self.hook_result(torch.einsum("bqhd,hdm->bqhm", z, self.W_O))
        return result.sum(dim=2) + self.b_O


class MLP(nn.Module):
    def __init__(self, cfg: TriggerModelConfig):
        super().__init__()
        self.W_in = nn.Parameter(torch.zeros(cfg.d_model, cfg.d_mlp))
        self.b_in = nn.Parameter(torch.zeros(cfg.d_mlp))
        self.W_out = nn.Parameter(torch.zeros(cfg.d_mlp, cfg.d_model))
        self.b_out = nn.Parameter(torch.zeros(cfg.d_model))
        self.hook_pre = HookPoint()  # [batch, pos, d_mlp]
        self.hook_post = HookPoint()

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        post = self.hook_post(nn.functional.gelu(self.hook_pre(x @ self.W_in + self.b_in)))
        return post @ self.W_out + self.b_out


class TransformerBlock(nn.Module):
    def __init__(self, cfg: TriggerModelConfig):
        super().__init__()
        self.hook_resid_pre = HookPoint()  # [batch, pos, d_model]
        self.attn = Attention(cfg)
        self.hook_attn_out = HookPoint()
        self.hook_resid_post = HookPoint()
        if cfg.d_mlp is not None:
            self.hook_resid_mid = HookPoint()
            self.mlp = MLP(cfg)
            self.hook_mlp_out = HookPoint()

    def forward(self, resid: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_m"]:
        resid = self.hook_resid_pre(resid)
        resid = resid + self.hook_attn_out(self.attn(resid))
        if hasattr(self, "mlp"):
            resid = self.hook_resid_mid(resid)
            resid = resid + self.hook_mlp_out(self.mlp(resid))
        return self.hook_resid_post(resid)


class TriggerTransformer(HookedRootModule):
    """Token vectors -> linear embedding + learned positions -> blocks -> linear readout.

    `forward(inputs)` maps [batch, pos, d_input] to predictions [batch, pos, d_output].
    """

    def __init__(self, cfg: TriggerModelConfig, seed: int = 0):
        super().__init__()
        self.cfg = cfg
        self.seed = seed
        self.W_E = nn.Parameter(torch.zeros(cfg.d_input, cfg.d_model))
        self.W_pos = nn.Parameter(torch.zeros(cfg.n_ctx, cfg.d_model))
        self.hook_embed = HookPoint()  # [batch, pos, d_model]
        self.hook_pos_embed = HookPoint()  # [pos, d_model]
        self.blocks = nn.ModuleList(TransformerBlock(cfg) for _ in range(cfg.n_layers))
        self.W_U = nn.Parameter(torch.zeros(cfg.d_model, cfg.d_output))
        self.b_U = nn.Parameter(torch.zeros(cfg.d_output))
        self._init_weights(seed)
        self.setup()

    def _init_weights(self, seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, param in self.named_parameters():
                if name.split(".")[-1].startswith("b_"):
                    continue
                # Fan-in is the d_model/d_input/d_head axis that the weight contracts over.
                fan_in = param.shape[-2] if param.ndim >= 2 else param.shape[-1]
                if name == "W_pos":
                    fan_in = self.cfg.d_model
                std = self.cfg.init_scale / math.sqrt(fan_in)
                param.copy_(torch.randn(param.shape, generator=gen) * std)

    def forward(
        self, inputs: Float[Tensor, "batch pos d_input"]
    ) -> Float[Tensor, "batch pos d_output"]:
        if inputs.ndim != 3 or inputs.shape[-1] != self.cfg.d_input:
            raise ValueError(
                f"inputs of shape {tuple(inputs.shape)}: expected [batch, pos, "
                f"{self.cfg.d_input}] token vectors (see attn_sink_circuits.studies.trigger.data.make_batch)"
            )
        if inputs.shape[1] > self.cfg.n_ctx:
            raise ValueError(
                f"sequence of {inputs.shape[1]} tokens is longer than the model's "
                f"n_ctx={self.cfg.n_ctx}: build the model with a larger n_ctx"
            )
        T = inputs.shape[1]
        resid = self.hook_embed(inputs @ self.W_E) + self.hook_pos_embed(self.W_pos[:T])
        for block in self.blocks:
            resid = block(resid)
        return resid @ self.W_U + self.b_U

    def run_with_cache(self, *args, **kwargs) -> tuple[Tensor, ActivationCache]:
        """As HookedRootModule.run_with_cache, with the cache wrapped in an ActivationCache
        (the type a TransformerBridge returns)."""
        out, cache = super().run_with_cache(*args, **kwargs)
        return out, ActivationCache(cache, self)


def relu_construction(task: TriggerTask, margin: float = 2.0) -> TriggerTransformer:
    """The 1-layer, 1-head ReLU-attention model of Theorem 3 with hand-set weights: it solves the
    task exactly and puts zero attention on BOS at every position.

    Residual layout (d_model = d_input + 1 + d_content): the token vector, a position feature
    h(j) = 1/(j-1) (0 for j < 2), and the attention output. The score of query j on key i is
    `is_other(i) * (margin * (is_trigger(j) - 1) + h(j))`: at a trigger it is 1/(j-1) on every
    preceding "other" token (the value is its content, so the sum is the mean), and 0 on BOS and
    on the trigger itself; at a non-trigger it is h(j) - margin < 0 and the ReLU zeroes it.
    Needs `margin > 1` (= max h) and exactly one trigger a sequence (with several, earlier
    triggers would have to count as content too, which this score does not give).
    """
    check_float("margin", margin, 1.0, low_open=True)  # above the largest h(j) = 1/(j-1)
    if task.n_triggers != 1:
        raise ValueError(
            f"the Theorem 3 construction is for one trigger a sequence, got n_triggers="
            f"{task.n_triggers}: use TriggerTask(n_triggers=1)"
        )
    d, d_in = task.d_content, task.d_input
    h_dim, out0 = d_in, d_in + 1
    cfg = TriggerModelConfig.for_task(task, d_model=d_in + 1 + d, d_head=d, attention="relu")
    model = TriggerTransformer(cfg)
    with torch.no_grad():
        for param in model.parameters():
            param.zero_()
        model.W_E[:, :d_in] = torch.eye(d_in)
        positions = torch.arange(task.seq_len, dtype=torch.float32)
        model.W_pos[2:, h_dim] = 1.0 / (positions[2:] - 1.0)
        attn = model.blocks[0].attn
        scale = math.sqrt(cfg.d_head)  # undoes the 1/sqrt(d_head) of the scores
        attn.W_Q[0, TRIGGER, 0] = margin * scale
        attn.W_Q[0, h_dim, 0] = scale
        attn.b_Q[0, 0] = -margin * scale
        attn.W_K[0, OTHER, 0] = 1.0
        attn.W_V[0, CONTENT:d_in, :] = torch.eye(d)
        attn.W_O[0, :, out0:] = torch.eye(d)
        model.W_U[out0:, :] = torch.eye(d)
    return model
