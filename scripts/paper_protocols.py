"""The papers' protocols on every offline model: Gu et al.'s sink rate and Sun et al.'s massive
activations, one run folder per model under docs/sinks/, and the tables in docs/sinks/README.md.

Texts (`select_texts`): the 78 English paragraphs of data/texts/python_reference.jsonl, then
the German texts of data/texts/mix.jsonl in file order, 100 in all; each cut to its first 64
tokens as the model tokenises it (the BOS, where the model prepends one, is position 0).
Per model, one forward pass per text gives Gu et al.'s alpha at P0 per head and text and
Sink^eps at eps 0.3 and 0.8, and Sun et al.'s per-layer largest |entries| of the block outputs
against their median (`attn_sink_circuits.sinks.papers`). A model whose folder already holds a run of
this protocol is not measured again (resumable; `--force` does).

    OMP_NUM_THREADS=1 python scripts/paper_protocols.py [--models KEY ...] [--force] [--threads 1]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import time
from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "sinks"
SOURCES = (("data/texts/python_reference.jsonl", None), ("data/texts/mix.jsonl", "german"))
"""Natural-text files in the order texts are taken, with the kind taken (None: every line)."""
N_TEXTS = 100
N_TOKENS = 64
MODELS = ("smollm2-135m", "qwen2.5-0.5b", "gemma-3-270m", "qwen2.5-1.5b")


@dataclass(frozen=True)
class Selection:
    """The texts measured and where each comes from."""

    texts: list[str]
    language: list[str]
    where: list[str]
    """file:kind:line (from 0) of each text."""
    files: dict[str, str]
    """File -> sha256 of the whole file."""

    def record(self, n_tokens: int = N_TOKENS) -> dict:
        """What makes two runs the same protocol (compared when resuming)."""
        from attn_sink_circuits.sinks.protocols import EPSILONS

        return {
            "files": self.files,
            "n_texts": len(self.texts),
            "by_language": dict(Counter(self.language)),
            "where": self.where,
            "n_tokens": n_tokens,
            "epsilons": list(EPSILONS),
        }


def select_texts(n: int = N_TEXTS, root: Path = ROOT) -> Selection:
    """The first `n` texts of `SOURCES`."""
    texts, language, where, files = [], [], [], {}
    for name, kind in SOURCES:
        path = root / name
        files[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            row = json.loads(line)
            if len(texts) < n and kind in (None, row.get("kind")):
                texts.append(row["text"])
                language.append("german" if row.get("kind") == "german" else "english")
                where.append(f"{name}:{row.get('kind', 'prose')}:{line_no}")
    if len(texts) < n:
        raise ValueError(f"only {len(texts)} natural texts in {[s for s, _ in SOURCES]}, not {n}")
    return Selection(texts, language, where, files)


def first_tokens(model, texts: list[str], n_tokens: int = N_TOKENS) -> list[list[int]]:
    """Each text's first `n_tokens` ids as `model.to_tokens` gives them (BOS included)."""
    rows = []
    for i, text in enumerate(texts):
        ids = model.to_tokens(text, truncate=False, move_to_device=False)[0].tolist()
        if len(ids) < n_tokens:
            raise ValueError(f"text {i} has {len(ids)} tokens, fewer than T = {n_tokens}")
        rows.append(ids[:n_tokens])
    return rows


def figure(layers, title: str):
    """Left: Sun et al.'s plot (top 1-3 |entries| and the median per layer, log scale);
    right: the share of heads with alpha > eps per layer (per text, then averaged)."""
    from matplotlib.figure import Figure

    from attn_sink_circuits.sinks.protocols import EPSILONS, eps_tag

    fig = Figure(figsize=(8, 3), layout="constrained")
    left, right = fig.subplots(1, 2)
    x = layers["sun_layer"]
    for column in ("top1_abs", "top2_abs", "top3_abs", "median_abs"):
        left.plot(x, layers[column], marker="o", markersize=3, label=column.split("_")[0])
    left.set(yscale="log", xlabel="layer (Sun et al.'s count: block + 1)", ylabel="|entry|")
    left.legend(fontsize=7)
    for eps in EPSILONS:
        right.plot(x, layers[f"{eps_tag(eps)}_share"], marker="o", markersize=3,
                   label=f"alpha > {eps:g}")  # fmt: skip
    right.set(ylim=(-0.02, 1.02), xlabel="layer (block + 1)", ylabel="share of heads")
    right.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    return fig


