"""How a pipeline runs its steps: `Steps` times each under one progress bar. Given a checkpoint
folder and a `key` naming the run (`run_key`: model, weights, config, texts), it saves each
finished step's result there (atomically) and, on a later run with the same key, loads it
instead of running the step again, so a run killed in its last step loses only that step. A
folder written for another key is refused with the differences, never silently reused.
"""

from __future__ import annotations

import json
import pickle
import random
import time
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from attn_sink_circuits.core.identity import model_key, recorded_info, weights_sha256
from attn_sink_circuits.core.texts import texts_sha256
from attn_sink_circuits.runs.io import atomic_write, strict_json, write_json
from attn_sink_circuits.runs.renames import current_module

KEY_FILE = "key.json"
"""In a checkpoint folder: the key of the run its steps belong to (strict JSON)."""
STEP_SUFFIX = ".step.pkl"
"""In a checkpoint folder: one `{step}.step.pkl` per finished step (pickle)."""


def run_key(model, config, texts: Sequence[str], kinds: Sequence[str] | None = None) -> dict:
    """What identifies a pipeline run for its checkpoints: the model key, its weights (the GGUF's
    SHA-256 plus the dtype for a registry model, else the hash of the weight tensors), the
    config's fields (nested configs too) and a hash of the texts (with their kinds, if given)."""
    info = recorded_info(model)
    if info is not None and info.gguf_sha256:
        weights = f"gguf:{info.gguf_sha256}"
    else:
        weights = f"tensors:{weights_sha256(model)}"
    text_hash = texts_sha256(texts, kinds)
    return {
        "model": model_key(model),
        "weights": weights,
        "dtype": str(model.cfg.dtype).removeprefix("torch."),
        "config": config.to_dict(),
        "texts": f"{len(texts)} texts, sha256 {text_hash}",
    }


def _differences(saved: dict, key: dict) -> list[str]:
    """What differs between two run keys, e.g. ["config n_tokens: 20 there, 16 now", "texts"]."""
    out = []
    for name in dict.fromkeys([*saved, *key]):
        old, new = saved.get(name), key.get(name)
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            out += [f"{name} {d}" for d in _differences(old, new)]
        elif name in ("weights", "texts"):
            out.append(name)
        else:
            out.append(f"{name}: {old!r} there, {new!r} now")
    return out


class _Dropped:
    """Stands in for a local function (closure) of a step result loaded from a checkpoint:
    pickle cannot save one, and nothing reads it after its step."""

    def __init__(self, qualname: str) -> None:
        self.qualname = qualname

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"{self.qualname} was not saved with its step's checkpoint (a local function); run "
            "the step again without the checkpoint to call it"
        )


class _Pickler(pickle.Pickler):
    def __init__(self, fh, shared: Mapping[str, Any]) -> None:
        super().__init__(fh, protocol=pickle.HIGHEST_PROTOCOL)
        self.shared = {id(obj): name for name, obj in shared.items()}

    def persistent_id(self, obj: Any) -> Any:
        name = self.shared.get(id(obj))
        if name is not None:
            return ("shared", name)
        if isinstance(obj, types.FunctionType) and "<l" in obj.__qualname__:  # <locals>, <lambda>
            return ("dropped", f"{obj.__module__}.{obj.__qualname__}")
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, fh, shared: Mapping[str, Any]) -> None:
        super().__init__(fh)
        self.shared = shared

    def persistent_load(self, pid: Any) -> Any:
        kind, name = pid
        return self.shared[name] if kind == "shared" else _Dropped(name)

    def find_class(self, module: str, name: str) -> Any:
        # A checkpoint written before the package's move names its classes' old modules.
        return super().find_class(current_module(module), name)


