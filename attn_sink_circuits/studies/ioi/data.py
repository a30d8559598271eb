"""The pairs of an IOI run (`attn_sink_circuits.studies.ioi.run`'s `data`), made as its protocol
says: generated IOI prompts with the protocol's partner (the default, or the task's name
"ioi"), a JSONL pairs file, rows {clean, corrupt, answer, wrong}, `Pairs`, or (fit, held-out)
`Pairs`; split into fit and held-out pairs by the config's counts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attn_sink_circuits.discovery.pairs import Pairs, check_rows, read_rows, tokenize
from attn_sink_circuits.discovery.protocol import Protocol
from attn_sink_circuits.studies.ioi import TASKS, prompts
from attn_sink_circuits.studies.ioi.config import IOIConfig

Data = str | Path | Sequence[dict] | Pairs | tuple[Pairs, Pairs] | None
"""What `run` takes as data (see the module docstring)."""


@dataclass(frozen=True)
class IOIPairs:
    """The fit and held-out pairs of a run, what made them (`source`: the task with its partner
    and seed, or the file / rows given), and how to record them on its graph: `task` ("ioi" for
    generated pairs, None for given ones), `partner` (None for given ones) and `file` (the
    pairs file read, for the run's provenance)."""

    fit: Pairs
    held: Pairs
    source: str
    task: str | None = None
    partner: str | None = None
    file: str | None = None

    @property
    def n_tokens(self) -> int:
        return int(max(self.fit.clean.shape[1], self.held.clean.shape[1]))

    def rows(self) -> list[list]:
        """Every pair, fit ones first (what the provenance hashes)."""
        return self.fit.rows() + self.held.rows()


def pairs_of(
    model,
    rows: Sequence[dict] | None,
    n: int,
    proto: Protocol,
    *,
    seed: int = 0,
    partner: str | None = None,
    shuffle: bool = True,
    source: str = "pairs",
) -> Pairs:
    """`n` pairs: IOI's generated ones (seed `seed`, `partner`, default the protocol's) when
    `rows` is None, else the rows tokenized (errors name `source`'s pair numbers): all of them
    in order, or with `shuffle` the first `n` in an order seeded by `seed`. Padding and BOS as
    `proto` says."""
    if rows is None:
        return prompts.ioi_pairs(model, n, seed=seed, partner=partner or proto.partner, pad=proto.pad,
                         bos=proto.bos)[0]  # fmt: skip
    pairs = tokenize(model, rows, source, pad=proto.pad, bos=proto.bos)
    if not shuffle:
        return pairs
    return pairs[np.random.default_rng(seed).permutation(len(rows))[:n].tolist()]


def given_rows(data: str | Path | Sequence[dict], source: str) -> list[dict]:
    """The rows of a pairs file or a list of rows, checked (a ValueError in one line)."""
    if isinstance(data, str | Path):
        return read_rows(data)
    if not isinstance(data, Sequence):
        raise ValueError(
            "data must be a pairs file, rows {clean, corrupt, answer, wrong}, Pairs, (fit, "
            "held-out) Pairs, the task 'ioi' or None (IOI pairs made as the protocol says)"
        )
    rows = list(data)
    check_rows(rows, source)
    return rows


def ioi_inputs(model, data: Data, config: IOIConfig) -> IOIPairs:
    """The fit and held-out pairs of `data` under `config` (see the module docstring); a
    ValueError in one line when there are too few or `partner` is given for pairs that carry
    their own corrupted prompts."""
    n_fit, n_held = config.counts
    proto, seed = config.named(), config.pair_seed
    if data is None or (isinstance(data, str) and data in TASKS):
        partner = config.partner_name
        pairs = pairs_of(model, None, n_fit + n_held, proto, seed=seed, partner=partner)
        return IOIPairs(pairs[:n_fit], pairs[n_fit:], f"task ioi, partner {partner} (seed {seed})",
                        "ioi", partner)  # fmt: skip
    if config.partner:
        raise ValueError(
            f"partner {config.partner} makes the corrupted prompts of generated IOI pairs; the "
            "pairs given carry their own: leave partner out"
        )
    if isinstance(data, tuple) and len(data) == 2 and all(isinstance(p, Pairs) for p in data):
        return IOIPairs(
            data[0], data[1], f"pairs given ({len(data[0])} fit, {len(data[1])} held out)"
        )
    if isinstance(data, Pairs):
        _enough(len(data), n_fit, n_held, "the Pairs given")
        return IOIPairs(data[:n_fit], data[n_fit : n_fit + n_held], f"pairs given ({len(data)})")
    file = str(data) if isinstance(data, str | Path) else None
    rows = given_rows(data, file or "rows")
    _enough(len(rows), n_fit, n_held, file or "the rows given")
    pairs = pairs_of(model, rows, n_fit + n_held, proto, seed=seed, source=file or "rows")
    return IOIPairs(pairs[:n_fit], pairs[n_fit:], file or f"rows given ({len(rows)})", file=file)


def _enough(have: int, n_fit: int, n_held: int, what: str) -> None:
    if have < n_fit + n_held:
        raise ValueError(
            f"{what} hold {have} pairs; n_fit {n_fit} + n_heldout {n_held} = {n_fit + n_held} "
            "are needed (give more pairs or lower the counts in the config)"
        )


__all__ = ["Data", "IOIPairs", "given_rows", "ioi_inputs", "pairs_of"]