def model_record(model, key: str) -> dict:
    """What was loaded: the loader's ModelInfo and, for a registry model, its GGUF."""
    from attn_sink_circuits.core.identity import model_info
    from attn_sink_circuits.models.registry import MODELS as REGISTRY

    record = model_info(model).to_dict()
    spec = REGISTRY.get(key)
    record["gguf_name"] = spec.gguf_name if spec else None
    return record


def summarise(key: str, run, selection: Selection) -> dict:
    """The run's headline numbers (summary.json's "summary")."""
    from attn_sink_circuits.sinks.protocols import EPSILONS, eps_tag
    from attn_sink_circuits.studies.claims.table import mean_interval

    report = run.report
    german = [lang == "german" for lang in selection.language]
    return {
        "model": key,
        "n_texts": len(report.texts),
        "n_tokens": report.texts[0].n_tokens,
        "n_layers": report.n_layers,
        "n_heads": report.n_heads,
        "n_heads_total": report.n_layers * report.n_heads,
        "position0": run.position0,
        "seconds": round(run.seconds, 1),
        **run.sink_summary({"english": [not g for g in german], "german": german}),
        **{
            f"{eps_tag(e)}_ci": list(mean_interval(run.per_text_rates(e).tolist())[1:])
            for e in EPSILONS
        },
        **run.sun_summary(run.layers_frame()),
    }


def write_run(
    folder: Path, key: str, run, selection: Selection, model, started: float, rounding=None
) -> dict:
    """The run folder of a `ProtocolRun`, atomically: summary.json (with its provenance),
    layers.csv, heads.csv and protocols.png; the marker carries the same provenance."""
    from attn_sink_circuits.report.draw import save_figure
    from attn_sink_circuits.runs.io import atomic_folder, write_csv, write_json
    from attn_sink_circuits.runs.provenance import provenance, stamped

    summary = summarise(key, run, selection)
    if rounding is not None:  # a rounded copy: its model and the rounding, named apart
        summary |= {"model": key.removesuffix(f"-{rounding}"), "rounding": rounding}
    kinds = [w.split(":")[1] for w in selection.where]
    settings = {
        "n_tokens": summary["n_tokens"],
        "sink_position": 0,
        **run.report.settings.to_dict(),
    }
    record = provenance(model, selection.texts, kinds, None, settings, started=started,
                        source=" + ".join(selection.files))  # fmt: skip
    doc = {"summary": summary, "protocol": selection.record(), "model": model_record(model, key)}
    layers = run.layers_frame()
    title = f"{key}: {summary['n_texts']} texts x T = {summary['n_tokens']}"
    with atomic_folder(folder, {"measured": "paper_protocols", "model": key}, record) as tmp:
        write_json(tmp / "summary.json", stamped(doc, record))
        write_csv(tmp / "layers.csv", layers)
        write_csv(tmp / "heads.csv", run.heads_frame())
        save_figure(figure(layers, title), tmp / "protocols.png", dpi=80)
    return summary


def done(folder: Path, selection: Selection) -> bool:
    """Whether `folder` holds a run of this protocol on these texts (written by this script)."""
    from attn_sink_circuits.runs.io import read_marker

    path = folder / "summary.json"
    if read_marker(folder) is None or not path.is_file():
        return False
    return json.loads(path.read_text(encoding="utf-8")).get("protocol") == selection.record()


def load(key: str):
    """A registry model, or `tiny` (attn_sink_circuits.models.tiny, for tests); None if not installed."""
    if key == "tiny":
        from attn_sink_circuits.models.tiny import tiny_model

        return tiny_model()
    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.models.gguf import weights_installed
    from attn_sink_circuits.models.registry import get_spec

    return load_model(key) if weights_installed(get_spec(key)) else None


