"""StreamingLLM's experiment (Xiao et al., ICLR 2024) and cache policies at equal budgets, on one
offline model, through `attn_sink_circuits.studies.kv`. The experiments, as jobs run in this
order (`experiments.jobs`; one forward each; heavy hitters two, sink-aware one more per text for
the sinks):

    streaming   long texts (data/texts/long.jsonl) cut to TOKENS: the full cache, a window of
                WINDOW tokens (the first evicted), 1 / 2 / 4 / 8 first tokens + the window, and
                4 first tokens + the window with the first 4 tokens replaced by newlines (and
                the full cache on those tokens)
    first_look  the issue's first look: 1,024 tokens of the Python-reference paragraphs
                (data/texts/python_reference.jsonl joined by blank lines, in file order), full,
                W 256 with S 0 / 1 / 4 first tokens, W 64 with S 0 / 1
    budgets     the long texts: window, streaming_llm (4 sinks), heavy_hitters and sink_aware at
                equal budgets BUDGETS (the measured sinks count inside the budget)
    targets     the issue's targets: the same four policies at 10 % and 25 % of TOKENS
    reindexed   StreamingLLM's rows (1 and 4 first tokens + the window) and sink_aware at the
                target budgets with positions re-indexed inside the cache
    capped      sink_aware at the target budgets with at most CAP of the budget for sinks
                (`KVConfig.sink_share`; for models whose detection marks many tokens)
    blocking    the sinks' role: the primary sink, then the secondary sinks at their layers,
                blocked, against as many random other keys (per query) and positions, SEEDS
                seeds each (`attn_sink_circuits.studies.kv.blocking`)

Perplexity is of the tokens from position 256 on (`KVConfig.score_from`); positions are kept
unless a row says `positions: reindexed`. Rows go to a progress file as they finish (a rerun
skips them), and at the end the run folder (rows.csv, summary.json with provenance, perplexity_vs_budget.png) is written.

    python -m attn_sink_circuits.studies.kv.streaming --model smollm2-135m [--texts 0 2]
        [--out docs/kv/MODEL]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from attn_sink_circuits.core.texts import DATA
from attn_sink_circuits.studies.kv.experiments import (
    BUDGETS,
    CAP,
    EXPERIMENTS,
    FIRST_LOOK,
    NEWLINES,
    SEEDS,
    SINKS,
    TARGETS,
    TOKENS,
    WINDOW,
    jobs,
    key,
    means,
)

LONG = DATA / "long.jsonl"
REFERENCE = DATA / "python_reference.jsonl"


def tokens_of(model, text: int, first: str):
    """The job's token ids: a long text cut to TOKENS (text >= 0) or the first look's text."""
    if text < 0:
        paragraphs = [json.loads(line)["text"] for line in REFERENCE.read_text().splitlines()]
        ids = model.to_tokens("\n\n".join(paragraphs), truncate=False)[0][: FIRST_LOOK[0]]
    else:
        row = json.loads(LONG.read_text().splitlines()[text])
        ids = model.to_tokens(row["text"], truncate=False)[0][:TOKENS]
    if first == "newlines":
        ids = ids.clone()
        ids[:NEWLINES] = model.to_tokens("\n", prepend_bos=False)[0, -1]
    return ids.cpu()


def measure(model, job: dict, sinks_cache: dict) -> dict:
    """One job's row: the job, its token count and its score (`sinks_cache`: the measured
    sinks per text, filled as needed)."""
    from attn_sink_circuits.studies.kv import KVConfig, measured_sinks, score

    ids = tokens_of(model, job["text"], job["first"])
    config = KVConfig(sinks=job["sinks"], positions=job.get("positions", "kept"),
                      sink_share=job.get("sink_share", 1.0))  # fmt: skip
    sinks = None
    if job["policy"] in ("sink_aware", "block"):
        if job["text"] not in sinks_cache:
            sinks_cache[job["text"]] = measured_sinks(model, ids.tolist(), config)
        sinks = sinks_cache[job["text"]]
    if job["policy"] == "block":
        return {**job, "n_tokens": len(ids), **blocked(model, ids, job, sinks, config)}
    result = score(model, ids, job["policy"], job["budget"], config, sinks)
    return {**job, "n_tokens": len(ids), **result.to_dict()}


def blocked(model, ids, job: dict, sinks, config) -> dict:
    """One blocking row: the job's target blocked (control "sink"), a control of it, or none."""
    from attn_sink_circuits.studies.kv.blocking import blocked_score, random_blocks, sink_blocks

    blocks = None
    if job["target"] != "none":
        blocks = sink_blocks(sinks, len(ids), job["target"])
        if job["control"] != "sink":
            blocks = random_blocks(blocks, sinks, job["control"], job["seed"])
    label = (job["target"], job["control"], job["seed"])
    result = blocked_score(model, ids, blocks, config.score_from, label).to_dict()
    n_scored = len(ids) - config.score_from
    return {"perplexity": result["perplexity"], "nll": result["nll"], "n_scored": n_scored,
            "blocked": result["blocked"]}  # fmt: skip


