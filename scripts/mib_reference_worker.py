"""The reference side of `scripts/mib_reference.py`: runs Hanna et al.'s EAP-IG and MIB's
circuit-track code from their own clones, in their own environment (TransformerLens 2.x with its
HookedTransformer), on this library's cached weights and pairs. Not part of the package and not
run by the tests; `scripts/mib_reference.py` calls it with the other venv's python:

    REF/.venv/bin/python scripts/mib_reference_worker.py --ref REF --folder MODEL_FOLDER \
        --pairs pairs.csv --method EAP-IG-inputs --steps 5 --out scores.json [--device cpu]
    ... --evaluate importances.json --out faithfulness.json   (MIB's CPR / CMD of a file)

REF holds the clones `EAP-IG` (at the commit MIB's submodule pins) and `MIB-circuit-track`.
The model is built from a hand-written HookedTransformerConfig (Llama or Qwen2 architecture,
read from the folder's config.json) and the folder's safetensors, processed as MIB's
`HookedTransformer.from_pretrained` would (fold_ln, center_unembed, fold_value_biases); no hub.
Their code puts its score tensors on 'cuda' by name: on a CPU-only machine a torch function mode
moves those to --device (their arithmetic is untouched).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode


class CudaTo(TorchFunctionMode):
    """Factory calls naming device 'cuda' build on `device` instead."""

    def __init__(self, device: str):
        super().__init__()
        self.device = device

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if str(kwargs.get("device", "")) == "cuda":
            kwargs["device"] = self.device
        return func(*args, **kwargs)


def tl_config(folder: Path, device: str):
    """The HookedTransformerConfig of a Llama / Qwen2 model folder, written by hand."""
    from transformer_lens import HookedTransformerConfig

    c = json.loads((folder / "config.json").read_text())
    arch = c["architectures"][0]
    if arch not in ("LlamaForCausalLM", "Qwen2ForCausalLM"):
        raise ValueError(f"{folder}: architecture {arch}; this worker builds Llama and Qwen2 only")
    rope = c.get("rope_theta") or c.get("rope_parameters", {}).get("rope_theta", 10000.0)
    d_head = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    return HookedTransformerConfig(
        d_model=c["hidden_size"], d_head=d_head, n_heads=c["num_attention_heads"],
        d_mlp=c["intermediate_size"], n_layers=c["num_hidden_layers"], n_ctx=2048,
        eps=c["rms_norm_eps"], d_vocab=c["vocab_size"], act_fn="silu",
        n_key_value_heads=c["num_key_value_heads"], normalization_type="RMS",
        positional_embedding_type="rotary", rotary_adjacent_pairs=False, rotary_dim=d_head,
        rotary_base=int(rope), final_rms=True, gated_mlp=True, original_architecture=arch,
        default_prepend_bos=True, tokenizer_prepends_bos=False, dtype=torch.float32,
        device=device,
    )  # fmt: skip


def load(folder: Path, device: str):
    """The HookedTransformer of `folder`, set up as MIB's scripts set it."""
    from safetensors.torch import load_file
    from transformer_lens import HookedTransformer
    from transformer_lens.pretrained import weight_conversions as wc
    from transformers import (
        AutoTokenizer,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    cfg = tl_config(folder, device)
    c = json.loads((folder / "config.json").read_text())
    qwen = cfg.original_architecture == "Qwen2ForCausalLM"
    hf_cfg = (Qwen2Config if qwen else LlamaConfig)(
        vocab_size=c["vocab_size"], hidden_size=c["hidden_size"],
        intermediate_size=c["intermediate_size"], num_hidden_layers=c["num_hidden_layers"],
        num_attention_heads=c["num_attention_heads"], num_key_value_heads=c["num_key_value_heads"],
        rms_norm_eps=c["rms_norm_eps"], tie_word_embeddings=c.get("tie_word_embeddings", False),
        rope_theta=cfg.rotary_base,
    )  # fmt: skip
    hf = (Qwen2ForCausalLM if qwen else LlamaForCausalLM)(hf_cfg)
    weights = {}
    for f in sorted(folder.glob("*.safetensors")):
        weights.update(load_file(f))
    hf.load_state_dict(weights, strict=False)
    hf.tie_weights()
    state = (wc.convert_qwen2_weights if qwen else wc.convert_llama_weights)(hf, cfg)
    tok = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(folder / "tokenizer.json"),
        **{k: tok[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token") if tok.get(k)},
    )
    # TransformerLens reloads the tokenizer by its path (to add a BOS): save it where it can
    saved = Path(tempfile.mkdtemp(prefix="mibref-tok-"))
    tokenizer.save_pretrained(saved)
    model = HookedTransformer(cfg, tokenizer=AutoTokenizer.from_pretrained(saved))
    model.load_and_process_state_dict(state, fold_ln=True, center_writing_weights=True,
                                      center_unembed=True, fold_value_biases=True)  # fmt: skip
    model.cfg.use_split_qkv_input = True
    model.cfg.use_attn_result = True
    model.cfg.use_hook_mlp_in = True
    model.cfg.ungroup_grouped_query_attention = True
    return model


def dataloader(path: Path, batch: int):
    from MIB_circuit_track.dataset import EAPDataset

    return EAPDataset(str(path), task="ioi").to_dataloader(batch_size=batch)


def attribute_once(model, args) -> dict:
    from eap.attribute import attribute
    from eap.graph import Graph
    from eap.utils import tokenize_plus
    from MIB_circuit_track.metrics import get_metric

    graph = Graph.from_model(model)
    data = dataloader(Path(args.pairs), args.batch)
    metric = partial(get_metric("logit_diff", "ioi", model.tokenizer, model), mean=True, loss=True)
    t0, c0 = time.perf_counter(), time.process_time()
    attribute(model, graph, data, metric, args.method, "patching", ig_steps=args.steps, quiet=True)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    tokens = [tokenize_plus(model, clean)[0].tolist() for clean, _, _ in data]
    return {"seconds": seconds, "cpu_seconds": cpu, "n_edges": len(graph.edges), "tokens": tokens,
            "scores": {name: float(e.score) for name, e in graph.edges.items()}}  # fmt: skip


def evaluate_file(model, args) -> dict:
    from eap.graph import Graph
    from MIB_circuit_track.evaluation import evaluate_area_under_curve
    from MIB_circuit_track.metrics import get_metric

    metric = partial(get_metric("logit_diff", "ioi", model.tokenizer, model), mean=False,
                     loss=False)  # fmt: skip
    out = {}
    for absolute, key in ((False, "cpr"), (True, "cmd")):
        graph = Graph.from_json(args.evaluate)
        t0 = time.perf_counter()
        counts, under, from_1, _, f = evaluate_area_under_curve(
            model, graph, dataloader(Path(args.pairs), args.batch), metric, quiet=True,
            absolute=absolute,
        )  # fmt: skip
        out[key] = {"area_under": under, "area_from_1": from_1, "faithfulness": f,
                    "edge_counts": counts, "seconds": time.perf_counter() - t0}  # fmt: skip
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ref", required=True, help="folder with the EAP-IG and MIB clones")
    p.add_argument("--folder", required=True, help="the model folder (config, safetensors)")
    p.add_argument("--pairs", required=True, help="CSV: clean, corrupted, correct_idx, ...")
    p.add_argument("--method", default="EAP-IG-inputs")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--evaluate", help="an importance file to score with MIB's CPR / CMD")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    ref = Path(args.ref)
    sys.path[:0] = [str(ref / "EAP-IG" / "src"), str(ref / "MIB-circuit-track")]
    torch.set_num_threads(args.threads)
    model = load(Path(args.folder), args.device)
    rss_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with CudaTo(args.device) if args.device == "cpu" else torch.device(args.device):
        result = evaluate_file(model, args) if args.evaluate else attribute_once(model, args)
    result["rss_after_load_mb"] = rss_load
    if args.device.startswith("cuda"):
        result["cuda_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    Path(args.out).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
