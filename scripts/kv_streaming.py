"""StreamingLLM's experiment (Xiao et al., ICLR 2024) and cache policies at equal budgets, on one
offline model, through `attn_sink_circuits.studies.kv` (issue 35, item 3). Three experiments, as jobs run in this
order (one forward each; heavy hitters two, sink-aware one more per text for the sinks):

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
unless a row says `positions: reindexed`. Rows go to a progress file as they finish (a rerun skips them), and at the end
the run folder (rows.csv, summary.json with provenance, perplexity_vs_budget.png) is written.

    python scripts/kv_streaming.py --model smollm2-135m [--texts 0 2] [--out docs/kv/MODEL]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LONG = ROOT / "data" / "texts" / "long.jsonl"
REFERENCE = ROOT / "data" / "texts" / "python_reference.jsonl"
TOKENS, WINDOW, SINKS, NEWLINES = 2048, 256, (1, 2, 4, 8), 4
FIRST_LOOK = (1024, ((256, (0, 1, 4)), (64, (0, 1))))
BUDGETS = (64, 256)
TARGETS = (round(0.10 * TOKENS), round(0.25 * TOKENS))
POLICIES = ("window", "streaming_llm", "heavy_hitters", "sink_aware")
SEEDS = (0, 1, 2, 3, 4)
CAP = 0.25
EXPERIMENTS = ("streaming", "first_look", "budgets", "targets", "reindexed", "capped", "blocking")
JOB_FIELDS = ("experiment", "text", "first", "policy", "budget", "sinks", "positions",
              "sink_share", "target", "control", "seed")  # fmt: skip


def jobs(texts: list[int]) -> list[dict]:
    """Every row to measure, in order (see the module docstring): the first text's rows, the
    first look, then each further text's rows."""
    out = []
    for t in texts:
        out += streaming_jobs(t)
        if t == texts[0]:
            out += first_look_jobs()
        out += [
            {
                "experiment": "budgets",
                "text": t,
                "first": "text",
                "policy": policy,
                "budget": b,
                "sinks": 4,
            }
            for b in BUDGETS
            for policy in POLICIES
            if (policy, b) != ("window", WINDOW)
        ]  # fmt: skip  (the streaming row)
        out += further_jobs(t)
    return out


def further_jobs(t: int) -> list[dict]:
    """The targets, reindexed, capped and blocking rows of long text `t` (the module
    docstring)."""
    row = {"text": t, "first": "text", "sinks": 4}
    out = [{**row, "experiment": "targets", "policy": "full", "budget": TOKENS}]
    out += [{**row, "experiment": "targets", "policy": p, "budget": b}
            for b in TARGETS for p in POLICIES]  # fmt: skip
    again = {**row, "experiment": "reindexed", "positions": "reindexed"}
    out += [{**again, "policy": "streaming_llm", "budget": WINDOW + k, "sinks": k} for k in (1, 4)]
    out += [{**again, "policy": p, "budget": b} for b in TARGETS
            for p in ("streaming_llm", "sink_aware")]  # fmt: skip
    out += [{**row, "experiment": "capped", "policy": "sink_aware", "budget": b, "sink_share": CAP}
            for b in TARGETS]  # fmt: skip
    block = {**row, "experiment": "blocking", "policy": "block", "budget": TOKENS, "sinks": 0}
    out.append({**block, "target": "none", "control": "none", "seed": None})
    for target in ("primary", "secondary"):
        out.append({**block, "target": target, "control": "sink", "seed": None})
        out += [{**block, "target": target, "control": c, "seed": s}
                for c in ("keys", "tokens") for s in SEEDS]  # fmt: skip
    return out


def streaming_jobs(t: int) -> list[dict]:
    row = {"experiment": "streaming", "text": t, "first": "text"}
    out = [{**row, "policy": "full", "budget": TOKENS, "sinks": 0},
           {**row, "policy": "window", "budget": WINDOW, "sinks": 0}]  # fmt: skip
    out += [{**row, "policy": "streaming_llm", "budget": WINDOW + k, "sinks": k} for k in SINKS]
    out.append({**row, "first": "newlines", "policy": "streaming_llm",
                "budget": WINDOW + NEWLINES, "sinks": NEWLINES})  # fmt: skip
    out.append({**row, "first": "newlines", "policy": "full", "budget": TOKENS, "sinks": 0})
    return out


def first_look_jobs() -> list[dict]:
    n, settings = FIRST_LOOK
    row = {"experiment": "first_look", "text": -1, "first": "text"}
    out = [{**row, "policy": "full", "budget": n, "sinks": 0}]
    for w, ks in settings:
        out += [{**row, "policy": "streaming_llm" if k else "window", "budget": w + k, "sinks": k}
                for k in ks]  # fmt: skip
    return out


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


def key(job: dict) -> str:
    return json.dumps([job[k] for k in JOB_FIELDS if k in job])


def run(args, progress: Path, measure_more: bool = True) -> tuple:
    import time

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


def figure(rows: list[dict], path: Path, model_key: str) -> None:
    """Perplexity against budget per policy (the budgets experiment, with the streaming
    experiment's full cache and window at 256), pooled over the long texts."""
    import pandas as pd

    from attn_sink_circuits.report.draw import save_figure
    from attn_sink_circuits.studies.kv.plots import budget_figure

    table = pd.DataFrame(
        [r for r in rows if r["experiment"] in ("streaming", "budgets", "targets")
         and r["first"] == "text" and (r["policy"] == "full" or r["budget"] in BUDGETS + TARGETS)]
    )  # fmt: skip
    texts = sorted(set(table.text))
    title = f"{model_key}: {TOKENS} tokens of long text(s) {texts}"
    save_figure(budget_figure(table, title), path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--texts", type=int, nargs="+", default=[0, 2], help="rows of long.jsonl")
    p.add_argument("--out", type=Path, help="run folder (default docs/kv/MODEL)")
    p.add_argument("--progress", type=Path, help="rows file (default /tmp/kv-MODEL.jsonl)")
    p.add_argument("--experiments", nargs="+", default=list(EXPERIMENTS), choices=EXPERIMENTS)
    p.add_argument(
        "--write-only", action="store_true", help="write the folder from the rows so far"
    )
    args = p.parse_args()
    out = args.out or ROOT / "docs" / "kv" / args.model
    progress = args.progress or Path(f"/tmp/kv-{args.model}.jsonl")
    model, rows = run(args, progress, not args.write_only)
    write(out, model, rows, args)


def write(out: Path, model, rows: list[dict], args) -> None:
    import pandas as pd

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
            figure(rows, tmp / "perplexity_vs_budget.png", args.model)
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


def means(rows: list[dict]) -> list[dict]:
    """Per (experiment, first, policy, budget, sinks): perplexity of the pooled scored tokens of
    every text (exp of the token-weighted mean NLL)."""
    fields = [f for f in JOB_FIELDS if f != "text"]
    groups: dict = {}
    for r in rows:
        groups.setdefault(json.dumps([r.get(f) for f in fields]), []).append(r)
    out = []
    for group in groups.values():
        n = sum(r["n_scored"] for r in group)
        nll = sum(r["nll"] * r["n_scored"] for r in group) / n
        same = {f: group[0][f] for f in fields if group[0].get(f) is not None}
        out.append({**same, "texts": len(group), "perplexity": math.exp(nll)})
    return out


if __name__ == "__main__":
    main()
