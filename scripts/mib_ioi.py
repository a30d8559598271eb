"""IOI under a named protocol (MIB's by default), one cell a command: discover on fit pairs,
judge on held-out pairs, save MIB's per-size curves and importance file.

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
Writes OUT/summary.json (the circuit's summary: MIB's CPR / CMD on fit and held-out pairs and f
and the pruned edge count at every MIB size under "mib"; with the protocol, partner, pair
counts, wall time and peak RSS), OUT/mib_curves.csv (one row per split, ranking and size),
OUT/curve.csv, OUT/circuit.json (the circuit graph), OUT/importances.mib.json (every edge's score
in MIB's format and sign: what MIB's run_evaluation.py --circuit-files reads) and, when
matplotlib is there, OUT/mib_curves.png (f against the share of edges, both rankings, both
splits).
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import pandas as pd

from attn_sink_circuits.discovery.areas import MIB_FRACTIONS
from attn_sink_circuits.discovery.methods import METHODS
from attn_sink_circuits.discovery.protocol import PROTOCOLS, protocol
from attn_sink_circuits.studies.ioi.prompts import PARTNERS


def curves_frame(mib: dict) -> pd.DataFrame:
    """MIB's per-size values of a circuit (`EdgeCircuit.mib`) as rows: split, ranking (signed:
    CPR's circuits, abs: CMD's), share of edges, edges kept after pruning, faithfulness."""
    rows = []
    for split, d in mib.items():
        for rank in ("signed", "abs"):
            for x, n, f in zip(MIB_FRACTIONS, d[f"n_edges_{rank}"], d[f"faithfulness_{rank}"],
                               strict=True):  # fmt: skip
                rows.append({"split": split, "rank": rank, "fraction": x, "n_edges": n, "f": f})
    return pd.DataFrame(rows)


def plot(frame: pd.DataFrame, title: str, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for (split, rank), part in frame.groupby(["split", "rank"]):
        ax.plot(part.fraction, part.f, marker="o", label=f"{split}, {rank} (CPR)" if
                rank == "signed" else f"{split}, |score| (CMD)")  # fmt: skip
    ax.set_xscale("log")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("share of edges (MIB sizes)")
    ax.set_ylabel("faithfulness f")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(args: argparse.Namespace) -> dict:
    import torch

    from attn_sink_circuits.discovery import circuit_graph, discover
    from attn_sink_circuits.discovery.protocol import write_mib
    from attn_sink_circuits.discovery.recorded import record_pairs
    from attn_sink_circuits.discovery.submission import IMPORTANCES
    from attn_sink_circuits.graph.eap_ig import shape_of
    from attn_sink_circuits.graph.io import write
    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.runs.io import atomic_folder, write_json
    from attn_sink_circuits.runs.provenance import provenance, stamped
    from attn_sink_circuits.studies.ioi.prompts import ioi_pairs

    torch.set_num_threads(args.threads)
    proto = protocol(args.protocol)
    config = proto.config(method=args.method).with_option_strings(args.option)
    partner = args.partner or proto.partner
    model = load_model(args.model, device=args.device)
    t0 = time.perf_counter()
    pairs, _ = ioi_pairs(model, args.n_fit + args.n_heldout, seed=args.pair_seed,
                         partner=partner, pad=proto.pad, bos=proto.bos)  # fmt: skip
    fit, held = pairs[: args.n_fit], pairs[args.n_fit :]
    circuit = discover(model, fit, held, None, positions=None, config=config, progress=True,
                       checkpoint=args.checkpoint)  # fmt: skip
    source = f"task ioi, partner {partner} (seed {args.pair_seed})"
    graph = circuit_graph(circuit, model, data=source, metric_spec={"metric": "pairs"})
    record_pairs(graph, "ioi", partner, proto)
    summary = {"protocol": proto.name, "model": args.model, "partner": partner,
               "n_tokens": int(pairs.shape[1]), **circuit.summary(),
               "seconds": time.perf_counter() - t0,
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}  # fmt: skip
    summary.pop("positions", None)
    frame = curves_frame(circuit.mib)
    record = provenance(model, pairs.rows(), split=(range(args.n_fit), range(args.n_fit, len(pairs))),
                        settings=config.to_dict(), source=source)  # fmt: skip
    with atomic_folder(Path(args.out), record=record) as tmp:
        write_json(tmp / "summary.json", stamped(summary, record))
        frame.to_csv(tmp / "mib_curves.csv", index=False)
        circuit.curve.to_csv(tmp / "curve.csv", index=False)
        write(graph, tmp / "circuit.json", lean=True)
        write_mib(circuit, shape_of(model), tmp / IMPORTANCES)
        plot(frame, f"{args.model} IOI {partner} {config.method}: CPR "
             f"{summary['cpr_heldout']:.2f}, CMD {summary['cmd_heldout']:.3f} (held-out)",
             tmp / "mib_curves.png")  # fmt: skip
    return summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--protocol", default="mib", choices=list(PROTOCOLS))
    p.add_argument("--method", default="eap_ig_inputs", choices=METHODS)
    p.add_argument("--partner", choices=list(PARTNERS), help="default: the protocol's")
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
