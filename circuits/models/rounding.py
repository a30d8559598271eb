"""Weights rounded as llama.cpp stores them, and back: what 4- or 8-bit storage changes.

A model folder (fp32 safetensors, e.g. a training checkpoint or the loader's dequantised cache
entry) is written again with every matrix rounded to a GGUF block type (Q4_0, Q4_1, Q8_0: blocks
of 32 values along the last axis, `gguf.quants`) and dequantised back to fp32, as the loader
dequantises a GGUF file. Vectors (norm weights, biases) stay F32, as llama.cpp leaves them.
`circuits.load_model(folder)` reads the result like any local model.

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

from circuits._io import atomic_folder, write_json

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


__all__ = ["BLOCK", "TYPES", "RoundingPlan", "round_folder", "round_state", "round_tensor"]
