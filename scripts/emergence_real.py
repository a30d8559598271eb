"""Issue 37: the phase rule on the installed released models (final weights only, one row each):
writes docs/emergence/real-models/ (rows.json, table.md; replaced as a whole) and prints the
table.

    OMP_NUM_THREADS=1 python scripts/emergence_real.py smollm2-135m qwen2.5-0.5b gemma-3-270m
"""

from __future__ import annotations

import sys

import torch

from attn_sink_circuits.runs.io import atomic_folder, write_json
from attn_sink_circuits.studies.emergence.run_phases import measure_final

OUT = "docs/emergence/real-models"


def table(rows: list[dict]) -> str:
    lines = [
        "| model | layers | <bos> first | Gu Sink^0.3 [95 %] | position-1 rate | sink heads "
        "per layer | P0 norm ratio max (block) | jump block | onset layer | phase |",
        "|" + "---|" * 10,
    ]
    for r in rows:
        x = r["row"]
        g, p = x["gu_rate"], x["gu_rate_p1"]
        ratio = x["p0_norm_ratio"]
        peak = max(range(len(ratio)), key=ratio.__getitem__)
        lines.append(
            f"| {r['model']} | {r['n_layers']} | {'yes' if r['bos_first'] else 'no'} | "
            f"{g[0]:.3f} [{g[1]:.3f}, {g[2]:.3f}] | {p[0]:.3f} | "
            f"{' '.join(map(str, x['sink_heads_by_layer']))} | {ratio[peak]:.1f} (after "
            f"block {peak - 1}) | {x['jump_block']} | {x['onset_layer']} | {r['phase']} |"
        )
    return "\n".join(lines)


def main(keys: list[str]) -> int:
    torch.set_num_threads(1)
    rows = [measure_final(k) for k in keys]
    with atomic_folder(OUT) as tmp:
        write_json(tmp / "rows.json", {"models": rows})
        (tmp / "table.md").write_text(table(rows) + "\n", encoding="utf-8")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
