"""Tracr-compiled models as TransformerBridges: the committed fixtures of
`attn_sink_circuits.studies.known_answers` (or any folder written by `attn_sink_circuits.studies.known_answers.compile`) loaded with
torch alone, no jax.

A compiled model is TransformerLens's native architecture without norms: learned token and
position embeddings, bidirectional attention scaled by 1 / sqrt(d_head), ReLU MLPs. Its
unembedding reads the output label's residual dimensions: one column per output value of a
categorical program (the logits are Tracr's output scores, argmax decodes), one column holding
the value of a numerical one. The tokenizer maps each vocabulary value (as text, split on
whitespace) to Tracr's input id and puts BOS first, so `model.to_tokens("1 2 3")` is Tracr's
encoding of [BOS, 1, 2, 3].
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.models.load import attach_info

FIXTURES = Path(__file__).resolve().parent.parent / "studies" / "known_answers" / "compiled"
"""The committed fixtures (one `<name>.npz` and `<name>.json` per program)."""


@dataclass
class CompiledModel:
    """A compiled program: the bridge, the fixture's metadata (`meta`: residual labels,
    encoders, output label, declared blocks) and its arrays (`arrays`: Tracr's weights, every
    input and Tracr's residuals on it)."""

    name: str
    model: TransformerBridge
    meta: dict
    arrays: dict

    @property
    def labels(self) -> list[str]:
        """The residual stream's basis labels, one per dimension (Tracr's)."""
        return self.meta["residual_labels"]

    @property
    def lengths(self) -> list[int]:
        """Input lengths (without BOS) the fixture holds, 1..max_seq_len."""
        return list(range(1, self.meta["max_seq_len"] + 1))

    @cached_property
    def encoding(self) -> dict:
        """Input value -> token id (BOS and PAD included)."""
        return {value: token for value, token in self.meta["input_encoding"]}

    def tokens(self, length: int) -> Int[Tensor, "batch pos"]:
        """Every input of `length` values, BOS first, as token ids [inputs, 1 + length]."""
        return torch.as_tensor(self.arrays[f"tokens_{length}"], dtype=torch.long)

    def residuals(self, length: int) -> Float[Tensor, "batch site pos d_model"]:
        """Tracr's residual stream after every attention and MLP (site 2l: after block l's
        attention, 2l + 1: after its MLP) on `tokens(length)`."""
        return torch.as_tensor(self.arrays[f"residuals_{length}"])

    def tracr_output(self, length: int) -> Float[Tensor, "batch pos"]:
        """Tracr's decoded output on `tokens(length)`: class ids, or the numerical value."""
        return torch.as_tensor(self.arrays[f"output_{length}"])

    def output_dims(self) -> list[int]:
        """The residual dimensions the unembedding reads, in output-column order."""
        return output_dims(self.meta)

    def encode(self, values) -> Int[Tensor, "1 pos"]:
        """Token ids [1, 1 + len(values)] of one input (BOS prepended)."""
        missing = [v for v in values if v not in self.encoding]
        if missing:
            raise ValueError(f"{self.name}: values {missing!r} are not in its vocabulary "
                             f"{self.meta['vocab']!r}")  # fmt: skip
        ids = [self.encoding[self.meta["bos"]], *(self.encoding[v] for v in values)]
        return torch.tensor([ids], dtype=torch.long)


def output_dims(meta: dict) -> list[int]:
    """The residual dimensions of a fixture's output label, in output-column order (one for a
    numerical output)."""
    out, labels = meta["output"], meta["residual_labels"]
    if not out["categorical"]:
        return [labels.index(out["label"])]
    by_id = sorted(out["encoding"], key=lambda pair: pair[1])
    return [labels.index(f"{out['label']}:{value}") for value, _ in by_id]


def _fixture_paths(name_or_folder: str | Path) -> tuple[str, Path, Path]:
    path = Path(name_or_folder)
    if path.suffix in (".json", ".npz"):
        path = path.with_suffix("")
    base = path if path.parent != Path(".") or path.exists() else FIXTURES / path.name
    npz, meta = base.with_suffix(".npz"), base.with_suffix(".json")
    if not npz.is_file() or not meta.is_file():
        known = sorted(p.stem for p in FIXTURES.glob("*.json"))
        raise ValueError(f"no compiled model {str(name_or_folder)!r} (need {npz.name} and "
                         f"{meta.name}); the committed ones: {', '.join(known)}")  # fmt: skip
    return base.name, npz, meta


def _tokenizer(meta: dict, folder: Path):
    """A whitespace word-level tokenizer over Tracr's input encoding, BOS first."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    bos, pad = meta["bos"], meta["pad"]
    vocab = {str(value): token for value, token in meta["input_encoding"]}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token=pad))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", special_tokens=[(bos, vocab[bos])]
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token=bos, pad_token=pad)
    fast.save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


def _param(arrays, module: str, key: str) -> Tensor:
    return torch.as_tensor(np.asarray(arrays[f"param/{module}/{key}"]), dtype=torch.float32)


def _load_weights(native: torch.nn.Module, arrays, unembed: Float[Tensor, "d_model out"]) -> None:
    """Copy Tracr's haiku parameters into the native model's modules (torch Linear: [out, in]);
    every parameter is written, so none keeps its random start."""
    parts = {("attn", "q"): "attn/query", ("attn", "k"): "attn/key", ("attn", "v"): "attn/value",
             ("attn", "o"): "attn/linear", ("mlp", "fc_in"): "mlp/linear_1",
             ("mlp", "fc_out"): "mlp/linear_2"}  # fmt: skip
    written = 0
    with torch.no_grad():
        native.tok_embed.weight.copy_(_param(arrays, "token_embed", "embeddings"))
        native.pos.weight.copy_(_param(arrays, "pos_embed", "embeddings"))
        native.head.weight.copy_(unembed.T)
        written += 3
        for layer, block in enumerate(native.layers):
            for (sub, name), theirs in parts.items():
                linear = getattr(getattr(block, sub), name)
                module = f"transformer/layer_{layer}/{theirs}"
                linear.weight.copy_(_param(arrays, module, "w").T)
                linear.bias.copy_(_param(arrays, module, "b"))
                written += 2
    total = sum(1 for _ in native.parameters())
    if written != total:
        raise RuntimeError(f"wrote {written} of the compiled model's {total} parameters")


def load_compiled(name_or_path: str | Path = "reverse", folder=None) -> CompiledModel:
    """The compiled program `name_or_path` (a committed fixture's name, e.g. "reverse", or the
    path of a fixture without its suffix) as a `CompiledModel` whose `.model` is a
    TransformerBridge with every hook the library patches."""
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge.sources.native import boot

    name, npz, meta_path = _fixture_paths(name_or_path)
    meta = json.loads(meta_path.read_text())
    with np.load(npz) as data:
        arrays = {key: data[key] for key in data.files}
    token_embed = arrays["param/token_embed/embeddings"]
    cfg_in = meta["config"]
    dims = output_dims(meta)
    unembed = torch.zeros(token_embed.shape[1], len(dims))
    unembed[dims, torch.arange(len(dims))] = 1.0
    # No unembedding bias: the native model's head has none.
    cfg = TransformerBridgeConfig(
        n_layers=cfg_in["n_layers"], d_model=token_embed.shape[1], d_head=cfg_in["d_head"],
        n_ctx=arrays["param/pos_embed/embeddings"].shape[0], d_vocab=token_embed.shape[0],
        d_vocab_out=len(dims), d_mlp=cfg_in["d_mlp"], n_heads=cfg_in["n_heads"], act_fn="relu",
        attention_dir="causal" if cfg_in["causal"] else "bidirectional",
        normalization_type=None,
    )  # fmt: skip
    cache = Path(folder or tempfile.mkdtemp(prefix=f"circuits-tracr-{name}-"))
    model = boot(cfg, tokenizer=_tokenizer(meta, cache), device="cpu", dtype=torch.float32)
    _load_weights(model.original_model, arrays, unembed)
    attach_info(
        model, key=f"tracr-{name}", source=f"tracr:{npz.name}", hub_name=f"tracr/{name}",
        gguf_sha256=None, cache_dir=str(cache), from_cache=False, load_seconds=0.0,
        quantised_source=False,
    )  # fmt: skip
    model.eval()
    return CompiledModel(name, model, meta, arrays)


__all__ = ["FIXTURES", "CompiledModel", "load_compiled", "output_dims"]