def run_model(key: str, selection: Selection, out: Path = OUT, force: bool = False) -> str:
    """Measure one model into `out/key` unless done; one line saying what happened."""
    folder = out / key
    if not force and done(folder, selection):
        return f"{key}: kept {folder} (same protocol and texts; --force measures again)"
    started = time.time()
    model = load(key)
    if model is None:
        return f"{key}: weights not installed; not measured"
    from attn_sink_circuits.sinks.protocols import run_protocols

    run = run_protocols(model, first_tokens(model, selection.texts))
    s = write_run(folder, key, run, selection, model, started)
    return (
        f"{key}: Sink^0.3 {s['sink03']:.1%}, Sink^0.8 {s['sink08']:.1%}; massive from block "
        f"{s['massive_layer']} (max |entry| / median {s['max_ratio']:.0f}); {s['seconds']} s"
    )


# -- docs/sinks/README.md tables (every number a make_docs value mark on its run) -----------
BEGIN, END = "<!-- paper_protocols:begin -->", "<!-- paper_protocols:end -->"
VALUE = re.compile(r"<!--v docs/sinks/(?P<key>[^\s/]+) (?P<field>\S+) (?P<fmt>\S+?)-->.*?<!--/v-->")
"""A make_docs value mark on one of these runs."""
GU_PUBLISHED = (
    ("GPT2-XL", "77.00 %", "–", "Gu et al. 2025, Table 1"),
    ("Mistral-7B", "97.49 %", "–", "Gu et al. 2025"),
    ("LLaMA2-7B", "92.47 %", "–", "Gu et al. 2025"),
    ("LLaMA3-8B", "99.02 %", "–", "Gu et al. 2025"),
    ("Llama-3.1-8B", "–", "45.97 %", "Barbero et al. 2025"),
    ("Llama-3.1-70B", "–", "73.49 %", "Barbero et al. 2025"),
    ("Llama-3.1-405B", "–", "78.29 %", "Barbero et al. 2025"),
)
SUN_PUBLISHED = (
    ("Llama-2-7B", "layer 2 (= block 1)", "dims 1415 (about -1502) and 2533 (about +2547), on "
     "the first token and the first delimiter", "Sun et al. 2024"),
    ("Phi-3-mini", "2", "–", "field guide §7; the source's layer count is not stated"),
    ("Mistral-7B", "2", "–", "as above"),
    ("Qwen2.5-7B", "4", "–", "as above"),
    ("Llama-3.1-8B", "6", "–", "as above"),
)  # fmt: skip


def lookup(doc: dict, field: str):
    """`field` (dotted; list indices as numbers) in a summary.json document, as make_docs
    reads marks: a first segment not at the top is taken from doc["summary"]."""
    parts = field.split(".")
    value = doc if parts[0] in doc else doc["summary"]
    for part in parts:
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def mark(doc: dict, field: str, fmt: str | None = None, default: str = "s") -> str:
    """`field`'s value as a make_docs value mark on its run folder, formatted by `fmt`."""
    fmt = fmt or default
    value = lookup(doc, field)
    shown = "n/a" if value is None else (str(value) if fmt == "s" else format(value, fmt))
    return f"<!--v docs/sinks/{doc['summary']['model']} {field} {fmt}-->{shown}<!--/v-->"


def position0(doc: dict) -> str:
    tokens = doc["summary"]["position0"]
    if len(tokens) == 1:
        return f"`{next(iter(tokens))}` (BOS) in every text".replace("|", "\\|")  # a table cell
    return f"the text's first token ({len(tokens)} different ones)"


def table(header: list[str], docs: dict[str, dict | None], row, extra: list[str]) -> list[str]:
    """A Markdown table: `header`, then `row(key, doc)` (a list of lines) for each measured
    model, a "not measured" line for the others, then the `extra` lines (published numbers)."""
    missing = " | not measured: weights not installed |" + " |" * (len(header) - 2)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, doc in docs.items():
        lines += [f"| `{key}`{missing}"] if doc is None else row(key, doc)
    return lines + extra


