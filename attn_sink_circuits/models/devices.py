"""Which torch devices a model can run on here: checked before a model loads, so a missing
GPU is one line naming --device, not an error from deep inside the load."""

from __future__ import annotations

import torch


def check_device(device: str) -> str:
    """`device` if torch can run here on it (cpu, an available cuda:N, or mps); else a
    ValueError naming it and the fix. Cheap: call it before loading a model."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"--device {device} is not a device; use cpu, cuda, cuda:N or mps"
        ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        why = (
            "this torch is a CPU-only build" if torch.version.cuda is None else "no GPU is visible"
        )
        raise ValueError(f"--device {device}: CUDA is not available ({why}); use --device cpu")
    if dev.type == "cuda" and (dev.index or 0) >= torch.cuda.device_count():
        raise ValueError(
            f"--device {device}: there are {torch.cuda.device_count()} CUDA devices (0-based)"
        )
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"--device {device}: Apple MPS is not available here; use --device cpu")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"--device {device}: models run on cpu, cuda or mps, not {dev.type}")
    return device


__all__ = ["check_device"]
