"""Judge a saved `circuits claims` run again with this code's rules, without the model: the P0
rows from the measurement tables the run wrote (per-text numbers: heads.csv, jump_shares.csv,
directions.csv, cone.csv, score_split.csv, writers.csv, p0_norm.csv when kept) and its
summary.json; the secondary rows from the secondary trace's folder (and the controls the run
measured, when it saved them). Nothing is measured again, so a verdict changes only where a
rule changed (four states, n, the by-construction premise).

    python -m attn_sink_circuits.studies.claims.judge_saved docs/claims/M [--secondary docs/secondary/M] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from attn_sink_circuits.runs.io import stored
from attn_sink_circuits.runs.provenance import provenance
from attn_sink_circuits.runs.record_paths import portable_path
from attn_sink_circuits.studies.claims.config import ClaimsConfig
from attn_sink_circuits.studies.claims.inputs import Basis
from attn_sink_circuits.studies.claims.pipeline import Claims, judge_p0, write_claims
from attn_sink_circuits.studies.claims.secondary import secondary_claims
from attn_sink_circuits.studies.claims.secondary_tables import read_secondary
from attn_sink_circuits.studies.claims.table import ClaimsTable
from attn_sink_circuits.studies.p0.formation import Formation
from attn_sink_circuits.studies.result import read_summary

P0_TABLES = ("jump_shares", "heads", "directions", "cone", "score_split", "writers")
"""The measurement tables every saved run has; `p0_norm` (per-text P0 norms) is optional."""
CONTROLS = ("valley_control", "matched_rank")
"""The secondary controls a run saved (as secondary_NAME.csv) when it measured them."""


def read_table(path: Path) -> pd.DataFrame:
    """A saved measurement table, its list cells (per-text values, written as "[0.1, nan]")
    read back as lists of floats. A large table stored gzip'd (NAME.csv.gz) reads so too."""
    frame = pd.read_csv(stored(path))
    for col in frame.columns:
        cells = frame[col]
        if len(cells) and cells.map(lambda c: isinstance(c, str) and c.startswith("[")).all():
            frame[col] = [json.loads(c.replace("nan", "NaN")) for c in cells]
    return frame


def saved_basis(doc: dict, tables: dict[str, pd.DataFrame]) -> Basis:
    """The `Basis` a run's summary.json and tables describe."""
    s = doc["summary"]
    jumps = list(s["jump_layers"])
    n_layers = len(tables["cone"])
    norms = tables.get("p0_norm")
    kept = norms is not None and len(norms)
    embed = norms[norms.layer == -1] if kept else None
    if kept:
        norms = norms[norms.layer >= 0]
    p0 = torch.tensor(norms.p0_norm_by_text.tolist()).T if kept else None
    ratio = torch.tensor(norms.norm_ratio_by_text.tolist()).T if kept else None
    has_embed = embed is not None and len(embed)
    embed_norm = torch.tensor(embed.p0_norm_by_text.iloc[0]) if has_embed else None
    embed_ratio = torch.tensor(embed.norm_ratio_by_text.iloc[0]) if has_embed else None
    formation = Formation(
        norms.p0_norm.tolist() if kept else [], norms.norm_ratio.tolist() if kept else [],
        jumps, list(range(jumps[-1] + 1, n_layers)) or [n_layers - 1],
    )  # fmt: skip
    if not s["p0_norm_jump"] and p0 is None:
        raise ValueError("this run found no P0 norm jump and kept no p0_norm.csv: re-run it")
    return Basis(
        s["model"], s["p0"], int(s["n_texts"]), int(s["n_tokens"]), formation,
        bool(s["p0_norm_jump"]), float(s["p0_norm_growth"]), p0, ratio, embed_norm, embed_ratio,
    )  # fmt: skip


def rejudge(
    folder: str | Path, secondary: str | Path | None = None, config: ClaimsConfig | None = None
) -> Claims:
    """The claims of the run saved in `folder`, judged again (see the module docstring) with
    its own settings (or `config`); with `secondary`, Wong et al.'s rows from that secondary
    trace's folder and the controls `folder` saved."""
    t = time.perf_counter()
    folder = Path(folder)
    doc = read_summary(folder)
    if "jump_layers" not in doc["summary"]:
        raise ValueError(f"{folder} holds no P0 claims run (the trigger task is run again)")
    fields = ClaimsConfig.__dataclass_fields__
    config = config or ClaimsConfig().with_options(
        **{k: v for k, v in doc["settings"].items() if k in fields}
    )
    tables = {n: read_table(folder / f"{n}.csv") for n in P0_TABLES}
    if stored(folder / "p0_norm.csv").is_file():
        tables["p0_norm"] = read_table(folder / "p0_norm.csv")
    table = ClaimsTable(judge_p0(saved_basis(doc, tables), tables, config), tables)
    if secondary is not None:
        found = dict(read_secondary(secondary))
        for name in CONTROLS:
            path = stored(folder / f"secondary_{name}.csv")
            if path.is_file():
                found[name] = pd.read_csv(path)
        table = table + secondary_claims(found, config)
    run = {k: v for k, v in doc["summary"].items() if k not in ("n_claims", "n_hold", "by_paper",
                                                                 "verdicts", "model")}  # fmt: skip
    run |= {"rejudged_from": portable_path(folder),
            **({"secondary": portable_path(secondary)} if secondary else {})}  # fmt: skip
    result = Claims(portable_path(doc["summary"]["model"]), config, table, run,
                    seconds={"rejudge": time.perf_counter() - t})  # fmt: skip
    result.provenance = provenance(settings=result.settings()) | {
        "rejudged": {"folder": str(folder), "original": doc.get("provenance")}
    }
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m attn_sink_circuits.studies.claims.judge_saved", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("folder", help="a folder written by `circuits claims --model M`")
    p.add_argument("--secondary", metavar="DIR", help="the secondary trace the run read")
    p.add_argument("--out", metavar="DIR", help="where to write (default: FOLDER itself)")
    args = p.parse_args(argv)
    try:
        result = rejudge(args.folder, args.secondary)
        write_claims(result, args.out or args.folder)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(result.table.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