def measure_rows(args, progress: Path, measure_more: bool = True) -> tuple:
    """The model and every row of `args`' experiments: from the progress file where a row is
    there, else measured now (appended to it as it finishes; none with `measure_more` False)."""
    import torch

    from attn_sink_circuits.models import load_model

    torch.set_num_threads(1)
    model = load_model(args.model)
    done = {key(r): r for r in map(json.loads, progress.read_text().splitlines())} if (
        progress.exists()) else {}  # fmt: skip
    sinks_cache: dict = {}
    todo = [j for j in jobs(args.texts) if j["experiment"] in args.experiments]
    for job in todo if measure_more else []:
        if key(job) in done:
            continue
        t0 = time.time()
        row = {**measure(model, job, sinks_cache), "seconds": round(time.time() - t0, 1)}
        done[key(job)] = row
        with progress.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
    return model, [done[key(j)] for j in todo if key(j) in done]


def figure(rows: list[dict], model_key: str):
    """Perplexity against budget per policy (the budgets experiment, with the streaming
    experiment's full cache and window at 256), pooled over the long texts."""
    import pandas as pd

    from attn_sink_circuits.studies.kv.plots import budget_figure

    table = pd.DataFrame(
        [r for r in rows if r["experiment"] in ("streaming", "budgets", "targets")
         and r["first"] == "text" and (r["policy"] == "full" or r["budget"] in BUDGETS + TARGETS)]
    )  # fmt: skip
    texts = sorted(set(table.text))
    title = f"{model_key}: {TOKENS} tokens of long text(s) {texts}"
    return budget_figure(table, title)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m attn_sink_circuits.studies.kv.streaming",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--texts", type=int, nargs="+", default=[0, 2], help="rows of long.jsonl")
    p.add_argument("--out", type=Path, help="run folder (default docs/kv/MODEL)")
    p.add_argument("--progress", type=Path, help="rows file (default TMP/kv-MODEL.jsonl)")
    p.add_argument("--experiments", nargs="+", default=list(EXPERIMENTS), choices=EXPERIMENTS)
    p.add_argument(
        "--write-only", action="store_true", help="write the folder from the rows so far"
    )
    args = p.parse_args(argv)
    out = args.out or Path("docs") / "kv" / args.model
    progress = args.progress or Path(tempfile.gettempdir()) / f"kv-{args.model}.jsonl"
    model, rows = measure_rows(args, progress, not args.write_only)
    save(out, model, rows, args)
    return 0


def save(out: Path, model, rows: list[dict], args) -> None:
    """The run folder, atomically: rows.csv, summary.json (the rows, pooled, the sinks kept;
    with provenance), perplexity_vs_budget.png where budgets or targets ran."""
    import pandas as pd

    from attn_sink_circuits.report.draw import save_figure
    from attn_sink_circuits.runs.io import atomic_folder, write_csv, write_json
    from attn_sink_circuits.runs.provenance import provenance, stamped

    long = args.texts if set(args.experiments) - {"first_look"} else []
    used = ([-1] if "first_look" in args.experiments else []) + long
    token_rows = [tokens_of(model, t, "text").tolist() for t in used]
    settings = {"tokens": TOKENS, "window": WINDOW, "sinks": SINKS, "newlines": NEWLINES,
                "first_look": FIRST_LOOK, "budgets": BUDGETS, "targets": TARGETS,
                "score_from": 256, "texts": args.texts, "experiments": args.experiments,
                "blocking_seeds": SEEDS, "capped_sink_share": CAP,
                "positions": "kept, except rows with positions: reindexed"}  # fmt: skip
    source = f"data/texts: {REFERENCE.name} joined (first look), {LONG.name} rows {long}"
    record = provenance(model, token_rows, settings=settings, source=source)
    with atomic_folder(out, {"measured": "kv streaming", "model": args.model}, record) as tmp:
        write_csv(tmp / "rows.csv", pd.DataFrame(rows))
        summary = {"rows": rows, "pooled": means(rows)}
        if {"budgets", "targets", "blocking"} & set(args.experiments):
            summary["sinks"] = sinks_kept(model, args.texts)
        if {"budgets", "targets"} & set(args.experiments):
            save_figure(figure(rows, args.model), tmp / "perplexity_vs_budget.png")
        write_json(tmp / "summary.json", stamped(summary, record))
    print(f"wrote {len(rows)} rows to {out}")


def sinks_kept(model, texts: list[int]) -> dict:
    """Per long text: the positions `sink_aware` keeps at each layer (measured again, as the
    budgets experiment measured them) and their tokens."""
    from attn_sink_circuits.studies.kv import KVConfig, measured_sinks

    out = {}
    for t in texts:
        ids = tokens_of(model, t, "text")
        layers = measured_sinks(model, ids.tolist(), KVConfig())
        every = sorted({p for layer in layers for p in layer})
        tokens = {p: model.to_string(ids[p : p + 1]) for p in every}
        out[str(t)] = {"by_layer": [list(layer) for layer in layers], "tokens": tokens}
    return out


if __name__ == "__main__":
    raise SystemExit(main())
