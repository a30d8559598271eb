"""Training small byte-level Llama models from scratch on an offline corpus (the Python
standard library's source), with log-spaced, resumable checkpoints for `attn_sink_circuits.studies.emergence`."""

from __future__ import annotations

from attn_sink_circuits._lazy import lazy_exports

_EXPORTS = {
    "TrainingCorpus": "corpus",
    "load_corpus": "corpus",
    "named_corpus": "corpora",
    "BackcopyConfig": "backcopy",
    "backcopy_corpus": "backcopy",
    "LMConfig": "config",
    "build_model": "lm",
    "TrainConfig": "config",
    "train_lm": "train",
    "Until": "train",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
