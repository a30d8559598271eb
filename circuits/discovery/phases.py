"""Progress through the phases of finding an edge circuit (`discover`), one tick a phase, so a
long edge step shows where it is instead of sitting still."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tqdm.auto import tqdm

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


__all__ = ["PHASES", "phase_bar"]
