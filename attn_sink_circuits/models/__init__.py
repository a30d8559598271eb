"""Models: the offline registry, GGUF assembly and verification, the cache, `load_model`.

`load_model` and friends import torch and TransformerLens; they are loaded on first use, so
that the registry and the cache (`attn_sink_circuits.models.cache`, e.g. for `circuits models`) stay cheap.
What a loaded model is (`ModelInfo`, `model_info`) lives in `attn_sink_circuits.core.identity`.
"""

from attn_sink_circuits.core.identity import ModelInfo, model_info
from attn_sink_circuits.models.registry import (
    DEFAULT_MODEL,
    MODELS,
    ModelSpec,
    display_name,
    get_spec,
)


def __getattr__(name: str):
    if name == "load_model":
        from attn_sink_circuits.models import load

        return load.load_model
    raise AttributeError(f"module 'attn_sink_circuits.models' has no attribute {name!r}")


__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "ModelInfo",
    "ModelSpec",
    "display_name",
    "get_spec",
    "load_model",
    "model_info",
]
