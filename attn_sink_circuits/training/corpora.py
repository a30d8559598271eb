"""The training corpora by name. Choosing one needs every corpus's module, so it lives above
them: `attn_sink_circuits.training.backcopy` builds on `attn_sink_circuits.training.corpus` (its
`TrainingCorpus`), and neither needs this."""

from __future__ import annotations

from attn_sink_circuits.training.backcopy import backcopy_corpus, mixed_corpus
from attn_sink_circuits.training.corpus import TrainingCorpus, load_corpus

CORPORA = ("stdlib", "backcopy", "mix")
"""The corpora `named_corpus` gives: the standard library's source, the synthetic back-copy
letters (`attn_sink_circuits.training.backcopy`, default settings), and the two interleaved in chunks of
256 bytes (`attn_sink_circuits.training.backcopy.mixed_corpus`)."""


def named_corpus(name: str, max_files: int | None = None) -> TrainingCorpus:
    """The corpus called `name` (one of `CORPORA`; `max_files` for "stdlib" and "mix")."""
    if name == "backcopy":
        return backcopy_corpus()
    if name == "mix":
        return mixed_corpus(load_corpus(max_files=max_files))
    if name != "stdlib":
        raise ValueError(f"corpus {name!r} is not one of {', '.join(CORPORA)}: pick one of them")
    return load_corpus(max_files=max_files)


__all__ = ["CORPORA", "named_corpus"]
