"""`load_model`: one entry point from a model spec to a TransformerBridge with raw weights."""

from __future__ import annotations

import hashlib
import json
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlparse

import torch
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.identity import ModelInfo, record_info
from attn_sink_circuits.models import cache
from attn_sink_circuits.models.devices import check_device
from attn_sink_circuits.models.gguf import (
    assemble,
    check_gguf_magic,
    check_gguf_readable,
    sha256_file,
    verified_single_file,
)
from attn_sink_circuits.models.registry import DEFAULT_MODEL, MODELS, ModelSpec, get_spec

INFO_ATTR = "circuits_info"
"""Transitional: the attribute a bridge still carries its ModelInfo under, for code not yet
reading `attn_sink_circuits.core.identity.model_info` (emergence/run_phases.py, claims/, graph/,
circuit.py, scripts); read the record with `model_info`, never this attribute."""


def attach_info(model: TransformerBridge, **fields) -> ModelInfo:
    """Record a ModelInfo for `model` (`attn_sink_circuits.core.identity`): the given provenance fields
    plus what its config says (layers, heads, widths, dtype, whether a BOS token is prepended)."""
    cfg = model.cfg
    info = ModelInfo(
        **fields,
        prepend_bos=bool(getattr(cfg, "default_prepend_bos", True))
        and model.tokenizer.bos_token_id is not None,
        n_layers=cfg.n_layers,
        n_heads=cfg.n_heads,
        n_kv_heads=getattr(cfg, "n_key_value_heads", None) or cfg.n_heads,
        d_model=cfg.d_model,
        d_mlp=cfg.d_mlp,
        dtype=str(cfg.dtype).removeprefix("torch."),
    )
    setattr(model, INFO_ATTR, info)
    return record_info(model, info)


def _log(msg: str) -> None:
    print(f"[circuits] {msg}", file=sys.stderr, flush=True)