def _rng_state() -> dict:
    state = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "random": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["random"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def remove_checkpoints(folder: str | Path) -> None:
    """Delete a checkpoint folder's files (key and steps) and the folder once it is empty;
    anything else in it is left alone."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    for path in [folder / KEY_FILE, *folder.glob(f"*{STEP_SUFFIX}"), *folder.glob(".*.tmp")]:
        path.unlink(missing_ok=True)
    if not any(folder.iterdir()):
        folder.rmdir()


class Steps:
    """Run a pipeline's steps in order, timing each (`seconds`) under one progress bar (on
    stderr, naming the step that runs; closed by `close` or at the end of a `with` block, and at
    once when a step raises or is interrupted, so the caller's message comes last).

    With `checkpoint` (a folder) and `key` (what identifies the run, see `run_key`), each
    finished step's result is saved there atomically (`{step}.step.pkl`, with the key, its
    seconds and the random-number state after it), and a step already saved under the same key
    is loaded instead of run (listed in `resumed`; its seconds are the original run's, and the
    random state is restored, so later steps run as they would have). A folder whose key differs
    is refused at once. Objects in `shared` (the model) are saved by reference and come back as
    the ones given; local functions in a result (a metric's closure) cannot be pickled and come
    back as stand-ins that raise if called. Checkpoints are pickles: load only folders you wrote.
    """

    def __init__(
        self,
        total: int,
        desc: str,
        progress: bool,
        *,
        checkpoint: str | Path | None = None,
        key: dict | None = None,
        shared: Mapping[str, Any] | None = None,
    ) -> None:
        self.seconds: dict[str, float] = {}
        self.resumed: list[str] = []
        self.folder = None if checkpoint is None else Path(checkpoint)
        self.key = None if key is None else json.loads(strict_json(key))
        self.shared = dict(shared or {})
        if self.folder is not None:
            if self.key is None:
                raise ValueError("a checkpoint folder needs the run's key (see run_key)")
            self._check_folder()
        self._bar = tqdm(total=total, desc=desc, disable=not progress)

    def _check_folder(self) -> None:
        folder = self.folder
        if folder.exists() and not folder.is_dir():
            raise ValueError(f"checkpoint folder {folder} is a file; give a folder")
        if not folder.is_dir():
            return
        for stray in folder.glob(".*.tmp"):  # a save cut short by a kill
            stray.unlink(missing_ok=True)
        path = folder / KEY_FILE
        if not path.is_file():
            if any(folder.iterdir()):
                raise ValueError(
                    f"{folder} is not a checkpoint folder (no {KEY_FILE}) and not empty; give an "
                    "empty or new folder for the checkpoints"
                )
            return
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as err:
            raise ValueError(f"{path} cannot be read ({err}); delete {folder}") from None
        self._check_key(saved, folder)

    def _check_key(self, saved: dict, where: Path) -> None:
        if saved != self.key:
            differ = "; ".join(_differences(saved, self.key))
            raise ValueError(
                f"{where} was written by another config/model/texts ({differ}); delete "
                f"{self.folder} or use another checkpoint folder (--checkpoints)"
            )

    def _path(self, name: str) -> Path:
        return self.folder / f"{name}{STEP_SUFFIX}"

    def __enter__(self) -> Steps:
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.close()

    def run(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`fn(*args, **kwargs)`, timed as step `name` (or loaded from its checkpoint); the bar
        names the step while it runs."""
        loaded = f"; loaded {', '.join(self.resumed)}" if self.resumed else ""
        self._bar.set_postfix_str(name + loaded)
        try:
            if self.folder is not None and self._path(name).is_file():
                out = self._load(name)
            else:
                t = time.perf_counter()
                out = fn(*args, **kwargs)
                self.seconds[name] = round(time.perf_counter() - t, 2)
                if self.folder is not None:
                    self._save(name, out)
        except BaseException:
            # Closed now, so the bar is not redrawn after the caller's message (Ctrl-C, SIGTERM).
            self._bar.close()
            raise
        self._bar.update(1)
        return out

    def _save(self, name: str, out: Any) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        if not (self.folder / KEY_FILE).is_file():
            write_json(self.folder / KEY_FILE, self.key)
        record = {
            "key": self.key, "step": name, "seconds": self.seconds[name], "rng": _rng_state(),
            "result": out,
        }  # fmt: skip
        with atomic_write(self._path(name), "wb") as fh:
            _Pickler(fh, self.shared).dump(record)

    def _load(self, name: str) -> Any:
        path = self._path(name)
        try:
            with path.open("rb") as fh:
                record = _Unpickler(fh, self.shared).load()
        except Exception as err:
            raise ValueError(
                f"{path} cannot be loaded ({type(err).__name__}: {err}); delete it to run the "
                "step again"
            ) from None
        self._check_key(record["key"], path)
        _set_rng_state(record["rng"])
        self.seconds[name] = record["seconds"]
        self.resumed.append(name)
        return record["result"]

    def close(self) -> dict[str, float]:
        """End the progress bar; the seconds per step."""
        self._bar.close()
        return self.seconds