def gu_table(docs: dict[str, dict | None]) -> list[str]:
    """Gu et al.'s Sink^eps as their code computes it, ours beside the published."""

    def row(key: str, doc: dict) -> list[str]:
        m = partial(mark, doc, default=".1%")
        rates = [f"{m(t)} ({m(t + '_ci.0')}-{m(t + '_ci.1')})" for t in ("sink03", "sink08")]
        return [
            f"| {doc['model']['hub_name']} (`{key}`) | {m('n_layers', 'd')} x "
            f"{m('n_heads', 'd')} | {position0(doc)} | {rates[0]} | {rates[1]} | this run: "
            f"{doc['model']['gguf_name']} dequantised to float32; our 100 texts |"
        ]

    header = ["model", "layers x heads", "position 0", "Sink^0.3 (95 % CI over texts)",
              "Sink^0.8 (95 % CI)", "source; what differs"]  # fmt: skip
    extra = [f"| {name} | | | {a} | {b} | {src}: original weights, their texts |"
             for name, a, b, src in GU_PUBLISHED]  # fmt: skip
    return table(header, docs, row, extra)


def variants_table(docs: dict[str, dict | None]) -> list[str]:
    """Sink^eps per text or on the text-mean alpha, with or without query 0, per language."""

    def row(key: str, doc: dict) -> list[str]:
        lines = []
        for t, eps in (("sink03", "0.3"), ("sink08", "0.8")):
            cells = [t, f"{t}_excl_q0", f"{t}_mean_alpha", f"{t}_mean_alpha_excl_q0",
                     f"{t}_english", f"{t}_german"]  # fmt: skip
            lines.append(
                f"| `{key}` | {eps} | " + " | ".join(mark(doc, c, ".1%") for c in cells) + " |"
            )
        return lines

    header = ["model", "eps", "per text, with query 0 (Gu et al.'s code)",
              "per text, without query 0", "text-mean alpha, with query 0",
              "text-mean alpha, without", "English texts", "German texts"]  # fmt: skip
    return table(header, docs, row, [])


def sun_table(docs: dict[str, dict | None]) -> list[str]:
    """Sun et al.'s massive-activation layer and entries, ours beside the published."""

    def row(key: str, doc: dict) -> list[str]:
        m = partial(mark, doc, default="d")
        entry = [f"dim {m(f'massive_top{r}_dim')}, {m(f'massive_top{r}_value', ',.0f')}, "
                 f"{m(f'massive_top{r}_site', 's')} ({m(f'massive_top{r}_site_share', '.0%')})"
                 for r in (1, 2)]  # fmt: skip
        per_text = "n/a"
        if doc["summary"]["first_massive_per_text"] is not None:
            fmts = enumerate(("d", "g", "d"))
            per_text = " / ".join(m(f"first_massive_per_text.{i}", f) for i, f in fmts)
        return [
            f"| {doc['model']['hub_name']} (`{key}`) | {m('massive_layer')} "
            f"({m('massive_layer_sun')}) | {m('texts_with_massive')} of {m('n_texts')}; "
            f"{per_text} | {entry[0]} | {entry[1]} | {m('massive_top1_ratio', ',.0f')} | "
            f"{m('last_p0_max_abs', ',.0f')} ({m('last_p0_ratio', ',.0f')}x) | "
            f"{m('dot_massive_layer')} / {m('newline_massive_layer')} |"
        ]

    header = ["model", "massive from block (Sun et al.'s layer)",
              "texts with one; first block per text (min / median / max)",
              "largest entry there: dim, mean value, site (share of texts)", "2nd largest",
              "largest / median", "P0's largest \\|entry\\| at the last block (/ median)",
              'first "." alone / first newline alone massive from block (n/a: never)']  # fmt: skip
    extra = [f"| {name} ({src}) | {layer} | | {entry} | | | | |"
             for name, layer, entry, src in SUN_PUBLISHED]  # fmt: skip
    return table(header, docs, row, extra)


