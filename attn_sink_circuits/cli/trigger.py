"""`circuits trigger`: softmax and ReLU models trained on the trigger-conditional task (Ran-Milo),
their sinks measured; resumable from the runs kept as they finish."""

from __future__ import annotations

import argparse

from attn_sink_circuits.cli.checks import check_checkpoints, check_out
from attn_sink_circuits.cli.options import (
    count_int,
    nonneg_float,
    out_option,
    positive_float,
    positive_int,
)
from attn_sink_circuits.cli.output import writing
from attn_sink_circuits.cli.parser import command


def _check(args: argparse.Namespace) -> None:
    if len(args.layers) != len(args.heads):
        raise ValueError(
            f"--layers has {len(args.layers)} values and --heads {len(args.heads)}: they pair up "
            "into model sizes, e.g. --layers 1 4 --heads 1 4 for 1x1 and 4x4"
        )
    if len(set(args.seeds)) != len(args.seeds):
        raise ValueError(f"--seeds {args.seeds} repeats a seed; give each seed once")


def _settings(args: argparse.Namespace):
    """(grid, task, training) of the arguments; what was left out keeps the library's
    defaults."""
    from attn_sink_circuits.studies import trigger

    def given(names: tuple[str, ...]) -> dict:
        return {n: getattr(args, n) for n in names if getattr(args, n) is not None}

    task = trigger.TriggerTask(**given(("seq_len", "d_content", "n_triggers")))
    train = trigger.TriggerTrainConfig(**given(("steps", "lr", "weight_decay")))
    init_scale = (
        trigger.TriggerModelConfig.init_scale if args.init_scale is None else args.init_scale
    )
    grid = trigger.ExperimentGrid(
        attentions=args.attention,
        sizes=list(zip(args.layers, args.heads, strict=True)),
        seeds=args.seeds,
        d_model=args.d_model,
        d_mlp=args.d_mlp,
        init_scale=init_scale,
    )
    return grid, task, train


def run(args: argparse.Namespace) -> int:
    out = check_out(args.out)
    _check(args)
    runs = check_checkpoints(args.runs_dir, f"{out}.runs", args.resume, "--runs-dir")
    from attn_sink_circuits.studies import trigger

    args.kept = f"; finished runs are kept in {runs}: add --resume to continue"
    grid, task, train = _settings(args)
    result = trigger.run(grid, task, train, runs_dir=runs, resume=args.resume)
    with writing(1) as steps:
        steps.run("tables, graphs, checkpoints, plots", result.save, out)
    print(result.experiment.summary().to_string(index=False))
    print(f"wrote {sum(p.is_file() for p in out.rglob('*'))} files under {out}")
    print(f"removed the saved runs {runs}")
    return 0


def _model_options(p: argparse.ArgumentParser) -> None:
    # Defaults of the task, training and model live in attn_sink_circuits.studies.trigger (which loads torch):
    # options left out keep them, so --help stays instant.
    library = "default: the library's, see attn_sink_circuits.studies.trigger"
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


def add(sub) -> None:
    p = command(
        sub,
        "trigger",
        "train softmax/ReLU models on the trigger-conditional task, measure sinks",
        "Small models of each attention kind, size and seed, trained on the CPU; softmax must "
        "form a sink to output nothing, ReLU need not. Tables, plots, graphs, checkpoints.",
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
    _model_options(p)
    p.add_argument("--runs-dir", help="each finished run is kept here until the end (OUT.runs)")
    p.add_argument(
        "--resume", action="store_true", help="read runs already in --runs-dir, train the rest"
    )
    p.set_defaults(func=run)