def _dequantise_into(gguf_path: Path, folder: Path, key: str, architecture: str | None) -> dict:
    """Dequantise a GGUF into a Hugging Face folder (fp32 safetensors + tokenizer + config)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    check_gguf_readable(gguf_path)
    _log(f"dequantising {key} (first load only, 20-80 s; later loads read the cache)")
    tok = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    hf = AutoModelForCausalLM.from_pretrained(
        gguf_path.parent,
        gguf_file=gguf_path.name,
        dtype=torch.float32,
        attn_implementation="eager",
    )
    # The saved folder must load as plain fp32 weights, not as a GGUF-quantised model.
    hf.hf_quantizer = None
    if hasattr(hf.config, "quantization_config"):
        del hf.config.quantization_config
    if not getattr(hf.config, "architectures", None):
        # Some GGUF configs (Gemma 3) omit it; TransformerLens selects its adapter from it.
        hf.config.architectures = [architecture or type(hf).__name__]
    hf.save_pretrained(folder)
    tok.save_pretrained(folder)
    return {"architectures": list(hf.config.architectures)}


def _cached_folder(
    name: str, get_gguf: Callable[[Path], Path], owns_gguf: bool, meta: dict
) -> tuple[Path, dict, bool]:
    """The cache entry `name` of the GGUF with sha256 `meta["gguf_sha256"]`, built if missing
    or untrusted; returns (folder, manifest, was_cached).

    `get_gguf(scratch_path)` yields the verified GGUF only when a build is needed; if
    `owns_gguf`, that file is a scratch copy and is deleted after dequantising.
    """

    def build(folder: Path) -> dict:
        path = get_gguf(folder.parent / f"{folder.name}.gguf")
        try:
            return {**meta, **_dequantise_into(path, folder, meta["key"], meta.get("architecture"))}
        finally:
            if owns_gguf and path.exists():
                path.unlink()

    return cache.ensure_entry(name, build, meta["gguf_sha256"])


def _spec_folder(spec: ModelSpec) -> tuple[Path, dict, bool]:
    meta = {"key": spec.key, "gguf_sha256": spec.sha256, "architecture": spec.architecture}
    if len(spec.chunks) == 1:
        # A one-file GGUF is verified and read in place, not copied.
        return _cached_folder(spec.key, lambda _: verified_single_file(spec), False, meta)
    return _cached_folder(spec.key, lambda dest: assemble(spec, dest), True, meta)


# Files a tokenizer can be loaded from (fast tokenizer, sentencepiece, BPE / WordPiece vocab).
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "spiece.model", "vocab.json", "vocab.txt")


def _check_folder(folder: Path) -> None:
    """Raise ValueError unless `folder` holds a readable transformers config.json."""
    config = folder / "config.json"
    if not config.is_file():
        raise ValueError(
            f"{folder} is a folder but not a Hugging Face model folder (no config.json); "
            "pass a folder written by save_pretrained, a .gguf file, or a model key"
        )
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{config} is not valid JSON ({err}); fix or re-save it") from None
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise ValueError(
            f'{config} has no "model_type" (it is not a transformers config); re-save the model '
            "with save_pretrained"
        )


def _boot(
    hub_name: str, folder: Path, device: str, dtype: torch.dtype, placement: dict
) -> TransformerBridge:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    _check_folder(folder)
    try:
        config = AutoConfig.from_pretrained(folder)
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(
            f"{folder / 'config.json'} cannot be read by transformers: {err}"
        ) from None
    _check_supported(config)
    if not any((folder / name).is_file() for name in _TOKENIZER_FILES):
        raise ValueError(
            f"{folder} has no tokenizer (none of {', '.join(_TOKENIZER_FILES)}); save one into "
            "it with tokenizer.save_pretrained(folder)"
        )
    # The tokenizer is loaded from the folder so TransformerLens can re-create it by path.
    tok = AutoTokenizer.from_pretrained(folder)
    hf = AutoModelForCausalLM.from_pretrained(
        folder, dtype=dtype, attn_implementation="eager", **_hf_placement(placement)
    )
    return TransformerBridge.boot_transformers(
        hub_name, hf_model=hf, tokenizer=tok, device=None if placement else device, dtype=dtype
    )


def _placement(n_devices: int | None, device_map: str | dict | None, device: str) -> dict:
    """The bridge's split of a model over devices (empty: all on `device`), checked before any
    weights load."""
    if device_map is None and (n_devices is None or n_devices == 1):
        return {}
    if device_map is not None and n_devices not in (None, 1):
        raise ValueError("give n_devices or device_map, not both")
    if device != "cpu":
        raise ValueError(
            f"device {device!r} and a split over devices (n_devices / device_map) exclude each "
            "other; leave device at its default"
        )
    if n_devices is not None and n_devices < 1:
        raise ValueError(f"n_devices must be >= 1, got {n_devices}")
    if device_map is None and torch.cuda.device_count() < n_devices:
        raise ValueError(
            f"n_devices={n_devices} needs that many CUDA devices; this machine has "
            f"{torch.cuda.device_count()}. Use n_devices=1, or a device_map"
        )
    return {"n_devices": n_devices, "device_map": device_map}


def _hf_placement(placement: dict) -> dict:
    """`from_pretrained` keywords for `placement`: TransformerLens's translation of n_devices
    into a balanced map with per-device memory caps, or the map as given."""
    if not placement:
        return {}
    from transformer_lens.utilities.multi_gpu import resolve_device_map

    device_map, max_memory = resolve_device_map(
        placement["n_devices"], placement["device_map"], None
    )
    return {"device_map": device_map, "max_memory": max_memory}


def hub_reachable(timeout: float = 3.0) -> str | None:
    """None if the Hugging Face hub can be reached now, else why not (offline mode set, or no
    connection within `timeout` seconds)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
    except OSError as err:
        return f"{host} cannot be reached ({err})"
    return None


def hub_cached(name: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(name, "config.json"), str)


def _check_supported(config) -> None:
    from transformer_lens.factories.architecture_adapter_factory import SUPPORTED_ARCHITECTURES

    archs = list(getattr(config, "architectures", None) or [])
    if not any(a in SUPPORTED_ARCHITECTURES for a in archs):
        raise ValueError(
            f"unsupported architecture {archs or config.model_type!r}: TransformerLens "
            f"{_tl_version()} has no adapter for it. Supported include LlamaForCausalLM, "
            "Qwen2ForCausalLM, Gemma3ForCausalLM, GPT2LMHeadModel (see "
            "transformer_lens.factories.architecture_adapter_factory.SUPPORTED_ARCHITECTURES)"
        )


WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth")
"""The files of a model folder that hold weights (what `folder_sha256` hashes)."""


def folder_sha256(folder: Path) -> str:
    """sha256 over the weight files of a model folder (each file's name and sha256, in name
    order): the same weights give the same hash wherever the folder is, replaced weights a
    different one."""
    files = sorted({p for pattern in WEIGHT_FILES for p in folder.glob(pattern) if p.is_file()})
    listing = "".join(f"{p.name}\t{sha256_file(p)}\n" for p in files)
    return hashlib.sha256(listing.encode()).hexdigest()


