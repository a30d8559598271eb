"""What a loaded model is, for the provenance of results (`attn_sink_circuits.runs.provenance`): its key,
exact name, the quantisation of the weights it was made from, their sha256, device and dtype.
The sha256 is the loader's verified one (a GGUF's, a model folder's weight files'), so no run
hashes gigabytes again; only a model without one has its weight tensors hashed, once."""

from __future__ import annotations

from attn_sink_circuits.core.identity import recorded_info, weights_hash
from attn_sink_circuits.models.registry import MODELS, quantisation_of


def model_identity(model) -> dict:
    """What model ran: its key, exact name (the original model's hub name), quantisation of the
    weights it was made from, a one-line description (e.g. "Qwen2.5-Coder-0.5B-Instruct, GGUF
    Q4_K_M dequantised to float32"), where the weights came from, their sha256, device, dtype."""
    info = recorded_info(model)
    cfg = model.cfg
    dtype = str(cfg.dtype).removeprefix("torch.")
    key = info.key if info is not None else cfg.model_name
    name = info.hub_name if info is not None else cfg.model_name
    quantised = bool(info is not None and info.quantised_source)
    spec = MODELS.get(key)
    gguf = spec.gguf_name if spec else info.source.split(":", 1)[1] if quantised else None
    quant = quantisation_of(gguf) if quantised and gguf else None
    weights, hash_of = weights_hash(model)
    short = name.rstrip("/").rsplit("/", 1)[-1]
    made = f"GGUF {quant or 'file'} dequantised to {dtype}" if quantised else dtype
    return {
        "key": key,
        "name": name,
        "description": f"{short}, {made}",
        "quantisation": quant,
        "weights_source": info.source if info is not None else None,
        "weights_sha256": weights,
        "weights_sha256_of": hash_of,
        "device": str(cfg.device),
        "dtype": dtype,
    }


__all__ = ["model_identity"]
