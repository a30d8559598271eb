"""The `circuits` command: parses arguments, checks them, calls one library function, writes files.

Adding a subcommand is two functions and one list entry (the helpers are in
`circuits.cli_options`):

    def _registry_keys() -> tuple[str, ...]:
    from circuits.models.registry import MODELS

    return tuple(MODELS)


def add_faithfulness(sub) -> None:               # its arguments
        p = sub.add_parser("faithfulness", help="...")
        model_options(p)                              # --model, --device, --dtype
        out_option(p, "folder for the tables")        # --out, checked before any work
        config_options(p, FaithfulnessConfig)         # one option per config field, with help
        p.set_defaults(func=_cmd_faithfulness)

    def _cmd_faithfulness(args) -> int:               # its work: library calls only
        config = config_from(args, FaithfulnessConfig)   # checked before the model loads
        model = load(args)
        ...
        return 0

    COMMANDS = [..., add_faithfulness]

Building the parser imports no model code (only the light config modules), so `circuits --help`
and every subcommand's `--help` answer at once. Errors from user input (a ValueError or OSError
from the library, whose message says what to fix) print as one line and exit with status 2;
Ctrl-C and SIGTERM print one line and exit with 130, and outputs are written to a temp folder
renamed into place at the end, so an interrupted run leaves no half-written folder.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from circuits.cli_claims import add_claims
from circuits.cli_emergence import add_emergence, add_train_lm
from circuits.cli_files import add_export, add_faithfulness, add_generate, add_models
from circuits.cli_options import (
    check_checkpoints,
    check_out,
    config_from,
    config_options,
    count_int,
    given_options,
    load,
    model_options,
    nonneg_float,
    out_option,
    positive_float,
    positive_int,
    print_summary,
)
from circuits.cli_pairs import add_discover
from circuits.tracing.p0.config import QUICK, P0Config, quick
from circuits.tracing.secondary.config import SecondaryConfig

# ---------------------------------------------------------------------------------------------
# Commands


def _write(trace, out: Path, model=None) -> None:
    from circuits.report import write_trace

    report = write_trace(trace, out, model)
    print_summary(trace.summary())
    print(f"report: {report}")


def _texts(path: str | None) -> list[str] | None:
    from circuits.discovery.texts import read_texts

    return None if path is None else read_texts(path)


def _kinded_texts(path: str | None) -> tuple[list[str] | None, list[str] | None]:
    from circuits.discovery.texts import read_kinded_texts

    return (None, None) if path is None else read_kinded_texts(path)


TEXTS_HELP = (
    "text file: one text a line, or JSONL with a 'text' field and optionally a 'kind' "
    "(default: data/texts/mix.jsonl, English prose, Python source, German prose and tables)"
)


def _cmd_p0(args: argparse.Namespace) -> int:
    out = check_out(args.out)
    steps = check_checkpoints(args.checkpoints or f"{out}.steps", args.resume)
    from circuits.discovery.distributed import writer_paths

    out, steps = writer_paths(out, steps)  # under torchrun only rank 0 writes
    config = config_from(args, P0Config)
    if args.quick:
        config = quick(config, keep=given_options(args, P0Config))
        print(f"quick run (a rough first result, not the documented one): {_quick_text(config)}")
    texts, kinds = _kinded_texts(args.texts)
    edge = config.edge
    from circuits.discovery.texts import DEFAULT_TEXTS

    # Checked against the default texts too, before the model loads.
    n_texts = len(texts if texts is not None else _texts(str(DEFAULT_TEXTS)))
    if n_texts < edge.n_fit + edge.n_heldout:
        raise ValueError(
            f"{args.texts or DEFAULT_TEXTS} holds {n_texts} texts; --edge-n-fit {edge.n_fit} + "
            f"--edge-n-heldout {edge.n_heldout} are needed (add texts or lower them)"
        )
    from circuits.tracing.p0 import trace_p0
    from circuits.tracing.p0.pipeline import STEPS
    from circuits.tracing.steps import remove_checkpoints

    model = load(args)
    args.kept = f"; finished steps are kept in {steps}: add --resume to continue"
    trace = trace_p0(model, texts, config, kinds=kinds, checkpoint=steps)
    if trace.resumed:
        print(
            f"resumed: {len(trace.resumed)} of {len(STEPS)} steps loaded from {steps} "
            f"({', '.join(trace.resumed)})"
        )
    if args.claims:
        from circuits.claims import claims
        from circuits.claims.attach import with_claims

        measured = claims(model, trace.texts)
        trace = with_claims(trace, measured.table, measured.run["jump_layers"])
    _write(trace, out, model)
    remove_checkpoints(steps)
    print(f"removed the step checkpoints {steps}")
    return 0


def _quick_text(config: P0Config) -> str:
    flat = config.to_flat()
    return ", ".join(f"{k.replace('_', '-')} {flat[k]}" for k in QUICK)


def add_p0(sub) -> None:
    p = sub.add_parser("p0", help="trace the P0-sink circuit and write a report")
    model_options(p)
    out_option(p, "report.html, summary.json, tables, graphs, plots")
    p.add_argument("--texts", metavar="PATH", help=TEXTS_HELP)
    p.add_argument(
        "--checkpoints",
        metavar="DIR",
        help="each finished step is saved here as it ends; the folder is removed once the "
        "report is written (OUT.steps)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="load the steps already in --checkpoints (same model, settings and texts), run the "
        "rest",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="a rough first result in about 2 minutes on 2 cores: "
        + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items())
        + " (options given explicitly win)",
    )
    p.add_argument(
        "--claims",
        action="store_true",
        help="add the P0 claims table (circuits claims, default settings) to the report",
    )
    config_options(p, P0Config)
    p.set_defaults(func=_cmd_p0)


def _cmd_sinks(args: argparse.Namespace) -> int:
    out = check_out(args.out)  # before torch is imported, so a bad --out is refused at once
    from circuits._io import atomic_folder
    from circuits.corpus import read_corpus
    from circuits.report.sink_plots import plot_sink_report
    from circuits.sinks import Batching, Settings
    from circuits.sinks.corpus import measure_corpus

    given = {"tau": args.tau, "eps": args.eps}
    given = {k: v for k, v in given.items() if v is not None}
    Settings.from_options(given)  # thresholds checked before the model loads
    corpus = [args.text] if args.text is not None else read_corpus(args.file)[: args.n]
    # Given a key, measure_corpus checks the texts and options before it loads the model.
    default = (args.device, args.dtype) == ("cpu", "float32")
    report = measure_corpus(
        args.model if default else load(args), corpus, exclude_prompt=args.exclude_prompt,
        offsets=args.offset, sink_position=args.sink_position,
        batching=Batching(max_batch_tokens=args.batch_tokens), **given,
    )  # fmt: skip
    with atomic_folder(out, {"measured": "sinks", "model": report.model}) as tmp:
        paths = report.save(tmp) + plot_sink_report(report, tmp, args.rasters)
    print(report.summary_table())
    print(f"wrote {len(paths)} files to {out}")
    return 0


def add_sinks(sub) -> None:
    p = sub.add_parser("sinks", help="measure primary and secondary attention sinks")
    model_options(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="one text to measure")
    src.add_argument("--file", help="traces or problems (.jsonl) or a text file (one a line)")
    out_option(p, "sinks.json, CSVs and PNGs")
    p.add_argument("--n", type=positive_int, help="measure only the first N texts of --file")
    p.add_argument("--tau", type=float, help="secondary-sink cosine threshold (0.95)")
    p.add_argument("--eps", type=float, help="Gu et al.'s alpha threshold (0.3)")
    p.add_argument("--offset", type=count_int, default=0, help="leading tokens to exclude (0)")
    p.add_argument(
        "--exclude-prompt", action="store_true", help="traces: measure only generated tokens"
    )
    p.add_argument("--sink-position", type=count_int, help="fix the primary sink position")
    p.add_argument(
        "--batch-tokens", type=positive_int, default=4096, help="padded tokens per forward (4096)"
    )
    p.add_argument("--rasters", type=count_int, default=2, help="texts to draw rasters for (2)")
    p.set_defaults(func=_cmd_sinks)


def _cmd_trigger(args: argparse.Namespace) -> int:
    out = check_out(args.out)
    if len(args.layers) != len(args.heads):
        raise ValueError(
            f"--layers has {len(args.layers)} values and --heads {len(args.heads)}: they pair up "
            "into model sizes, e.g. --layers 1 4 --heads 1 4 for 1x1 and 4x4"
        )
    if len(set(args.seeds)) != len(args.seeds):
        raise ValueError(f"--seeds {args.seeds} repeats a seed; give each seed once")
    runs = check_checkpoints(args.runs_dir or f"{out}.runs", args.resume, "--runs-dir")
    from circuits._io import atomic_folder
    from circuits.report.trigger_plots import plot_trigger_experiment
    from circuits.trigger import (
        ExperimentGrid,
        TrainConfig,
        TriggerModelConfig,
        TriggerTask,
        run_experiment,
        save_experiment,
    )
    from circuits.trigger.experiment import remove_runs

    def given(names: tuple[str, ...]) -> dict:
        return {n: getattr(args, n) for n in names if getattr(args, n) is not None}

    args.kept = f"; finished runs are kept in {runs}: add --resume to continue"
    task = TriggerTask(**given(("seq_len", "d_content", "n_triggers")))
    train = TrainConfig(**given(("steps", "lr", "weight_decay")))
    grid = ExperimentGrid(
        attentions=args.attention,
        sizes=list(zip(args.layers, args.heads, strict=True)),
        seeds=args.seeds,
        d_model=args.d_model,
        d_mlp=args.d_mlp,
        init_scale=TriggerModelConfig.init_scale if args.init_scale is None else args.init_scale,
    )
    exp = run_experiment(grid, task, train, runs_dir=runs, resume=args.resume)
    with atomic_folder(out, {"experiment": "trigger"}) as tmp:
        paths = save_experiment(exp, tmp) + plot_trigger_experiment(exp, tmp)
    print(exp.summary().to_string(index=False))
    print(f"wrote {len(paths)} files under {out}")
    remove_runs(runs)
    print(f"removed the saved runs {runs}")
    return 0


def add_trigger(sub) -> None:
    # Defaults of the task, training and model live in circuits.trigger (which loads torch):
    # options left out keep them, so --help stays instant.
    library = "default: the library's, see circuits.trigger"
    p = sub.add_parser(
        "trigger", help="train softmax/ReLU models on the trigger-conditional task, measure sinks"
    )
    p.add_argument(
        "--attention",
        nargs="+",
        choices=("softmax", "relu"),
        default=["softmax", "relu"],
        help="attention kinds to train (%(default)s)",
    )
    p.add_argument("--layers", nargs="+", type=positive_int, default=[1], help="layers per size")
    p.add_argument(
        "--heads", nargs="+", type=positive_int, default=[1], help="heads, paired with --layers"
    )
    out_option(p, "tables, plots, graphs, checkpoints")
    p.add_argument(
        "--seeds", nargs="+", type=count_int, default=[0, 1, 2], help="one run each (0 1 2)"
    )
    p.add_argument("--steps", type=positive_int, help=f"training steps ({library})")
    p.add_argument("--lr", type=positive_float, help=f"learning rate ({library})")
    p.add_argument("--weight-decay", type=nonneg_float, help=f"AdamW decay ({library})")
    p.add_argument("--seq-len", type=positive_int, help=f"tokens per sequence ({library})")
    p.add_argument("--d-content", type=positive_int, help=f"content dimensions ({library})")
    p.add_argument(
        "--triggers", dest="n_triggers", type=positive_int, help=f"triggers a sequence ({library})"
    )
    p.add_argument("--d-model", type=positive_int, default=32, help="model width (32)")
    p.add_argument("--d-mlp", type=positive_int, help="MLP width (default: attention-only)")
    p.add_argument("--init-scale", type=positive_float, help=f"init scale ({library})")
    p.add_argument("--runs-dir", help="each finished run is kept here until the end (OUT.runs)")
    p.add_argument(
        "--resume", action="store_true", help="read runs already in --runs-dir, train the rest"
    )
    p.set_defaults(func=_cmd_trigger)


def _cmd_secondary(args: argparse.Namespace) -> int:
    out = check_out(args.out)
    config = config_from(args, SecondaryConfig)
    from circuits.corpus import read_traces
    from circuits.tracing.secondary import plain_texts, project_traces, trace_secondary

    if args.traces:
        traces = read_traces(args.traces)[: args.n_texts]
    else:
        traces = project_traces(args.model, args.n_texts)
    model = load(args)
    trace = trace_secondary(model, plain_texts(traces) if args.plain else traces, config)
    from circuits.claims import ClaimsConfig, secondary_claims
    from circuits.claims.attach import with_claims

    _write(with_claims(trace, secondary_claims(trace.tables(), ClaimsConfig())), out)
    return 0


def add_secondary(sub) -> None:
    p = sub.add_parser("secondary", help="trace the MLPs that make secondary sinks; report")
    model_options(p)
    out_option(p, "report.html, summary.json, tables, graph, plots")
    p.add_argument("--traces", help="trace JSONL (default: data/traces/MODEL.jsonl)")
    p.add_argument("--n-texts", type=positive_int, help="use the first N traces (default: all)")
    p.add_argument(
        "--plain", action="store_true", help="problem + completion as plain text (no template)"
    )
    config_options(p, SecondaryConfig)
    p.set_defaults(func=_cmd_secondary)


COMMANDS = [
    add_models, add_export, add_generate, add_p0, add_faithfulness, add_sinks, add_trigger,
    add_secondary, add_claims, add_train_lm, add_emergence, add_discover,
]  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="circuits", description="Mechanistic circuit analysis of attention sinks."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


class Interrupted(BaseException):
    """SIGTERM, raised in the main thread so that temp outputs are cleaned up."""


def _terminate(signum, frame) -> None:
    raise Interrupted


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _terminate)
    where = f"; {args.out} was left as it was" if getattr(args, "out", None) else ""
    try:
        if hasattr(args, "threads"):  # commands that load a model
            from circuits.threads import set_threads

            set_threads(args.threads)
        return args.func(args)
    except (KeyboardInterrupt, Interrupted):
        # On a line of its own: a progress bar may be half-drawn. A command that keeps its
        # finished parts says where (`args.kept`).
        kept = getattr(args, "kept", "")
        print(f"\ncircuits {args.command}: interrupted{where}{kept}", file=sys.stderr)
        return 130
    except (ValueError, OSError, RuntimeError) as err:
        # Library errors say what was wrong and how to fix it (every line: a graph's validation
        # lists its reasons one a line); OSErrors name their file.
        message = str(err) or type(err).__name__
        print(f"circuits {args.command}: error: {message}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
