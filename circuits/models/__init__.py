"""Models: the offline registry, GGUF assembly and verification, the cache, `load_model`.

`load_model` and friends import torch and TransformerLens; they are loaded on first use, so
that the registry and the cache (`circuits.models.cache`, e.g. for `circuits models`) stay cheap.
"""

from circuits.models.registry import DEFAULT_MODEL, MODELS, ModelSpec, get_spec

_FROM_LOAD = ("ModelInfo", "load_model", "model_info")


def __getattr__(name: str):
    if name in _FROM_LOAD:
        from circuits.models import load

        return getattr(load, name)
    raise AttributeError(f"module 'circuits.models' has no attribute {name!r}")


__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "ModelInfo",
    "ModelSpec",
    "get_spec",
    "load_model",
    "model_info",
]
