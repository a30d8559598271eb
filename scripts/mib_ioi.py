"""IOI under a named protocol (MIB's by default), one cell a command: discover on fit pairs,
judge on held-out pairs, save MIB's per-size curves and importance file. A shell over the
library's IOI study (`attn_sink_circuits.studies.ioi.run`, `IOIResult.save`), the same run as
`circuits discover --task ioi --protocol mib` with --checkpoint and MIB's flags spelled as here.

    .venv/bin/python scripts/mib_ioi.py --model smollm2-135m --method eap_ig_inputs \
        --partner s2_io_flip --n-fit 100 --n-heldout 200 --out runs/mib/smollm2-flip-eap_ig_inputs \
        [--protocol mib] [--threads 1] [--device cpu] [--option grad_batch=4 ...]
        [--checkpoint DIR]

MIB's 1,000 attribution pairs in bounded memory: `--n-fit 1000 --option fit_judged=100` (the
curve and the size rule on the first 100, every pair scored, 100 at a time).

Pairs: `attn_sink_circuits.studies.ioi.prompts` prompts with the protocol's partner (or --partner), padding and BOS;
the first --n-fit for fitting, the next --n-heldout for judging (one seeded draw, --pair-seed).
Settings: the protocol's `DiscoveryConfig` with --method and any --option KEY=VALUE on top
(settings such as the mask's weights and steps are chosen on fit pairs only: give them here).
Writes OUT/summary.json (the finding, then the circuit's summary: MIB's CPR / CMD on fit and
held-out pairs and f and the pruned edge count at every MIB size under "mib"; with the protocol,
partner, pair counts, wall time and peak RSS), OUT/mib_curves.csv (one row per split, ranking and
size), OUT/curve.csv, OUT/edges.csv, OUT/circuit.json (the circuit graph), circuit.eap-ig.json,
OUT/importances.mib.json (every edge's score in MIB's format and sign: what MIB's
run_evaluation.py --circuit-files reads), OUT/mib_curves.png (f against the share of edges, both
rankings, both splits) and OUT/faithfulness.png.
"""

from __future__ import annotations

import argparse

from attn_sink_circuits.discovery.methods import METHODS
from attn_sink_circuits.discovery.protocol import PROTOCOLS
from attn_sink_circuits.studies.ioi import PARTNER_NAMES


def settings(args: argparse.Namespace):
    """The run's `IOIConfig` from the flags (a bad --option is a ValueError naming it)."""
    from attn_sink_circuits.studies.ioi import IOIConfig

    return IOIConfig.under(
        args.protocol, method=args.method, partner=args.partner or "", n_fit=args.n_fit,
        n_heldout=args.n_heldout, pair_seed=args.pair_seed,
    ).with_option_strings(args.option)  # fmt: skip


def run(args: argparse.Namespace) -> dict:
    """`attn_sink_circuits.studies.ioi.run` on generated IOI pairs, its folder written to --out;
    returns its summary."""
    import torch

    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.studies import ioi

    torch.set_num_threads(args.threads)
    config = settings(args)
    model = load_model(args.model, device=args.device)
    result = ioi.run(model, None, config, progress=True, checkpoint=args.checkpoint)
    result.save(args.out)
    return result.summary()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--protocol", default="mib", choices=list(PROTOCOLS))
    p.add_argument("--method", default="eap_ig_inputs", choices=METHODS)
    p.add_argument("--partner", choices=PARTNER_NAMES, help="default: the protocol's")
    p.add_argument("--n-fit", type=int, default=100)
    p.add_argument("--n-heldout", type=int, default=200)
    p.add_argument("--pair-seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--option", nargs="*", default=[], help="DiscoveryConfig KEY=VALUE")
    p.add_argument("--out", required=True)
    p.add_argument("--checkpoint", help="folder: the fit pairs' scores (each chunk's with "
                   "--option fit_judged=N), a mask sweep and each phase that ended are saved "
                   "there and read back on a rerun (phases only by the same code)")  # fmt: skip
    args = p.parse_args()
    try:  # a bad option or count fails here, before a model loads
        settings(args)
    except ValueError as err:
        p.error(str(err))
    s = run(args)
    print(f"{args.model} {s['partner']} {s['method']}: {s['n_edges']} of {s['n_edges_total']} "
          f"edges, fit f {s['fit_faithfulness']:.3f}, held-out f {s['heldout_faithfulness']:.3f} "
          f"{[round(x, 3) for x in s['heldout_faithfulness_ci']]}, random "
          f"{s['random_faithfulness_mean']:.3f}; CPR {s['cpr_heldout']:.3f} "
          f"{[round(x, 3) for x in s['cpr_heldout_ci']]} / CMD {s['cmd_heldout']:.4f} "
          f"{[round(x, 4) for x in s['cmd_heldout_ci']]} held-out ({s['cpr_fit']:.3f} / "
          f"{s['cmd_fit']:.4f} fit); "
          f"{s['seconds']:.0f} s, peak RSS {s['peak_rss_mb']:.0f} MB -> {args.out}")  # fmt: skip


if __name__ == "__main__":
    main()
