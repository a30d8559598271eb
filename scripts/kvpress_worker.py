"""The kvpress side of `scripts/kv_kvpress.py`: NVIDIA's kvpress presses, in their own
environment (transformers < 5.3), on the same model folder and the same token ids. Imports
nothing from `circuits`; `scripts/kv_kvpress.py` calls it with that environment's python:

    /tmp/kvpenv/bin/python scripts/kvpress_worker.py --folder MODEL_FOLDER --job job.json \
        --out result.json [--threads 1]

job.json: {"texts": {name: [token ids]}, "prompt": P, "runs": [{"press": "none" |
"streaming_llm" | "snapkv", "budget": B}], "n_sink": 4, "window_size": 32, "kernel_size": 7}.

Per text and run: the model (transformers, eager attention, float32, CPU) prefills the first P
tokens under the press, as kvpress's pipeline does (the press's forward hooks compress each
layer's cache after that layer's prefill attention, so the prefill itself reads the full cache);
the prompt's last logit predicts token P. Then the rest of the text but its last token is fed
with the compressed cache at positions P.. (position ids given, as kvpress's pipeline gives
them: kept keys keep their rotary positions), and its logits predict tokens P+1 .. N-1. Out:
the NLL of tokens P .. N-1, the positions each layer's cache kept per kv head (what the press's
`topk` chose; for "none" nothing), the compression ratio given, wall and CPU seconds of prefill
and continuation, and the environment's package versions.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from importlib import metadata
from pathlib import Path

PACKAGES = ("torch", "transformers", "kvpress", "numpy", "accelerate", "safetensors", "tokenizers")


def compression_ratio(budget: int, prompt: int) -> float:
    """The ratio that makes kvpress keep exactly `budget` of `prompt` keys: 1 - budget / prompt,
    or the nearest float below it where kvpress's `int(prompt * (1 - ratio))` truncates
    (1 - 64 / 1536 gives 63.99999999999994, so 63 kept)."""
    if not 0 < budget < prompt:
        raise ValueError(f"budget {budget} must be in 1 .. {prompt - 1} (the prompt's length)")
    ratio = 1 - budget / prompt
    for _ in range(64):
        if int(prompt * (1 - ratio)) == budget:
            return ratio
        ratio = math.nextafter(ratio, 0.0)
    raise ValueError(f"no ratio keeps exactly {budget} of {prompt}")


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def make_press(kind: str, budget: int, prompt: int, job: dict):
    """The press of a run, recording each layer's scores (the kept positions are their top
    `budget`, as `ScorerPress.compress` takes them)."""
    from kvpress import SnapKVPress, StreamingLLMPress

    base = {"streaming_llm": StreamingLLMPress, "snapkv": SnapKVPress}[kind]
    kwargs = {"compression_ratio": compression_ratio(budget, prompt)}
    if kind == "streaming_llm":
        kwargs["n_sink"] = job["n_sink"]
    else:
        kwargs["window_size"] = job["window_size"]
        kwargs["kernel_size"] = job["kernel_size"]

    class Recording(base):  # type: ignore[misc, valid-type]
        def score(self, module, *args, **kw):
            scores = super().score(module, *args, **kw)
            self.recorded[module.layer_idx] = scores.detach().clone()
            return scores

    press = Recording(**kwargs)
    press.recorded = {}
    return press


def run_one(model, ids, prompt: int, run: dict, job: dict) -> dict:
    import torch
    from kvpress.utils import compute_n_kept
    from transformers import DynamicCache

    n = len(ids)
    tokens = torch.tensor(ids, dtype=torch.long)[None]
    press = None if run["press"] == "none" else make_press(run["press"], run["budget"], prompt, job)
    cache = DynamicCache()
    w0, c0 = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        if press is None:
            out = model(input_ids=tokens[:, :prompt], past_key_values=cache, logits_to_keep=1)
        else:
            with press(model):
                out = model(input_ids=tokens[:, :prompt], past_key_values=cache, logits_to_keep=1)
        last = out.logits[0, -1].float()
        w1, c1 = time.perf_counter(), time.process_time()
        lengths = sorted({cache.get_seq_length(i) for i in range(len(cache))})
        positions = torch.arange(prompt, n - 1)[None]
        rest = model(input_ids=tokens[:, prompt : n - 1], past_key_values=cache,
                     position_ids=positions).logits[0].float()  # fmt: skip
        w2, c2 = time.perf_counter(), time.process_time()
    logits = torch.cat([last[None], rest])
    nll = torch.nn.functional.cross_entropy(logits, tokens[0, prompt:], reduction="none")
    kept = None
    if press is not None:
        k = compute_n_kept(prompt, press.compression_ratio)
        kept = [press.recorded[layer][0].topk(k, dim=-1).indices.sort(-1).values.tolist()
                for layer in sorted(press.recorded)]  # fmt: skip
    return {
        **run,
        "compression_ratio": None if press is None else press.compression_ratio,
        "cache_lengths": lengths,
        "nll": nll.tolist(),
        "kept": kept,
        "prefill_seconds": w1 - w0,
        "prefill_cpu_seconds": c1 - c0,
        "continuation_seconds": w2 - w1,
        "seconds": w2 - w0,
        "cpu_seconds": c2 - c0,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--folder", type=Path, required=True, help="Hugging Face model folder")
    p.add_argument("--job", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()

    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    job = json.loads(args.job.read_text())
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(
        args.folder, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    load_seconds = time.perf_counter() - t0
    results = []
    for name, ids in job["texts"].items():
        for run in job["runs"]:
            r = {"text": name, **run_one(model, ids, job["prompt"], run, job)}
            results.append(r)
            ppl = math.exp(sum(r["nll"]) / len(r["nll"]))
            print(f"kvpress text {name} {run['press']} budget {run['budget']}: perplexity "
                  f"{ppl:.4f}, cache {r['cache_lengths']}, {r['seconds']:.1f} s", flush=True)  # fmt: skip
    out = {
        "versions": versions(),
        "model_class": type(model).__name__,
        "attn_implementation": model.config._attn_implementation,
        "dtype": str(next(model.parameters()).dtype),
        "threads": torch.get_num_threads(),
        "load_seconds": load_seconds,
        "results": results,
    }
    args.out.write_text(json.dumps(out))


if __name__ == "__main__":
    main()
