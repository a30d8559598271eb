"""The tables of docs/sinks/README.md from the papers' protocols' run folders (every number a
make_docs value mark on its run): Gu et al.'s sink rate beside the published, four ways of
counting it, Sun et al.'s massive activations beside the published."""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path

OUT = Path("docs") / "sinks"
"""The run folders (one per model) and the README the tables go in."""
MODELS = ("smollm2-135m", "qwen2.5-0.5b", "gemma-3-270m", "qwen2.5-1.5b")
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
