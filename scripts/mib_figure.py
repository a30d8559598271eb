"""MIB's per-size curves of several IOI runs (`scripts/mib_ioi.py` folders) in one figure: on
held-out pairs, f against the share of edges with edges ranked by signed score (CPR's circuits)
and abs(1 - f) with edges ranked by abs(score) (CMD's), one line a run.

    .venv/bin/python scripts/mib_figure.py docs/mib/runs/* --out docs/mib/curves.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from attn_sink_circuits.discovery.protocol import read_run, variant_name


def label(s: dict) -> str:
    """A run's legend entry from its summary."""
    return (f"{s['model']} {s['partner']} {variant_name(s)} ({s['n_fit_texts']} fit): CPR "
            f"{s['cpr_heldout']:.2f}, CMD {s['cmd_heldout']:.3f}")  # fmt: skip


METHOD_COLOURS = {"eap": "C0", "eap_ig": "C1", "eap_ig_inputs": "C2", "eap_ig_activations": "C3",
                  "mask": "C4"}  # fmt: skip
"""One colour a method; a line style a model (solid, dashed, dotted in the order given), a
marker a partner (circle flip, square ABC, triangle any other), hollow for a run with a setting
that is not its protocol's (`variant_name`); more fit pairs than MIB's 100: a thicker, paler
line."""


def style(summary: dict, models: tuple[str, ...] = ("qwen2.5-0.5b", "smollm2-135m")) -> dict:
    """matplotlib line settings for a run's curves (`METHOD_COLOURS`)."""
    lines = {m: ("-", "--", ":")[i % 3] for i, m in enumerate(models)}
    markers = {"s2_io_flip": "o", "abc": "s"}
    more = summary["n_fit_texts"] > 100
    return {"color": METHOD_COLOURS.get(summary["method"], "k"),
            "ls": lines.get(summary["model"], "-."), "marker": markers.get(summary["partner"], "^"),
            "ms": 3, "lw": 2.5 if more else 1.2, "alpha": 0.5 if more else 1.0,
            **({"mfc": "none", "ms": 5} if variant_name(summary) != summary["method"] else {})}  # fmt: skip


def figure(runs: list[Path], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (signed, absolute) = plt.subplots(1, 2, figsize=(11, 4.2))
    for run in runs:
        frame = pd.read_csv(run / "mib_curves.csv")
        held = frame[frame.split == "heldout"]
        s, a = held[held["rank"] == "signed"], held[held["rank"] == "abs"]
        summary = read_run(run)
        look = style(summary)
        signed.plot(s.fraction, s.f, label=label(summary), **look)
        absolute.plot(a.fraction, (1 - a.f).abs(), **look)
    for ax, title in ((signed, "f, edges by signed score (area: CPR)"),
                      (absolute, "abs(1 - f), edges by abs(score) (area: CMD)")):  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel("share of edges (MIB's sizes)")
        ax.set_title(f"held-out pairs: {title}", fontsize=9)
    signed.axhline(1.0, color="grey", lw=0.8)
    fig.legend(*signed.get_legend_handles_labels(), loc="lower center", fontsize=7, ncol=2)
    fig.tight_layout(rect=(0, 0.045 * ((len(runs) + 1) // 2) + 0.02, 1, 1))
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path, help="mib_ioi.py run folders")
    p.add_argument("--out", type=Path, required=True, help="the PNG to write")
    args = p.parse_args()
    missing = [str(r) for r in args.runs if not (r / "mib_curves.csv").is_file()]
    if missing:
        p.error(f"not mib_ioi.py run folders (no mib_curves.csv): {', '.join(missing)}")
    figure(args.runs, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
