"""Progress through the phases of finding an edge circuit (`discover`), one tick a phase, so a
long edge step shows where it is instead of sitting still."""

from __future__ import annotations

from collections.abc import Callable

from tqdm.auto import tqdm

PHASES = ("scoring", "curve", "held-out", "stability", "exact effects", "MIB areas")
"""In the order `discover` runs them: score every edge, grow the faithfulness curve on the fit
texts, judge the circuit on the held-out texts, resample for edge stability, patch the
strongest edges exactly, and MIB's area scores on both text sets."""


def phase_bar(progress: bool) -> Callable[[str], None]:
    """A bar over `PHASES` (silent unless `progress`); call the returned function with a
    phase's name when it ends. The bar names the phase running and closes after the last."""
    bar = tqdm(total=len(PHASES), desc="edge circuit", disable=not progress, leave=False)
    bar.set_postfix_str(PHASES[0], refresh=False)

    def done(phase: str) -> None:
        bar.update(PHASES.index(phase) + 1 - bar.n)
        if bar.n < len(PHASES):
            bar.set_postfix_str(PHASES[bar.n])
        else:
            bar.close()

    return done


__all__ = ["PHASES", "phase_bar"]
