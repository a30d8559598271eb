"""The phases of finding an edge circuit (`discover`): progress through them, one tick a phase,
so a long edge step shows where it is instead of sitting still, and each phase's results kept
in a checkpoint folder, so a stopped run loses at most the phase it was in."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from tqdm.auto import tqdm

from attn_sink_circuits.core.texts import texts_sha256
from attn_sink_circuits.runs.io import atomic_write
from attn_sink_circuits.runs.provenance import code_identity

T = TypeVar("T")

PHASES = ("scoring", "curve", "held-out", "stability", "exact effects", "MIB areas")
"""In the order `discover` runs them: score every edge, grow the faithfulness curve on the fit
texts, judge the circuit on the held-out texts, resample for edge stability, patch the
strongest edges exactly, and MIB's area scores on both text sets."""


@contextmanager
def phase_bar(progress: bool) -> Iterator[Callable[[str], None]]:
    """A bar over `PHASES` on stderr (silent unless `progress`), for a `with` block; call the
    function it gives with a phase's name when that phase ends. The bar names the phase running
    and closes when the block ends, at once if it raises (Ctrl-C, SIGTERM), so the caller's
    message comes last."""
    bar = tqdm(total=len(PHASES), desc="edge circuit", disable=not progress, leave=False)
    bar.set_postfix_str(PHASES[0], refresh=False)

    def done(phase: str) -> None:
        bar.update(PHASES.index(phase) + 1 - bar.n)
        if bar.n < len(PHASES):
            bar.set_postfix_str(PHASES[bar.n])

    try:
        yield done
    finally:
        bar.close()


class PhaseStore:
    """Each phase after scoring saved when it ends, in the checkpoint folder `folder`
    (`phase_<name>.pt`), and read back by a rerun whose inputs are the same (`key`: the code,
    the scores, texts, positions, metric and settings; the scores themselves are kept by
    `fit_scores`). A phase saved from other inputs is computed again and replaced. Without a
    folder each phase is only computed. The files are pickles (curves, judgements): read only
    folders this library wrote."""

    def __init__(self, folder: str | Path | None, key: dict[str, Any]):
        self.folder = None if folder is None else Path(folder)
        self.key = key

    def __call__(self, phase: str, compute: Callable[[], T]) -> T:
        """`compute()`'s value for `phase`, from the folder when saved there with this key."""
        if self.folder is None:
            return compute()
        import torch

        path = self.folder / f"phase_{phase.replace(' ', '_').replace('-', '_')}.pt"
        if path.exists():
            saved = torch.load(path, weights_only=False)
            if saved["key"] == self.key:
                return saved["value"]
            print(f"{path}: saved from other inputs, computed again", file=sys.stderr)
        value = compute()
        self.folder.mkdir(parents=True, exist_ok=True)
        with atomic_write(path, "wb") as fh:
            torch.save({"key": self.key, "value": value}, fh)
        return value


def phase_key(fit, scores, texts: tuple, where: tuple, cfg, kinds) -> dict:
    """What the phases after scoring depend on (`PhaseStore`'s key): the code (a checkout with
    uncommitted changes counts as its commit), the scores, the fit and held-out texts, their
    positions (`where`) and kinds, the metric and the settings."""
    rows = [t.rows() if hasattr(t, "rows") else t.tolist() for t in texts]  # Pairs or tokens
    values = scores.values.detach().contiguous().cpu().numpy()
    return {
        "code": code_identity(),
        "scores": hashlib.sha256(values.tobytes()).hexdigest(),
        "texts": texts_sha256([rows, where, kinds and [list(k) for k in kinds]]),
        "metric": fit.metric.name,
        "settings": cfg.to_dict(),
    }


__all__ = ["PHASES", "PhaseStore", "phase_bar", "phase_key"]
