"""The rows of the KV streaming experiments (`attn_sink_circuits.studies.kv.streaming`): which
settings each experiment measures on which text, in order, and their perplexity pooled over the
texts. Each row (a job) names its experiment, text (a row of data/texts/long.jsonl; -1 the first
look's text), first tokens ("text" or "newlines"), policy, budget and sinks, and where they
apply positions, sink share, blocking target, control and seed."""

from __future__ import annotations

import json

import pandas as pd

from attn_sink_circuits.studies.kv.plots import pooled_perplexity

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


def key(job: dict) -> str:
    """What makes two rows the same job (a row of the progress file is found by it)."""
    return json.dumps([job[k] for k in JOB_FIELDS if k in job])


def means(rows: list[dict]) -> list[dict]:
    """Per (experiment, first, policy, budget, sinks): perplexity of the pooled scored tokens of
    every text (exp of the token-weighted mean NLL)."""
    fields = [f for f in JOB_FIELDS if f != "text"]
    groups: dict = {}
    for r in rows:
        groups.setdefault(json.dumps([r.get(f) for f in fields]), []).append(r)
    out = []
    for group in groups.values():
        same = {f: group[0][f] for f in fields if group[0].get(f) is not None}
        perplexity = pooled_perplexity(pd.DataFrame(group))
        out.append({**same, "texts": len(group), "perplexity": perplexity})
    return out
