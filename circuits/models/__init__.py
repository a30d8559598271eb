"""Models: the offline registry, GGUF assembly and verification, the cache, `load_model`."""

from circuits.models.load import ModelInfo, load_model, model_info
from circuits.models.registry import DEFAULT_MODEL, MODELS, ModelSpec, get_spec

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "ModelInfo",
    "ModelSpec",
    "get_spec",
    "load_model",
    "model_info",
]
