"""The trigger-conditional task of Ran-Milo 2026 (arXiv 2603.11487): data and targets.

Each token is a vector `[is_bos, is_trigger, is_other, content (d_content dims)]`. Position 0 is
BOS (content zero); every later token is either a trigger or an "other" token and carries a
standard-normal content vector. At a trigger position j the target is the mean of the content
vectors of all *preceding* non-BOS tokens, positions 1 .. j-1 (the trigger's own content does not
count: "all preceding" read literally; earlier triggers do count, they are non-BOS tokens).
Everywhere else the target is the zero vector. A trigger therefore needs at least one non-BOS
token before it: triggers sit at positions 2 .. seq_len-1.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from attn_sink_circuits.studies.trigger.checks import check_int

BOS, TRIGGER, OTHER = 0, 1, 2
"""Indices of the three indicator features; content starts at `CONTENT`."""
CONTENT = 3
FIRST_TRIGGER_POSITION = 2
"""Position 0 is BOS and a trigger needs a preceding non-BOS token, so triggers start at 2."""


@dataclass(frozen=True)
class TriggerTask:
    """Shape of the task: sequence length (BOS included), content dimension, triggers a sequence."""

    seq_len: int = 16
    d_content: int = 8
    n_triggers: int = 1
    """The paper uses one trigger a sequence; more is the multi-trigger variant."""

    def __post_init__(self) -> None:
        for name, least in (("seq_len", 2), ("d_content", 1), ("n_triggers", 1)):
            if not isinstance(getattr(self, name), int) or isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r}: must be an integer >= {least}")
        if self.seq_len < 2:
            raise ValueError(
                f"seq_len={self.seq_len}: a sequence needs at least 2 tokens (BOS + one token); "
                f"use seq_len >= {FIRST_TRIGGER_POSITION + self.n_triggers}"
            )
        if self.d_content <= 0:
            raise ValueError(
                f"d_content={self.d_content}: the content dimension must be a positive integer"
            )
        if self.n_triggers < 1:
            raise ValueError(f"n_triggers={self.n_triggers}: use at least one trigger a sequence")
        slots = self.seq_len - FIRST_TRIGGER_POSITION
        if self.n_triggers > slots:
            raise ValueError(
                f"no room for {self.n_triggers} trigger(s) in seq_len={self.seq_len}: triggers sit "
                f"at positions {FIRST_TRIGGER_POSITION}..seq_len-1 (position 0 is BOS and a "
                f"trigger needs a preceding non-BOS token); use seq_len >= "
                f"{FIRST_TRIGGER_POSITION + self.n_triggers}"
            )

    @property
    def d_input(self) -> int:
        """Width of one token vector: three indicators plus the content."""
        return CONTENT + self.d_content

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class TriggerBatch:
    """A batch of sequences with their targets and where the triggers are."""

    inputs: Float[Tensor, "batch pos d_input"]
    targets: Float[Tensor, "batch pos d_content"]
    is_trigger: Bool[Tensor, "batch pos"]

    def __len__(self) -> int:
        return self.inputs.shape[0]


def trigger_targets(inputs: Float[Tensor, "batch pos d_input"]) -> Float[Tensor, "batch pos d_c"]:
    """Targets of the task for any token vectors: at each trigger, the mean content of the
    non-BOS tokens strictly before it; zero at every other position."""
    if inputs.ndim != 3 or inputs.shape[-1] <= CONTENT:
        raise ValueError(
            f"inputs of shape {tuple(inputs.shape)}: expected [batch, pos, 3 + d_content] "
            "token vectors [is_bos, is_trigger, is_other, content]"
        )
    non_bos = 1.0 - inputs[..., BOS]
    content = inputs[..., CONTENT:] * non_bos[..., None]
    # Exclusive prefix sums: what came strictly before each position.
    sums = content.cumsum(dim=1) - content
    counts = non_bos.cumsum(dim=1) - non_bos
    is_trigger = inputs[..., TRIGGER] > 0.5
    if bool((is_trigger & (counts < 0.5)).any()):
        raise ValueError(
            "a trigger has no preceding non-BOS token, so its target (a mean) is undefined; "
            f"put triggers at position >= {FIRST_TRIGGER_POSITION}"
        )
    means = sums / counts.clamp(min=1.0)[..., None]
    return torch.where(is_trigger[..., None], means, torch.zeros_like(means))


def make_batch(
    task: TriggerTask,
    batch_size: int,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> TriggerBatch:
    """`batch_size` random sequences of the task: BOS at 0, `task.n_triggers` distinct trigger
    positions drawn uniformly from 2..seq_len-1, N(0, 1) content on every non-BOS token.

    Pass either a seeded `generator` (advanced in place, for a stream of batches) or a `seed`.
    """
    check_int("batch_size", batch_size)
    if (generator is None) == (seed is None):
        raise ValueError("pass exactly one of `generator` (a stream of batches) or `seed`")
    if seed is not None:
        check_int("seed", seed, minimum=0)
    if generator is None:
        generator = torch.Generator().manual_seed(seed)
    T, d = task.seq_len, task.d_content
    inputs = torch.zeros(batch_size, T, task.d_input)
    inputs[:, 0, BOS] = 1.0
    inputs[:, 1:, CONTENT:] = torch.randn(batch_size, T - 1, d, generator=generator)
    slots = T - FIRST_TRIGGER_POSITION
    order = torch.rand(batch_size, slots, generator=generator).argsort(dim=1)
    positions = order[:, : task.n_triggers] + FIRST_TRIGGER_POSITION
    is_trigger = torch.zeros(batch_size, T, dtype=torch.bool)
    is_trigger.scatter_(1, positions, True)
    inputs[..., TRIGGER] = is_trigger.float()
    inputs[:, 1:, OTHER] = 1.0 - is_trigger[:, 1:].float()
    return TriggerBatch(inputs=inputs, targets=trigger_targets(inputs), is_trigger=is_trigger)
