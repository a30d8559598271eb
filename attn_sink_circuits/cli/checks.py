"""Refusals that need no model, made before torch is imported (each well under a second): the
output folder, checkpoint folders, input files that do not exist, an unknown model key and a
device this torch cannot have. Each raises a ValueError or OSError whose one line says what was
wrong and how to fix it; the loader's own checks still run when the model loads."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

DEVICE = re.compile(r"(cpu|cuda|mps)(:\d+)?")
"""The devices a model runs on (`attn_sink_circuits.models.devices.check_device` checks the rest)."""


def check_out(path: str) -> Path:
    """The --out folder, refused at once when it cannot be written."""
    from attn_sink_circuits.runs.io import check_out_folder

    return check_out_folder(path)


def check_checkpoints(
    given: str | None, default: str, resume: bool, option: str = "--checkpoints"
) -> Path:
    """A folder for a command's finished steps (`given` as `option`, else `default`, beside
    --out), refused at once when it cannot be written, or when it already holds an earlier
    run's and `resume` is not set (nothing is silently reused or overwritten). The refusal
    names `option` only when the user gave it."""
    from attn_sink_circuits.runs.io import check_writable_folder

    named = option if given is not None else "the steps folder"
    folder = check_writable_folder(given or default, named)
    if not resume and folder.is_dir() and any(folder.iterdir()):
        if given is None:
            raise ValueError(
                f"{folder} holds the finished steps of an earlier run into this --out (killed or "
                "failed): pass --resume to continue it, or delete that folder to start again"
            )
        raise ValueError(
            f"{option} {folder} holds the checkpoints of an earlier run: pass --resume to "
            "continue it, or delete the folder"
        )
    return folder


def existing(path: str | None, option: str, what: str) -> None:
    """Refuse an input `path` (given as `option`) that does not exist; `what` it should be."""
    if path is not None and not Path(path).expanduser().exists():
        raise FileNotFoundError(f"{option} {path}: no such file; give {what}")


def check_model(text: str | None) -> None:
    """Refuse a bare --model name that is not a registry key (the registry's error lists the
    keys). Paths, folders and hub names (owner/name) are left to the loader."""
    from attn_sink_circuits.models.registry import MODELS, get_spec

    if text is None or text in MODELS or "/" in text or text.startswith((".", "~")):
        return
    if text.lower().endswith(".gguf") or Path(text).exists():
        return
    get_spec(text)


def _torch_build() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return ""


def check_device(device: str) -> None:
    """Refuse a --device no model runs on, or CUDA under a CPU-only torch build (read from the
    installed package's version, "+cpu", without importing torch). Whether a GPU is visible
    needs torch: `attn_sink_circuits.models.devices.check_device` asks it when the model loads."""
    if not DEVICE.fullmatch(device):
        raise ValueError(f"--device {device} is not a device; use cpu, cuda, cuda:N or mps")
    build = _torch_build() if device.startswith("cuda") else ""
    if build.endswith("+cpu"):
        raise ValueError(
            f"--device {device}: CUDA is not available (this torch, {build}, is a CPU-only "
            "build); use --device cpu"
        )


def check_model_args(args: argparse.Namespace) -> None:
    """--model and --device of a command that has them."""
    check_model(getattr(args, "model", None))
    if getattr(args, "device", None) is not None:
        check_device(args.device)


__all__ = [
    "DEVICE",
    "check_checkpoints",
    "check_device",
    "check_model",
    "check_model_args",
    "check_out",
    "existing",
]
