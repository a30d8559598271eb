"""The main paths on CUDA against the CPU: each figure on the CPU (float32), on CUDA (float32)
and on CUDA (bfloat16), the largest difference from the CPU value, and the speed-up (CPU seconds
over CUDA seconds; model loading excluded). Minutes long on one GPU; SmolLM2 by default.

Paths (texts: the first `--n` paragraphs of data/texts/python_reference.jsonl):
- sinks: `measure` (P0 mass per layer, sink rate, sink scores) and the chunked long-text
  path on one 4,096-token text;
- patching sweep: exact patching of every head at positions 0-7 of one text (mean ablation
  over positions), metric: P0 attention of the last third of the layers;
- EAP-IG and faithfulness: the saved P0 edge circuit `docs/p0/<model>/circuit.graphml`, its
  EAP-IG scores (mean over texts) and its faithfulness on the texts (`judge_saved`);
- p0: `circuits p0 --quick` end to end, its summary's held-out faithfulness.

Without CUDA it stops at once (exit 2) and says so; `--cpu-dry-run` checks the script itself
on a CPU machine (CPU float32 against CPU bfloat16, no p0).

    python scripts/gpu_check.py [--model smollm2-135m] [--n 16] [--skip-p0] [--cpu-dry-run]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
TEXTS = ROOT / "data" / "texts" / "python_reference.jsonl"
SETUPS = (("cpu", "float32"), ("cuda", "float32"), ("cuda", "bfloat16"))


def timed(fn):
    """(fn(), seconds), waiting for CUDA work to finish."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def run_setup(key: str, device: str, dtype: str, texts: list[str]) -> dict:
    """Every figure of one (device, dtype): name -> (value tensor, seconds)."""
    from attn_sink_circuits.core.tokens import token_rows
    from attn_sink_circuits.discovery.attribution import eap_ig
    from attn_sink_circuits.discovery.forward import EdgeRunner
    from attn_sink_circuits.discovery.saved import judge_saved
    from attn_sink_circuits.graph import io as graph_io
    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.patching import Value, head_grid, p0_attention, sweep
    from attn_sink_circuits.patching.metrics import build_metric
    from attn_sink_circuits.sinks.runner import Batching, measure, measure_tokens

    model = load_model(key, device=device, dtype=getattr(torch, dtype))
    n_layers = model.cfg.n_layers
    out = {}
    report, s = timed(lambda: measure(model, texts, progress=False))
    out["sinks: P0 mass per layer"] = (report.p0_mass.mean(-1), s)
    out["sinks: sink rate"] = (torch.tensor([report.sink_rate]), s)
    ids = torch.cat([model.to_tokens(t, prepend_bos=False)[0] for t in texts])
    long_ids = ids.repeat(4096 // len(ids) + 1)[:4096]
    long, s = timed(
        lambda: measure_tokens(model, [long_ids], batching=Batching(chunked=True), progress=False)
    )
    out["sinks, 4,096 tokens chunked: P0 mass per layer"] = (long.p0_mass.mean(-1), s)
    tokens = model.to_tokens(texts[0])[:, :32]
    late = list(range(2 * n_layers // 3, n_layers))
    grid = head_grid(
        model, tokens, Value.mean(tokens, over_positions=True), positions=list(range(8))
    )
    swept, s = timed(lambda: sweep(model, tokens, grid, p0_attention(late), progress=False))
    out["patching sweep: heads x positions 0-7"] = (swept.values.flatten().float().cpu(), s)
    graph = graph_io.read(ROOT / "docs" / "p0" / key / "circuit.graphml")
    first = int(graph.graph["first_token"])
    rows = token_rows(model, texts, int(graph.graph["n_tokens"]), None if first < 0 else first)
    metric = build_metric(json.loads(graph.graph["metric_spec"]))
    runner = EdgeRunner(model, rows, metric, positions=json.loads(graph.graph["positions"]))
    scores, s = timed(lambda: eap_ig(runner, 4).mean(0))
    out["EAP-IG scores (4 steps, mean over texts)"] = (scores.cpu(), s)
    judged, s = timed(lambda: judge_saved(model, graph, texts, n_random=3, n_boot=100))
    out["P0 edge circuit: faithfulness"] = (torch.tensor([judged["faithfulness"]]), s)
    return out


def run_p0(key: str, device: str, dtype: str) -> tuple[torch.Tensor, float]:
    """`circuits p0 --quick` end to end: its held-out faithfulness and wall seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "attn_sink_circuits.cli", "p0", "--model", key, "--quick"]
        cmd += ["--device", device, "--dtype", dtype, "--out", f"{tmp}/p0"]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, cwd=ROOT)
        seconds = time.perf_counter() - t0
        summary = json.loads(Path(f"{tmp}/p0/summary.json").read_text())
    return torch.tensor([float(summary["summary"]["heldout_faithfulness"])]), seconds


def table(results: dict[tuple[str, str], dict]) -> str:
    reference = next(iter(results))
    cpu = results[reference]
    heads = [f"{d} {t}" for d, t in results]
    lines = ["| figure | " + " | ".join(heads) + " | max abs diff vs CPU | speed-up |"]
    lines.append("|---|" + "---|" * (len(heads) + 2))
    for name, (ref, ref_s) in cpu.items():
        cells, diffs, speed = [], [], []
        for setup, figures in results.items():
            value, s = figures[name]
            cells.append(f"{_show(value)} ({s:.1f} s)")
            if setup != reference:
                ok = ref.isfinite() & value.isfinite()
                diffs.append(f"{(ref[ok] - value[ok]).abs().max():.1e}")
                speed.append(f"{ref_s / s:.1f}x")
        lines.append(
            f"| {name} | " + " | ".join(cells) + f" | {' / '.join(diffs)} | {' / '.join(speed)} |"
        )
    return "\n".join(lines)


def _show(value: torch.Tensor) -> str:
    return f"{float(value[0]):.4f}" if value.numel() == 1 else f"mean {float(value.mean()):.4f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--n", type=int, default=16, help="texts")
    parser.add_argument("--skip-p0", action="store_true", help="leave out circuits p0 --quick")
    parser.add_argument("--cpu-dry-run", action="store_true", help="check the script on a CPU")
    args = parser.parse_args()
    setups = (("cpu", "float32"), ("cpu", "bfloat16")) if args.cpu_dry_run else SETUPS
    if not torch.cuda.is_available() and not args.cpu_dry_run:
        print(
            "gpu_check: no CUDA device (torch.cuda.is_available() is False; torch "
            f"{torch.__version__}); run it on a machine with an NVIDIA GPU and a CUDA build "
            "of torch",
            file=sys.stderr,
        )
        return 2
    torch.manual_seed(0)
    lines = TEXTS.read_text().splitlines()[: args.n]
    texts = [json.loads(line)["text"] for line in lines]
    where = "CPU (dry run)" if args.cpu_dry_run else torch.cuda.get_device_name(0)
    print(f"{args.model} on {where}; {len(texts)} texts", flush=True)
    results = {}
    for device, dtype in setups:
        results[(device, dtype)] = run_setup(args.model, device, dtype, texts)
        if not (args.skip_p0 or args.cpu_dry_run):
            results[(device, dtype)]["p0 --quick: held-out faithfulness"] = run_p0(
                args.model, device, dtype
            )
        print(f"done: {device} {dtype}", flush=True)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