def _tl_version() -> str:
    from importlib.metadata import version

    return version("transformer-lens")


@dataclass
class _Source:
    """Where a spec's weights come from, before anything is booted: the provenance fields of
    `ModelInfo` (same names), and the local folder to boot from (None: the hub)."""

    key: str
    hub_name: str
    source: str
    folder: Path | None
    gguf_sha256: str | None = None
    cache_dir: str | None = None
    from_cache: bool = False
    quantised_source: bool = True


def _registry_source(text: str) -> _Source:
    mspec = get_spec(text)
    folder, manifest, from_cache = _spec_folder(mspec)
    return _Source(text, mspec.hub_name, "pypi:" + " ".join(mspec.packages), folder,
                   manifest["gguf_sha256"], str(folder), from_cache)  # fmt: skip


def _gguf_source(path: Path) -> _Source:
    check_gguf_magic(path)
    sha = sha256_file(path)
    meta = {"key": str(path), "gguf_sha256": sha}
    folder, manifest, from_cache = _cached_folder(f"gguf-{sha[:16]}", lambda _: path, False, meta)
    return _Source(str(path), str(path), f"gguf:{path}", folder, manifest["gguf_sha256"],
                   str(folder), from_cache)  # fmt: skip


def _hub_source(text: str) -> _Source:
    if not hub_cached(text) and (why := hub_reachable()):
        raise ValueError(
            f"{text!r} is not a local file or folder, and as a Hugging Face hub name it needs "
            f"the hub, which is unavailable ({why}); pass a model key ({', '.join(MODELS)}), a "
            ".gguf file or a model folder"
        )
    return _Source(text, text, f"hub:{text}", None, quantised_source=False)


def _resolve(spec: str | Path) -> _Source:
    """The source of `spec` (see `load_model`), or a clear error naming what to pass instead."""
    text = str(spec)
    path = Path(text).expanduser()
    if text in MODELS:
        return _registry_source(text)
    if path.is_file():
        return _gguf_source(path)
    if path.is_dir():
        # A folder is named by its absolute path (so FOLDER and FOLDER/ are one model) and
        # known by its weights' hash (so replaced weights are another).
        path = path.resolve()
        return _Source(str(path), str(path), f"folder:{path}", path, quantised_source=False)
    if (
        path.suffix.lower() == ".gguf"
        or text.startswith((".", "/", "~"))
        or text.count("/") > 1
        or (text.count("/") == 1 and path.parent.is_dir())
    ):
        raise FileNotFoundError(
            f"no such file or folder: {path}; pass an existing .gguf file or model folder, or a "
            f"model key ({', '.join(MODELS)})"
        )
    if text.count("/") == 1:
        return _hub_source(text)
    get_spec(text)  # raises the error that lists the known keys
    raise AssertionError("unreachable")


def load_model(
    spec: str | Path = DEFAULT_MODEL,
    *,
    device: str = "cpu",
    dtype: torch.dtype = torch.float32,
    n_devices: int | None = None,
    device_map: str | dict | None = None,
) -> TransformerBridge:
    """Load a model as a TransformerBridge with raw (unfolded, uncentred) weights.

    `spec` is a registry key (`smollm2-135m`, `qwen2.5-0.5b`, `gemma-3-270m`, ...), a path to a
    `.gguf` file, a path to a local Hugging Face model folder, or a Hugging Face hub name (needs
    internet). GGUF weights are dequantised once and cached (see `attn_sink_circuits.models.cache`).
    What the bridge is (a `ModelInfo`) is recorded for it: `circuits.model_info(bridge)`.

    A model larger than one device is split over `n_devices` CUDA devices (a balanced split of
    its blocks) or by a Hugging Face `device_map` ("auto", "balanced" or {module: device});
    then `device` stays at its default and `model.cfg.device` is the embedding's device.
    """
    placement = _placement(n_devices, device_map, device)
    t0 = time.perf_counter()
    check_device(device)
    src = _resolve(spec)
    if src.folder is None:
        model = TransformerBridge.boot_transformers(
            src.hub_name, device=None if placement else device, dtype=dtype, **placement
        )
    else:
        model = _boot(src.hub_name, src.folder, device, dtype, placement)
    provenance = {k: v for k, v in asdict(src).items() if k != "folder"}
    own_folder = src.source.startswith("folder:")
    attach_info(
        model,
        **provenance,
        load_seconds=time.perf_counter() - t0,
        weights_sha256=folder_sha256(src.folder) if own_folder else None,
    )
    model.eval()
    return model
