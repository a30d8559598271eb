"""A synthetic corpus on which a softmax model must form a `<bos>` sink within a few hundred
steps: independent letters with back-copy triggers (Guo et al. 2024's Bigram-Backcopy task, with
uniform letters in place of the bigram chain).

Every byte is one of `n_letters` letters (a, b, c, ...) drawn uniformly and independently,
except right after one of the `n_triggers` trigger letters (the first letters of the alphabet),
where it repeats the letter before the trigger. Only there does reading another position help
(the previous one). At every other position each earlier letter is noise for the next-byte
prediction, yet a softmax head must spread attention weights summing to one: the one place
whose value it can make harmless is `<bos>`, which is the same in every window. So a head that
copies at triggers parks its attention on `<bos>` everywhere else (the "dormant" head): a sink
forms as the copy is learned, with no language to learn first. The same reason as in the
trigger task of `attn_sink_circuits.studies.trigger` (Ran-Milo 2026), here in a byte-level language model that
`attn_sink_circuits.training` trains and `attn_sink_circuits.studies.emergence` measures.
"""

from __future__ import annotations

import hashlib
import platform
from dataclasses import dataclass, replace

import numpy as np

from attn_sink_circuits.config import Config, option
from attn_sink_circuits.training.corpus import TrainingCorpus

LETTERS = b"abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class BackcopyConfig(Config):
    """The back-copy corpus: its alphabet, triggers, size and seed."""

    n_letters: int = option(16, "alphabet: the first this-many letters a, b, c, ...", low=2,
                            high=len(LETTERS))  # fmt: skip
    n_triggers: int = option(
        2, "the first this-many letters are triggers: the letter after one repeats the letter "
        "before it", low=1,
    )  # fmt: skip
    train_bytes: int = option(400_000, "training bytes", low=64)
    heldout_bytes: int = option(20_000, "held-out bytes (drawn after the training bytes)", low=64)
    seed: int = option(0, "seeds the letters", low=0)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_triggers >= self.n_letters:
            raise ValueError(
                f"n_triggers={self.n_triggers} must be below n_letters={self.n_letters}: some "
                "letters must be plain"
            )


def backcopy_letters(config: BackcopyConfig) -> np.ndarray:
    """The corpus's letters as uint8 bytes: training bytes, then held-out bytes."""
    rng = np.random.default_rng(config.seed)
    n = config.train_bytes + config.heldout_bytes
    draws = rng.integers(0, config.n_letters, n).tolist()
    for i in range(2, n):  # in order: a copied letter can itself be a trigger
        if draws[i - 1] < config.n_triggers:
            draws[i] = draws[i - 2]
    return np.frombuffer(LETTERS, dtype=np.uint8)[draws]


def backcopy_corpus(
    config: BackcopyConfig = BackcopyConfig(),  # noqa: B008 (frozen)
) -> TrainingCorpus:
    """The back-copy corpus as a `TrainingCorpus` for `train_lm` (the held-out part is the last
    `heldout_bytes` of one stream)."""
    data = backcopy_letters(config)
    train, heldout = data[: config.train_bytes], data[config.train_bytes :]
    settings = ", ".join(f"{k}={v}" for k, v in config.to_dict().items())
    return TrainingCorpus(
        train=train,
        heldout=heldout,
        root="synthetic",
        n_train_files=0,
        n_heldout_files=0,
        sha256=hashlib.sha256(data.tobytes()).hexdigest(),
        python=platform.python_version(),
        source=f"synthetic back-copy letters (attn_sink_circuits.training.backcopy; {settings})",
        licence="none needed (generated)",
        heldout_rule=f"the last {config.heldout_bytes} bytes",
    )


MIX_CHUNK = 256
"""The mixed corpus alternates chunks of this many natural bytes and back-copy letters."""


def interleave(a: np.ndarray, b: np.ndarray, chunk: int) -> np.ndarray:
    """Chunks of `chunk` bytes taken in turn from `a` and `b` (as many whole pairs as both
    have)."""
    n = min(len(a), len(b)) // chunk
    pairs = np.stack([a[: n * chunk].reshape(n, chunk), b[: n * chunk].reshape(n, chunk)], 1)
    return pairs.reshape(-1)


def mixed_corpus(
    natural: TrainingCorpus,
    config: BackcopyConfig = BackcopyConfig(),  # noqa: B008 (frozen)
    chunk: int = MIX_CHUNK,
) -> TrainingCorpus:
    """`natural` (e.g. the standard library's source) with back-copy letters interleaved in
    chunks of `chunk` bytes, half and half, in the training and the held-out part: in the
    letter chunks most heads have nothing to read; in the natural ones they do."""
    sizes = {"train_bytes": len(natural.train), "heldout_bytes": len(natural.heldout)}
    letters = backcopy_letters(replace(config, **sizes))
    train = interleave(natural.train, letters[: len(natural.train)], chunk)
    heldout = interleave(natural.heldout, letters[len(natural.train) :], chunk)
    return TrainingCorpus(
        train=train,
        heldout=heldout,
        root=natural.root,
        n_train_files=natural.n_train_files,
        n_heldout_files=natural.n_heldout_files,
        sha256=hashlib.sha256(train.tobytes() + heldout.tobytes()).hexdigest(),
        python=natural.python,
        source=f"{natural.source}, in chunks of {chunk} bytes alternating with back-copy "
        f"letters (attn_sink_circuits.training.backcopy; n_letters={config.n_letters}, "
        f"n_triggers={config.n_triggers}, seed={config.seed})",
        licence=natural.licence,
        heldout_rule=f"{natural.heldout_rule} (natural chunks); later letters (letter chunks)",
    )
