"""The RASP programs compiled here, by name: how to build each, its vocabulary and maximum
length (`PROGRAMS`). Light: tracr is imported only when a program is built.

`reverse` and `frac_prevs` are ACDC's tracr-reverse and tracr-xproportion (Conmy et al. 2023:
vocabularies {1, 2, 3} and {w, x, y, z}, maximum length 5, BOS named "BOS"); `hist` is one
SelectorWidth; `sort` composes an MLP (unique numerical keys), a SelectorWidth and an
Aggregate that reads the SelectorWidth's output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

BOS = "BOS"
PAD = "PAD"


@dataclass(frozen=True)
class Program:
    """A RASP program to compile: `build()` returns its output SOp (imports tracr)."""

    name: str
    about: str
    vocab: tuple
    max_seq_len: int
    build: Callable


def _reverse():
    from tracr.compiler import lib
    from tracr.rasp import rasp

    return lib.make_reverse(rasp.tokens)


def _frac_prevs():
    from tracr.compiler import lib
    from tracr.rasp import rasp

    return lib.make_frac_prevs(rasp.tokens == "x")


def _hist():
    from tracr.compiler import lib

    return lib.make_hist()


def _sort():
    from tracr.compiler import lib
    from tracr.rasp import rasp

    return lib.make_sort(rasp.tokens, rasp.tokens, max_seq_len=4, min_key=1)


PROGRAMS: dict[str, Program] = {
    p.name: p
    for p in (
        Program("reverse", "the input reversed (length by SelectorWidth, then an Aggregate)",
                (1, 2, 3), 5, _reverse),
        Program("frac_prevs", "fraction of the tokens so far that are x (numerical Aggregate)",
                ("w", "x", "y", "z"), 5, _frac_prevs),
        Program("hist", "how often each token occurs (one SelectorWidth)",
                ("a", "b", "c"), 5, _hist),
        Program("sort", "the tokens sorted (unique keys by an MLP, target position by a "
                "SelectorWidth, then an Aggregate)", (1, 2, 3), 4, _sort),
    )
}  # fmt: skip
"""Program name -> Program."""


def get_program(name: str) -> Program:
    """The program `name` (one of `PROGRAMS`)."""
    if name not in PROGRAMS:
        raise ValueError(f"unknown compiled program {name!r}; use one of {', '.join(PROGRAMS)}")
    return PROGRAMS[name]


__all__ = ["BOS", "PAD", "PROGRAMS", "Program", "get_program"]
