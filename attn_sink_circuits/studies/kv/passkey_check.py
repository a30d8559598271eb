"""Passkey retrieval under cache policies, on one offline model, through
`attn_sink_circuits.studies.kv.retrieval`: can a policy that keeps perplexity still hand back a
fact? The committed run folders docs/kv/retrieval/MODEL.

PROMPTS prompts of about TOKENS tokens: a span of natural text (rows ROWS of
data/texts/long.jsonl, English prose), a needle "The pass key is K. Remember it. K is the pass
key." at depths spread evenly from 0.1 to 0.9, the question "What is the pass key? The pass key
is" at the end, K a seeded random 5-digit number. Compress-once: the prompt is prefilled with
the full cache and compressed to the budget (BUDGETS: shares of the prompt and token counts),
the answer " K" is teacher-forced; correct when every answer token is the greedy argmax. The
full cache is scored too; a model below MIN_FULL_ACCURACY with it is "not applicable".

Rows go to a progress file as each prompt finishes (a rerun with the same settings skips the
prompts done), and at the end the run folder (rows.csv, summary.json with provenance) is written.

    OMP_NUM_THREADS=1 python -m attn_sink_circuits.studies.kv.passkey_check --model smollm2-135m
        [--prompts 10]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

POLICIES = ("window", "streaming_llm", "heavy_hitters", "snapkv", "sink_aware")
BUDGETS = ("10%", "25%", "64")


def budget(text: str) -> int | float:
    """ "10%" or "0.1": a share of the prompt; "64": tokens."""
    if text.endswith("%"):
        return float(text[:-1]) / 100
    return float(text) if "." in text else int(text)


def settings_of(args) -> dict:
    """The run's settings (its provenance, and the tag that marks its rows in the progress
    file)."""
    from attn_sink_circuits.studies.kv.passkey import ANSWER, HEADER, NEEDLE, QUESTION
    from attn_sink_circuits.studies.kv.retrieval import MIN_FULL_ACCURACY

    return {"prompts": args.prompts, "tokens": args.tokens, "seed": args.seed,
            "rows": args.rows, "policies": args.policies, "budgets": args.budgets,
            "sinks": args.sinks, "mode": "compress-once (prompt = context + question)",
            "positions": "kept (not re-indexed)", "min_full_accuracy": MIN_FULL_ACCURACY,
            "header": HEADER, "needle": NEEDLE, "question": QUESTION, "answer": ANSWER,
            "depths": "evenly from 0.1 to 0.9, a needle at the start of the line holding "
                      "the filler's token at that depth"}  # fmt: skip


def measure_rows(args, progress: Path, model, prompts, measure_more: bool = True) -> list[dict]:
    """Every prompt's rows: from the progress file where this run's settings made them, else
    measured now (one prompt at a time, appended to the progress file)."""
    from attn_sink_circuits.studies.kv import KVConfig
    from attn_sink_circuits.studies.kv.retrieval import retrieval_table

    tag = json.dumps(settings_of(args), sort_keys=True)
    done: dict[int, list[dict]] = {}
    if progress.exists():
        for line in progress.read_text().splitlines():
            row = json.loads(line)
            if row.pop("settings") == tag:
                done.setdefault(row["prompt"], []).append(row)
    config = KVConfig(sinks=args.sinks)
    budgets = [budget(b) for b in args.budgets]
    for item in prompts if measure_more else []:
        if item.index in done:
            continue
        t0 = time.time()
        table = retrieval_table(model, [item], args.policies, budgets, config, min_full=0.0)
        rows = table.drop(columns=["applicable", "full_accuracy"]).to_dict("records")
        done[item.index] = rows
        with progress.open("a") as fh:
            fh.writelines(json.dumps({**r, "settings": tag}) + "\n" for r in rows)
        print(f"prompt {item.index} done in {time.time() - t0:.0f} s", flush=True)
    return [r for item in prompts for r in done.get(item.index, [])]


def save(out: Path, model, prompts, rows: list[dict], args) -> None:
    """The run folder, atomically: rows.csv (each row marked applicable or not) and
    summary.json (accuracy pooled per policy and budget, the prompts, seconds; provenance)."""
    import pandas as pd

    from attn_sink_circuits.runs.io import atomic_folder, write_csv, write_json
    from attn_sink_circuits.runs.provenance import provenance, stamped
    from attn_sink_circuits.studies.kv.passkey import LONG_TEXTS
    from attn_sink_circuits.studies.kv.retrieval import mark_applicable, pooled_accuracy

    table = mark_applicable(pd.DataFrame(rows))
    record = provenance(model, [p.tokens.tolist() for p in prompts], settings=settings_of(args),
                        source=f"data/texts/{LONG_TEXTS.name} rows {args.rows} (filler)")  # fmt: skip
    about = [{"prompt": p.index, "text_row": p.text_row, "depth": p.depth, "key": p.key,
              "n_prompt": len(p.prompt), "needle": list(p.needle),
              "needle_depth": p.needle_depth, "key_positions": [list(k) for k in p.key_positions],
              "answer_tokens": [model.to_string(p.answer[i : i + 1]) for i in range(len(p.answer))]}
             for p in prompts]  # fmt: skip
    pooled = pooled_accuracy(table)
    summary = {"pooled": pooled.to_dict("records"), "prompts": about,
               "seconds": {"rows": float(table.seconds.sum()),
                           "prefill_and_sinks": float(table.groupby("prompt").prefill_seconds
                                                      .first().sum())}}  # fmt: skip
    with atomic_folder(out, {"measured": "kv retrieval", "model": args.model}, record) as tmp:
        write_csv(tmp / "rows.csv", table)
        write_json(tmp / "summary.json", stamped(summary, record))
    print(pooled.to_string())
    print(f"wrote {len(table)} rows of {len(prompts)} prompts to {out}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m attn_sink_circuits.studies.kv.passkey_check",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--prompts", type=int, default=10, help="passkey prompts")
    p.add_argument("--tokens", type=int, default=2000, help="about this many tokens a prompt")
    p.add_argument("--seed", type=int, default=0, help="keys and filler spans")
    p.add_argument("--rows", type=int, nargs="+", default=[0, 1, 4], help="long.jsonl rows")
    p.add_argument("--policies", nargs="+", default=list(POLICIES))
    p.add_argument("--budgets", nargs="+", default=list(BUDGETS), help='"10%%" or tokens')
    p.add_argument("--sinks", type=int, default=4, help="streaming_llm: first tokens kept")
    p.add_argument("--out", type=Path, help="run folder (default docs/kv/retrieval/MODEL)")
    p.add_argument("--progress", type=Path, help="rows file (default TMP/kv-retrieval-MODEL.jsonl)")
    p.add_argument("--write-only", action="store_true", help="write the folder from rows so far")
    args = p.parse_args(argv)
    for b in args.budgets:
        try:
            budget(b)
        except ValueError:
            p.error(f"--budgets: {b!r} is neither a share (10%, 0.1) nor a token count (64)")
    import torch

    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.studies.kv.passkey import passkey_prompts

    torch.set_num_threads(1)
    model = load_model(args.model)
    prompts = passkey_prompts(model, args.prompts, args.tokens, args.seed, args.rows)
    progress = args.progress or Path(tempfile.gettempdir()) / f"kv-retrieval-{args.model}.jsonl"
    rows = measure_rows(args, progress, model, prompts, not args.write_only)
    out = args.out or Path("docs") / "kv" / "retrieval" / args.model
    save(out, model, [q for q in prompts if any(r["prompt"] == q.index for r in rows)], rows, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
