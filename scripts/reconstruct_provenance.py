"""Issue 33: write a reconstructed `provenance.json` into each run folder under docs/ whose run
recorded no provenance (or only part), from what is known without rerunning anything: the
commit that holds the run's files (git log), the folder's own summary.json and marker, the
command where the page that shows the run gives it, and the model's weights sha256 where the
run loaded a registry model (its GGUF pin, which the loader checks). The rest is "unknown".
Every record says `recorded: false`; the run's own files are left as they are.

    python scripts/reconstruct_provenance.py            # the folders provenance_gaps flags
    python scripts/reconstruct_provenance.py --dry-run  # print what it would write
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from attn_sink_circuits.models.registry import MODELS
from attn_sink_circuits.runs.audit import RECONSTRUCTED_FILE, provenance_gaps, run_folders
from attn_sink_circuits.runs.io import write_json
from attn_sink_circuits.runs.provenance import MARKER_NAME, SUMMARY_NAME, UNKNOWN, schema_stamp
from attn_sink_circuits.runs.record_paths import portable

ROOT = Path(__file__).resolve().parents[1]
PIN_COMMIT = "3c0a81610316f9007d50c703d66faad68ccad943"
"""The commit that pinned every registry model's GGUF sha256 (unchanged since) and made the
loader refuse a file whose sha256 differs."""
PAGES = {
    "docs/secondary/": "docs/secondary/README.md",
    "docs/ioi/": "docs/ioi/RESULTS.md",
    "docs/p0/qwen2.5-1.5b": "docs/scale/README.md",
    "docs/p0/": "docs/p0/README.md",
    "docs/emergence/": "docs/emergence/README.md",
    "docs/claims/": "docs/claims/README.md",
    "docs/mib/": "docs/mib/README.md",
}
"""Folder prefix -> the page that shows its numbers (first match)."""
COMMANDS = {
    "docs/p0/qwen2.5-1.5b": "circuits p0 --model qwen2.5-1.5b --threads 1",
    "docs/p0/smollm2-135m-mix": "circuits p0 --model smollm2-135m --edge-n-heldout 32",
}
"""Commands the page gives in prose (the rest are read from the page's command lines)."""
IOI_KEYS = ("model", "method", "metric", "ablation", "target_faithfulness", "n_fit_texts",
            "n_heldout_texts", "n_tokens", "ig_steps", "templates")  # fmt: skip


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def page_of(rel: str) -> str:
    return next(page for prefix, page in PAGES.items() if rel.startswith(prefix))


def page_command(rel: str, page: str) -> tuple[str, str] | None:
    """The command a page gives for folder `rel`: a line or table cell naming `--out rel`."""
    if rel in COMMANDS:
        return COMMANDS[rel], page
    text = (ROOT / page).read_text(encoding="utf-8")
    name = rel.rsplit("/", 1)[1]
    row = re.search(rf"^\| `{re.escape(name)}` \| ((?:Python: )?`[^`]+`) \|", text, re.M)
    if row:
        return row[1].replace("`", ""), page + (" (abbreviated there)" if "..." in row[1] else "")
    line = re.search(rf"^(circuits [^\n]*--out {re.escape(rel)}(?: [^\n]*)?)$", text, re.M)
    return (line[1], page) if line else None


def registry_model(key: str, recorded_sha: str | None = None) -> dict:
    pin = MODELS[key].sha256
    if recorded_sha is not None and recorded_sha != pin:
        raise ValueError(f"{key}: recorded gguf_sha256 {recorded_sha} is not the pin {pin}")
    return {
        "key": key,
        "hub_name": MODELS[key].hub_name,
        "weights_sha256": pin,
        "weights_sha256_of": "gguf file",
        "weights_sha256_from": (
            "the run's summary.json (settings.gguf_sha256), equal to the registry pin"
            if recorded_sha
            else f"the registry pin (set in {PIN_COMMIT[:7]}, unchanged since; the loader "
            "refuses a GGUF whose sha256 differs)"
        ),
    }


def file_at(commit: str, path: str) -> dict | None:
    try:
        data = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{path}"],
                              capture_output=True, check=True).stdout  # fmt: skip
    except subprocess.CalledProcessError:
        return None
    return {"path": path, "sha256_at_committed_in": hashlib.sha256(data).hexdigest()}


def model_and_texts(rel: str, summary: dict, marker: dict, command) -> tuple:
    """(model, texts, settings) as far as the folder's files and command say."""
    settings = summary.get("settings") or summary.get("config")
    words = command.split() if isinstance(command, str) else list(command or [])
    if rel.startswith("docs/ioi/"):
        settings = {k: summary[k] for k in IOI_KEYS if k in summary}
        texts = {"source": "attn_sink_circuits.studies.ioi.prompts prompts (the run's templates)", "sha256": UNKNOWN,
                 "n_fit": summary.get("n_fit_texts"), "n_heldout": summary.get("n_heldout_texts")}  # fmt: skip
        return registry_model(summary["model"]), texts, settings
    if rel.startswith("docs/emergence/"):
        trained = next((w for w in words if w.startswith(("runs/", "/work/main/runs/"))), None)
        if not trained and words[:1] == ["emergence"]:
            trained = f"{words[1]} (a circuits train-lm folder)"
        model = {"key": trained or UNKNOWN, "weights_sha256": UNKNOWN,
                 "trained_by": "circuits train-lm (its runs/ folder is not committed)"}  # fmt: skip
        texts = {"source": summary.get("texts") or (words[words.index("--texts") + 1]
                 if "--texts" in words else UNKNOWN), "sha256": UNKNOWN,
                 "n": (settings or {}).get("n_texts")}  # fmt: skip
        return model, texts, settings
    key = (settings or {}).get("model") or summary.get("model") or rel.rsplit("/", 1)[1]
    model = registry_model(key, (settings or {}).get("gguf_sha256"))
    source = words[words.index("--traces") + 1] if "--traces" in words else UNKNOWN
    if isinstance(command, str) and (traces := re.search(r'read_traces\("([^"]+)"\)', command)):
        source = traces[1]
    texts = {"source": source, "sha256": UNKNOWN, "n": (settings or {}).get("n_texts")}
    return model, texts, settings


