"""`circuits sinks`: primary and secondary attention sinks measured on texts or traces."""

from __future__ import annotations

import argparse

from attn_sink_circuits.cli import loading
from attn_sink_circuits.cli.checks import check_out, existing
from attn_sink_circuits.cli.options import count_int, model_options, out_option, positive_int
from attn_sink_circuits.cli.output import writing
from attn_sink_circuits.cli.parser import command


def run(args: argparse.Namespace) -> int:
    existing(args.texts, "--texts", "a traces or problems file (.jsonl) or a text file")
    out = check_out(args.out)  # before torch is imported, so a bad --out is refused at once
    from attn_sink_circuits.core.traces import read_corpus
    from attn_sink_circuits.report.sink_plots import plot_sink_report
    from attn_sink_circuits.runs.io import atomic_folder
    from attn_sink_circuits.sinks import Batching, Settings
    from attn_sink_circuits.sinks.corpus import measure_corpus

    given = {"tau": args.tau, "eps": args.eps}
    given = {k: v for k, v in given.items() if v is not None}
    Settings.from_options(given)  # thresholds checked before the model loads
    corpus = [args.text] if args.text is not None else read_corpus(args.texts)[: args.n]
    # Given a key, measure_corpus checks the texts and options before it loads the model.
    default = (args.device, args.dtype) == ("cpu", "float32")
    report = measure_corpus(
        args.model if default else loading.load(args), corpus,
        exclude_prompt=args.exclude_prompt, offsets=args.offset,
        sink_position=args.sink_position, batching=Batching(max_batch_tokens=args.batch_tokens),
        **given,
    )  # fmt: skip
    with (
        atomic_folder(out, {"measured": "sinks", "model": report.model}) as tmp,
        writing(2) as steps,
    ):
        paths = steps.run("tables", report.save, tmp)
        paths += steps.run("plots", plot_sink_report, report, tmp, args.rasters)
    print(report.summary_table())
    print(f"wrote {len(paths)} files to {out}")
    return 0


def add(sub) -> None:
    p = command(
        sub,
        "sinks",
        "measure primary and secondary attention sinks",
        "Per text: the attention mass on the primary sink (P0), the sink rate, the massive "
        "P0 state, and secondary-sink events (tokens whose state turns toward the sink's); "
        "tables, rasters and a summary.",
    )
    model_options(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="one text to measure")
    src.add_argument(
        "--texts", metavar="PATH", help="traces or problems (.jsonl) or a text file (one a line)"
    )
    out_option(p, "sinks.json, CSVs and PNGs")
    p.add_argument("--n", type=positive_int, help="measure only the first N texts of --texts")
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
    p.set_defaults(func=run)