def update_readme(out: Path = OUT, models: tuple[str, ...] = MODELS) -> bool:
    """Fill the README's tables, and its value marks on these runs in the prose, from the run
    folders; False if it has no table markers."""
    from attn_sink_circuits.runs.io import atomic_write

    readme = out / "README.md"
    text = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    if BEGIN not in text or END not in text:
        return False
    docs = {}
    for key in models:
        path = out / key / "summary.json"
        docs[key] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    body = ["### Gu et al.: sink rate", "", *gu_table(docs), "", "Four ways of counting, and "
            "per language:", "", *variants_table(docs), "", "### Sun et al.: massive "
            "activations", "", *sun_table(docs)]  # fmt: skip
    head, rest = text.split(BEGIN, 1)
    new = head + BEGIN + "\n" + "\n".join(body) + "\n" + END + rest.split(END, 1)[1]
    new = VALUE.sub(lambda v: mark(docs[v["key"]], v["field"], v["fmt"]) if docs.get(v["key"])
                    else v[0], new)  # fmt: skip
    with atomic_write(readme) as fh:
        fh.write(new)
    return True


ROUNDED = OUT / "rounding"
"""Run folders of the protocol on rounded copies of a model: `<key>-<type>/`, `table.md`."""


def rounded_copy(key: str, kind: str) -> Path:
    """The loader's fp32 folder of registry model `key` rounded to `kind` (every matrix; the
    classes the file keeps at 8 bits or wider stay so: `attn_sink_circuits.models.rounding.file_plan`),
    written once into the cache (`<cache>/rounded/<key>-<kind>`)."""
    from attn_sink_circuits.models.rounding import cached_rounding

    return cached_rounding(key, kind)


def run_rounded(key: str, kinds: list[str], selection: Selection) -> list[dict]:
    """The protocol on `key` as loaded and on each rounded copy, each a run folder under
    `ROUNDED`; one row a model for `rounding_table`."""
    from attn_sink_circuits.models import load_model

    rows = []
    for kind in ["as loaded", *kinds]:
        name = key if kind == "as loaded" else f"{key}-{kind}"
        folder = ROUNDED / name.replace(" ", "-")
        started = time.time()
        model = load_model(key if kind == "as loaded" else rounded_copy(key, kind))
        from attn_sink_circuits.sinks.protocols import run_protocols

        run = run_protocols(model, first_tokens(model, selection.texts))
        s = write_run(folder, name, run, selection, model, started, rounding=kind)
        rows.append(s)
        print(f"{name}: Sink^0.3 {s['sink03']:.1%}; massive block {s['massive_layer']}", flush=True)
    return rows


def rounding_table(rows: list[dict]) -> str:
    """Markdown: per rounding, Gu's Sink^0.3 and ^0.8 (per text) with intervals, the P0 mass
    over later queries, Sun et al.'s first massive block and largest ratio."""
    lines = ["| model | weights | Sink^0.3 [95 %] | Sink^0.8 [95 %] | P0 mass | massive block | "
             "max \\|entry\\| / median |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        lo3, hi3 = r["sink03_ci"]
        lo8, hi8 = r["sink08_ci"]
        lines.append(
            f"| {r['model']} | {r['rounding']} | {r['sink03']:.3f} [{lo3:.3f}, {hi3:.3f}] | "
            f"{r['sink08']:.3f} [{lo8:.3f}, {hi8:.3f}] | {r['p0_mass_mean']:.3f} | "
            f"{r['massive_layer']} | {r['max_ratio']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), help="registry keys")
    parser.add_argument(
        "--rounded", nargs="+", choices=("q4_0", "q4_1", "q8_0"),
        help="instead: each model as loaded and rounded again to these GGUF types, into "
        "docs/sinks/rounding/ (a sensitivity to storage precision, not a bound)",
    )  # fmt: skip
    parser.add_argument("--force", action="store_true", help="measure models already done")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1)")
    args = parser.parse_args(argv)
    from attn_sink_circuits.threads import set_threads

    set_threads(args.threads)
    selection = select_texts()
    if args.rounded:
        for key in args.models:
            run_rounded(key, args.rounded, selection)
        rows = [json.loads(p.read_text(encoding="utf-8"))["summary"]
                for p in sorted(ROUNDED.glob("*/summary.json"))]  # fmt: skip
        (ROUNDED / "table.md").write_text(rounding_table(rows), encoding="utf-8")
        print(rounding_table(rows))
        return 0
    for key in args.models:
        print(run_model(key, selection, OUT, args.force), flush=True)
    print("README tables", "updated" if update_readme() else "not updated (no markers)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