def reconstruct(folder: Path) -> dict:
    rel = folder.relative_to(ROOT).as_posix()
    summary, marker = read(folder / SUMMARY_NAME), read(folder / MARKER_NAME)
    held = SUMMARY_NAME if (folder / SUMMARY_NAME).is_file() else MARKER_NAME
    history = git("log", "--format=%H", "--", f"{rel}/{held}").split()
    last, first = history[0], history[-1]
    page = page_of(rel)
    given = page_command(rel, page)
    command = marker.get("command") or (given[0] if given else UNKNOWN)
    model, texts, settings = model_and_texts(rel, summary, marker, command)
    own = summary.get("provenance") or marker.get("provenance")
    if own:  # the run recorded part: keep that part as recorded, fill in the rest
        model, texts, settings, note = partial(rel, own, summary, model, texts)
    if isinstance(texts, dict) and texts.get("source") not in (None, UNKNOWN):
        texts["file"] = file_at(last, str(texts["source"]).replace("/work/main/", ""))
    record = {
        "recorded": False,
        "reconstructed": (
            "Written after the run (issue 33) from git history and the folder's own files; "
            'nothing was rerun. "unknown": not recorded and not recoverable.'
        ),
        "committed_in": last,
        "committed_at": git("show", "-s", "--format=%cI", last),
        "first_committed_in": first,
        "shown_in": os.path.relpath(ROOT / page, folder),
        "code": {
            "package": "circuits",
            "version": marker.get("version", UNKNOWN),
            "commit": UNKNOWN,
            "at_or_before": last,
        },  # fmt: skip
        "command": command,
        "command_from": MARKER_NAME if marker.get("command") else (given[1] if given else None),
        "time": {"started": marker.get("started") or UNKNOWN},
        "settings": settings if isinstance(settings, dict) else UNKNOWN,
        "settings_from": SUMMARY_NAME if isinstance(settings, dict) else None,
        "model": model,
        "texts": texts,
    }
    if own:
        record.update(code=own["code"], command=own["command"], command_from="the run's record",
                      time=own["time"], partial=note)  # fmt: skip
        if "rejudged" in own:  # the judged run is the one without a record: its commit
            record["committed_in"] = first
            record["code"] = {**record["code"], "commit": UNKNOWN, "at_or_before": first}
            record["command"], record["command_from"], record["time"] = UNKNOWN, None, UNKNOWN
    return {**schema_stamp(), "provenance": portable(record)}


def partial(rel: str, own: dict, summary: dict, model, texts) -> tuple:
    """(model, texts, settings, note) of a run that recorded its code and command only."""
    words = [str(w) for w in own.get("command", [])]
    if rel == "docs/emergence/sinks-8l":
        opts = dict(zip(words[1::2], words[2::2], strict=False))
        settings = {k.lstrip("-"): v for k, v in opts.items() if k.startswith("--")}
        note = "a report of runs/e37's training runs (their phases.json); no model ran here"
        return None, None, settings, note + "; settings from its command"
    if rel == "docs/emergence/real-models":
        keys = [w for w in words[1:] if w in MODELS]
        texts = {"source": "attn_sink_circuits.studies.emergence.series.stdlib_texts (held-out standard-library "
                 "windows)", "sha256": UNKNOWN, "n": UNKNOWN}  # fmt: skip
        note = "the run recorded its code, command and times, not its models, texts or settings"
        return [registry_model(k) for k in keys], texts, {"models": keys}, note
    if rel.startswith("docs/mib/"):
        settings = {k: summary[k] for k in ("protocol", "model", "partner", "method", "metric",
                    "ablation", "n_fit_texts", "n_heldout_texts", "n_tokens") if k in summary}  # fmt: skip
        settings["options"] = words[words.index("--option") + 1 : words.index("--out")]
        texts = {"source": f"attn_sink_circuits.studies.ioi.prompts pairs, partner {summary.get('partner')}, "
                 "pair seed 0 (the script's default)", "sha256": UNKNOWN,
                 "n_fit": summary.get("n_fit_texts"), "n_heldout": summary.get("n_heldout_texts")}  # fmt: skip
        note = "the run recorded its code, command and times, not its model, pairs or settings"
        return registry_model(summary["model"]), texts, settings, note
    # A re-judged claims table: the judging is recorded, the judged run is not.
    note = (
        "summary.json records the re-judging (code, command, settings); the judged run "
        "(the model's activations saved with the table) recorded nothing"
    )
    return model, {**texts, "n": own.get("settings", {}).get("n_texts")}, own["settings"], note


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("folders", nargs="*", type=Path, help="default: every flagged folder")
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)
    files = [ROOT / f for f in git("ls-files", "docs").split() if (ROOT / f).is_file()]
    folders = [f.resolve() for f in args.folders] or [
        f for f in run_folders(ROOT / "docs", files)
        if provenance_gaps(f) and not (f / RECONSTRUCTED_FILE).exists()
    ]  # fmt: skip
    for folder in folders:
        doc = reconstruct(folder)
        if args.dry_run:
            print(folder.relative_to(ROOT), json.dumps(doc, indent=1)[:1500])
        else:
            write_json(folder / RECONSTRUCTED_FILE, doc)
            print("wrote", (folder / RECONSTRUCTED_FILE).relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
