"""circuits: mechanistic circuit analysis of attention sinks on TransformerLens 4.

The package follows the data path: `models` (load) -> `sinks` (measure) -> `patching`
(intervene) -> `graph` (circuits) -> `report` (show); `tracing` composes them per paper and
`trigger` holds the toy trigger-conditional models.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    # Lazy so that `import circuits` stays cheap (torch/transformers load on first use).
    if name in {"load_model", "model_info", "ModelInfo", "MODELS", "DEFAULT_MODEL"}:
        from circuits import models

        return getattr(models, name)
    raise AttributeError(f"module 'circuits' has no attribute {name!r}")
