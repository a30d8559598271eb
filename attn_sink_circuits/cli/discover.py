"""`circuits discover`: the edge circuit of any behaviour given as counterfactual text pairs (a
JSONL file with clean, corrupt, answer, wrong; or a standard task such as IOI), fitted on some
pairs and judged on the others: `attn_sink_circuits.studies.ioi.run`, its folder written by
`IOIResult.save`. Its settings are spelled as `p0`'s and `secondary`'s edge
circuit's (`--edge-n-fit`, `--edge-method`, ...), on top of a named protocol (`--protocol`,
`attn_sink_circuits.discovery.protocol`: the library's defaults, or MIB's): a flag given explicitly wins
over the protocol, the rest take the protocol's values."""

from __future__ import annotations

import argparse

from attn_sink_circuits.cli import loading
from attn_sink_circuits.cli.checks import check_out, existing
from attn_sink_circuits.cli.options import (
    config_options,
    count_int,
    model_options,
    out_option,
    positive_int,
    protocol_option,
)
from attn_sink_circuits.cli.output import print_summary
from attn_sink_circuits.cli.pairs import PAIRS_HELP, pair_options, read_pair_rows
from attn_sink_circuits.cli.parser import command
from attn_sink_circuits.config import flat_fields
from attn_sink_circuits.discovery.config import DiscoveryConfig
from attn_sink_circuits.discovery.protocol import PROTOCOLS, protocol
from attn_sink_circuits.runs.io import stored
from attn_sink_circuits.studies.ioi.config import IOIConfig

PREFIX = "edge_"
"""The prefix of the discovery settings, as in p0's and secondary's `--edge-` options."""
DEFAULTS = protocol("library").config()
"""The settings --help shows: the library's protocol (pairs are ablated from the partner text)."""
COUNTS = ("n_fit", "n_heldout")
"""Pair counts a protocol sets beside its DiscoveryConfig (`--edge-n-fit`, `--edge-n-heldout`)."""


def given(args: argparse.Namespace) -> dict:
    """The settings the user gave explicitly (flat DiscoveryConfig names, and the pair counts
    and --partner): the parser leaves the others None, for the protocol to fill."""
    names = [name for name, _, _ in flat_fields(DiscoveryConfig)] + list(COUNTS)
    out = {n: getattr(args, PREFIX + n) for n in names if getattr(args, PREFIX + n) is not None}
    if getattr(args, "partner", None) is not None:
        out["partner"] = args.partner
    return {k: tuple(v) if isinstance(v, list) else v for k, v in out.items()}


def settings(args: argparse.Namespace) -> IOIConfig:
    """The run's `IOIConfig`: the protocol's settings with the flags given on top (the pair
    counts, --partner, --pair-seed); --edge-n-fit / --edge-n-heldout resolved in `args` (the
    protocol's counts unless given). Checked: a bad value is a ValueError naming it."""
    proto = protocol(args.protocol)
    overrides = given(args)
    if overrides.get("ablation", "resample") != "resample":
        raise ValueError(
            f"--edge-ablation {overrides['ablation']}: pairs are ablated from the partner text; "
            "use --edge-ablation resample (the default here)"
        )
    args.edge_n_fit = overrides.get("n_fit", proto.n_fit)
    args.edge_n_heldout = overrides.get("n_heldout", proto.n_heldout)
    if args.edge_n_heldout < 1:
        raise ValueError("--edge-n-heldout must be >= 1: the circuit is judged on held-out pairs")
    return IOIConfig.under(proto.name, **overrides, pair_seed=args.pair_seed)


def run(args: argparse.Namespace) -> int:
    existing(args.pairs, "--pairs", f"a {PAIRS_HELP}")
    out = check_out(args.out)
    config = settings(args)
    read_pair_rows(args, args.edge_n_fit + args.edge_n_heldout)  # checked before the model loads
    from attn_sink_circuits.studies import ioi

    model = loading.load(args)
    result = ioi.run(model, args.pairs, config, progress=True)
    result.save(out, progress=True)
    print_summary(result.summary())
    print(
        f"wrote {out} ({stored(out / 'circuit.json').name}; circuit.eap-ig.json, the circuit for "
        "EAP-IG / MIB; importances.mib.json, every edge's score: MIB's importance file)"
    )
    return 0


def add(sub) -> None:
    p = command(
        sub,
        "discover",
        "edge circuit of your own behaviour, given as counterfactual text pairs (or --task ioi)",
        "Find the edge circuit of logit(answer) - logit(wrong) at the last position on clean / "
        "corrupted text pairs (each ablated edge takes its value in the partner text, at every "
        "position), fitted on --edge-n-fit pairs and judged on --edge-n-heldout others. "
        "--protocol mib runs MIB's circuit-track protocol (docs/mib/README.md): its settings "
        "replace the defaults shown below, and any flag given explicitly wins over them.",
    )
    pair_options(p.add_mutually_exclusive_group(required=True), p, n_pairs=False)
    protocol_option(p)
    for count, kind in zip(COUNTS, ("fit", "held-out"), strict=True):
        per = ", ".join(f"{name} {getattr(proto, count)}" for name, proto in PROTOCOLS.items())
        p.add_argument(
            "--edge-" + count.replace("_", "-"),
            dest=PREFIX + count,
            type=positive_int if count == "n_fit" else count_int,
            help=f"{kind} pairs (default: the protocol's: {per})",
        )
    model_options(p)
    out_option(
        p, "summary.json, curve.csv, edges.csv, mib_curves.csv, circuit.json, "
        "circuit.eap-ig.json, importances.mib.json, mib_curves.png, faithfulness.png (edges.csv "
        "and circuit.json gzip'd, NAME.gz, when large)",
    )  # fmt: skip
    config_options(p, DiscoveryConfig, prefix=PREFIX, defaults=DEFAULTS)
    # Unset settings stay None, for the protocol to fill (--help shows the library's defaults).
    p.set_defaults(func=run, **{PREFIX + n: None for n, _, _ in flat_fields(DiscoveryConfig)})
