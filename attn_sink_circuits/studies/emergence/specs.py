"""Checkpoint specs: what `circuits emergence CHECKPOINT...` accepts, checked before any model
loads, and how each is loaded.

A spec is one of
- a training run of this library (`circuits train-lm --out RUN`): a folder with
  `checkpoints/step_*`, expanded into its checkpoints in step order;
- a Hugging Face model folder (one checkpoint); its step is read from `training.json` (written
  by `attn_sink_circuits.training`) or from a `step_N` / `stepN` / `checkpoint-N` folder name;
- `owner/name@revision`: a hub checkpoint (e.g. Pythia's `EleutherAI/pythia-14m@step1000`),
  for users who have the hub; the step is the revision's number;
- anything else `circuits.load_model` takes (a registry key, a .gguf file).
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

STEP_PATTERN = re.compile(r"(?:step|checkpoint)[_-]?(\d+)$", re.IGNORECASE)
HUB_PATTERN = re.compile(r"^[\w.-]+/[\w.-]+@[\w./-]+$")


@dataclass(frozen=True)
class CheckpointSpec:
    """One model of a series: how to load it and where it sits in training."""

    spec: str
    kind: str
    """"folder", "hub" or "model" (a registry key or .gguf file for `load_model`)."""
    step: int | None
    label: str
    training: dict | None = None
    """The checkpoint's `training.json` (step, losses, tokens) when it has one."""

    def to_dict(self) -> dict:
        return asdict(self)


def _step_from_name(name: str) -> int | None:
    match = STEP_PATTERN.search(name)
    return int(match.group(1)) if match else None


def _folder_spec(folder: Path) -> CheckpointSpec:
    meta = folder / "training.json"
    training = json.loads(meta.read_text(encoding="utf-8")) if meta.is_file() else None
    step = training["step"] if training else _step_from_name(folder.name)
    return CheckpointSpec(str(folder), "folder", step, folder.name, training)


def _run_specs(run: Path) -> list[CheckpointSpec]:
    folders = [p for p in (run / "checkpoints").glob("step_*") if (p / "config.json").is_file()]
    if not folders:
        raise ValueError(f"{run}/checkpoints holds no finished checkpoint; train the run first")
    specs = [_folder_spec(f) for f in folders]
    return sorted(specs, key=lambda s: s.step)


def _trigger_checkpoints(path: Path) -> bool:
    """A trigger-task checkpoint (`attn_sink_circuits.studies.trigger.save_checkpoints`: `step_N.pt`) or a folder
    holding them (`circuits trigger --out`, or its `checkpoints/<run>/`)."""
    if path.is_file():
        return path.suffix == ".pt"
    return path.is_dir() and any(
        p.suffix == ".pt"
        for pattern in ("step_*", "checkpoints/*/step_*")
        for p in path.glob(pattern)
    )


TRIGGER_REFUSAL = (
    "holds trigger-task checkpoints (circuits trigger): those models read real vectors, not "
    "tokens, and are not transformers models, so the series cannot measure them; use "
    "scripts/emergence_trigger.py (or TrainResult.sink_formed_at) for them, or train a token "
    "model on the back-copy corpus (circuits train-lm --corpus backcopy)"
)


def expand_specs(specs: Sequence[str | Path]) -> list[CheckpointSpec]:
    """The ordered checkpoints the specs name (training runs expanded in step order). Raises a
    ValueError naming the first spec that is neither a model or run folder, a .gguf file, a hub
    name with a revision nor a registry key (trigger-task checkpoints included)."""
    from attn_sink_circuits.models.registry import MODELS

    if not specs:
        raise ValueError("no checkpoints given; pass model folders, a training run or name@rev")
    out: list[CheckpointSpec] = []
    for text in map(str, specs):
        path = Path(text).expanduser()
        if _trigger_checkpoints(path):
            raise ValueError(f"{path} {TRIGGER_REFUSAL}")
        if path.is_dir() and (path / "checkpoints").is_dir():
            out += _run_specs(path)
        elif path.is_dir():
            if not (path / "config.json").is_file():
                raise ValueError(
                    f"{path} is a folder with neither config.json nor checkpoints/: pass a model "
                    "folder saved with save_pretrained or a training run folder"
                )
            out.append(_folder_spec(path))
        elif HUB_PATTERN.match(text):
            name, revision = text.split("@", 1)
            out.append(CheckpointSpec(text, "hub", _step_from_name(revision), revision))
        elif path.is_file() and path.suffix != ".gguf":
            raise ValueError(
                f"checkpoint file {path} is not a .gguf file: pass a .gguf, a model folder or a "
                "training run folder"
            )
        elif path.is_file() or text in MODELS:
            out.append(CheckpointSpec(text, "model", _step_from_name(path.stem), path.name))
        else:
            raise ValueError(
                f"checkpoint {text!r} is not a folder, a file, owner/name@revision or a model "
                f"key ({', '.join(MODELS)}); fix the path"
            )
    return out


def load_checkpoint(spec: CheckpointSpec, device: str = "cpu", dtype=torch.float32):
    """The checkpoint as a TransformerBridge with raw weights and a ModelInfo."""
    from attn_sink_circuits.models import load_model

    if spec.kind != "hub":
        return load_model(spec.spec, device=device, dtype=dtype)
    name, revision = spec.spec.split("@", 1)
    return load_hub_revision(name, revision, device, dtype)


def load_hub_revision(name: str, revision: str, device: str, dtype):
    """A hub model at one revision (needs the hub or its local cache). The tokenizer is saved
    to a folder first, since TransformerLens re-loads it by path."""
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from attn_sink_circuits.models.load import attach_info

    t0 = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="circuits-hub-"))
    AutoTokenizer.from_pretrained(name, revision=revision).save_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    hf = AutoModelForCausalLM.from_pretrained(
        name, revision=revision, dtype=dtype, attn_implementation="eager"
    )
    model = TransformerBridge.boot_transformers(
        name, hf_model=hf, tokenizer=tok, device=device, dtype=dtype
    )
    attach_info(
        model,
        key=f"{name}@{revision}",
        source=f"hub:{name}@{revision}",
        hub_name=name,
        gguf_sha256=None,
        cache_dir=str(folder),
        from_cache=False,
        load_seconds=time.perf_counter() - t0,
        quantised_source=False,
    )
    return model.eval()


def check_hub(specs: Sequence[CheckpointSpec]) -> None:
    """Raise a ValueError, before any model loads, when a hub spec needs a hub that cannot be
    reached and is not in the local cache."""
    from attn_sink_circuits.models.load import hub_cached, hub_reachable

    for spec in specs:
        if spec.kind == "hub" and not hub_cached(spec.spec.split("@")[0]):
            if why := hub_reachable():
                raise ValueError(
                    f"checkpoint {spec.spec!r} is a hub revision, and the hub is unavailable "
                    f"({why}); download it elsewhere and pass its folder"
                )
