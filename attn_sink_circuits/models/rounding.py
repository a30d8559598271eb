"""Weights rounded as llama.cpp stores them, and back: what 4- or 8-bit storage changes.

A model folder (fp32 safetensors, e.g. a training checkpoint or the loader's dequantised cache
entry) is written again with every matrix rounded to a GGUF block type (Q4_0, Q4_1, Q8_0: blocks
of 32 values along the last axis, `gguf.quants`) and dequantised back to fp32, as the loader
dequantises a GGUF file. Vectors (norm weights, biases) stay F32, as llama.cpp leaves them.
`circuits.load_model(folder)` reads the result like any local model; `round_model` rounds a
loaded model's parameters in place, with the same arithmetic.

A `RoundingPlan` says which type each matrix gets: one type for every matrix, or, for a
released model whose file mixes types, the file's own choice per tensor class (SmolLM2's Q4_1
file keeps its token embedding in Q8_0).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from attn_sink_circuits.runs.io import atomic_folder, write_json

TYPES = ("q4_0", "q4_1", "q8_0")
"""The GGUF block types `round_tensor` writes (the ones the `gguf` package quantises)."""
BLOCK = 32
"""Values per block along a matrix's last axis (every one of `TYPES`)."""


def _qtype(kind: str):
    from gguf import GGMLQuantizationType

    if kind not in TYPES:
        raise ValueError(f"rounding type {kind!r} is not one of {', '.join(TYPES)}")
    return GGMLQuantizationType[kind.upper()]


def round_tensor(weight: Float[Tensor, "*shape"], kind: str) -> Float[Tensor, "*shape"]:
    """`weight` rounded to GGUF type `kind` and dequantised (fp32); a vector, or a matrix whose
    last axis is not a multiple of 32, is returned unchanged (llama.cpp keeps those F32)."""
    from gguf import quants

    qtype = _qtype(kind)
    if weight.ndim < 2 or weight.shape[-1] % BLOCK:
        return weight
    data = weight.detach().to(torch.float32).cpu().numpy()
    back = quants.dequantize(quants.quantize(np.ascontiguousarray(data), qtype), qtype)
    return torch.from_numpy(np.asarray(back, dtype=np.float32).reshape(weight.shape))


@dataclass(frozen=True)
class RoundingPlan:
    """Which GGUF type each matrix gets: `default` for all, `by_name` for tensors whose name
    contains a key (the first key that matches wins; None keeps the tensor F32)."""

    default: str
    by_name: dict[str, str | None] = field(default_factory=dict)

    def kind_of(self, name: str) -> str | None:
        return next((k for key, k in self.by_name.items() if key in name), self.default)

    def to_dict(self) -> dict:
        return {"default": self.default, "by_name": dict(self.by_name)}


GGUF_CLASSES = {"token_embd": "embed_tokens", "output": "lm_head"}
"""GGUF tensor classes whose storage type a file may choose apart from the blocks', with their
transformers names (the blocks' matrices take the plan's type)."""


def file_plan(gguf_path: str | Path, kind: str) -> RoundingPlan:
    """Round every matrix to `kind`, except the classes of `GGUF_CLASSES` that the file at
    `gguf_path` stores in an 8-bit or wider type: those are rounded to Q8_0 (an F16 / F32 one
    stays F32), as a file of `kind` from the same converter would keep them."""
    from gguf import GGMLQuantizationType, GGUFReader

    keep = {}
    for t in GGUFReader(Path(gguf_path)).tensors:
        name = t.name.removesuffix(".weight")
        if name in GGUF_CLASSES and t.tensor_type not in (
            GGMLQuantizationType.Q4_0, GGMLQuantizationType.Q4_1, GGMLQuantizationType.Q4_K,
        ):  # fmt: skip
            wide = t.tensor_type in (GGMLQuantizationType.F16, GGMLQuantizationType.F32)
            keep[GGUF_CLASSES[name]] = None if wide else "q8_0"
    return RoundingPlan(kind, {"norm": None, **keep})


def round_state(state: dict[str, Tensor], plan: RoundingPlan) -> tuple[dict, list[dict]]:
    """Every tensor of `state` rounded by `plan`, and a row per tensor: its type (or "F32"),
    shape and relative RMS change."""
    out, rows = {}, []
    for name, weight in state.items():
        kind = plan.kind_of(name)
        new = round_tensor(weight, kind) if kind else weight
        change = float((new - weight).norm() / weight.norm().clamp_min(1e-30))
        rows.append({"tensor": name, "type": kind if new is not weight else "F32",
                     "shape": list(weight.shape), "relative_rms_change": change})  # fmt: skip
        out[name] = new.contiguous()
    return out, rows


def round_model(model, plan: RoundingPlan) -> list[dict]:
    """Every parameter of a loaded `model` (a TransformerBridge: its `original_model`; or any
    torch module) rounded by `plan` in place, as `round_state` rounds a folder's tensors; returns
    `round_state`'s rows (named as the module names its parameters)."""
    module = getattr(model, "original_model", model)
    params = dict(module.named_parameters())
    state, rows = round_state({name: p.detach() for name, p in params.items()}, plan)
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(state[name])
    return rows


def round_folder(src: str | Path, dst: str | Path, plan: RoundingPlan) -> list[dict]:
    """Write `dst` (a new folder): `src`'s files with its weights rounded by `plan`; also
    `rounding.json` (the plan and the per-tensor rows). Returns the rows."""
    from safetensors.torch import load_file, save_file

    src, dst = Path(src), Path(dst)
    weights = src / "model.safetensors"
    if not weights.is_file():
        raise ValueError(f"{src} has no model.safetensors: pass a model folder of one fp32 file")
    if dst.exists():
        raise ValueError(f"{dst} exists: pass a new folder")
    state, rows = round_state(load_file(weights), plan)
    skip = shutil.ignore_patterns("model.safetensors", "*.gguf", ".*")
    with atomic_folder(dst, {"rounding": plan.to_dict(), "source": src.name}) as tmp:
        shutil.copytree(src, tmp, ignore=skip, dirs_exist_ok=True)
        save_file(state, tmp / "model.safetensors", metadata={"format": "pt"})
        write_json(tmp / "rounding.json", {"source": src.name, "plan": plan.to_dict(),
                                           "tensors": rows})  # fmt: skip
    return rows


def cached_rounding(key: str, kind: str) -> Path:
    """The loader's fp32 folder of registry model `key` (a GGUF file) rounded to `kind` by the
    file's own plan (`file_plan`), written once into the cache (`<cache>/rounded/<key>-<kind>`)
    and read from there after; `circuits.load_model` reads the folder returned."""
    from attn_sink_circuits.models import cache
    from attn_sink_circuits.models.gguf import verified_single_file
    from attn_sink_circuits.models.load import load_model
    from attn_sink_circuits.models.registry import get_spec

    dst = cache.cache_root() / "rounded" / f"{key}-{kind}"
    if not (dst / "rounding.json").is_file():
        load_model(key)  # builds the cache entry (the dequantised fp32 folder) if missing
        round_folder(
            cache.entry_dir(key), dst, file_plan(verified_single_file(get_spec(key)), kind)
        )
    return dst


__all__ = [
    "BLOCK",
    "GGUF_CLASSES",
    "TYPES",
    "RoundingPlan",
    "cached_rounding",
    "file_plan",
    "round_folder",
    "round_model",
    "round_state",
    "round_tensor",
]
