"""Docs made from runs: every marked number and table in the Markdown docs is filled in from
the committed run folders, so a number in the docs is the number a named run wrote.

Two kinds of marks (HTML comments, invisible when the Markdown is rendered):

    <!--v docs/p0/smollm2-135m heldout_faithfulness .2f-->0.82<!--/v-->
        one value: RUN (a run folder holding summary.json, or a .json file), KEY (a dotted path
        into the document; in a run folder's summary.json a first segment not found at the top
        is looked up under "summary"; integers index lists), FORMAT (a Python format spec,
        e.g. `.2f`, `,d`, `.1%`; `s` for text; `min` for seconds shown as whole minutes, `minsec`
        as minutes and seconds)
    <!--table NAME ARG ...-->
    ...
    <!--/table-->
        a whole table, made by the function registered under NAME in TABLES from the ARGs
        (run folders; `include FILE [COLUMN ...]` copies a Markdown table a run wrote)

    python scripts/make_docs.py           # rewrite every marked doc in place (atomically)
    python scripts/make_docs.py --check   # exit 1 and list each mark that differs from its run
                                          # and each typed number on a page of STRICT_PAGES
    python scripts/make_docs.py --typed   # typed numbers per page (--typed PAGE: each one)

A typed number is a number in a page's prose (README.md, docs/*/*.md) outside code, marks,
link targets, versions, model names, dates, references, file names and the allow-listed
CONSTANTS (`typed_numbers`); `--check` fails on them for the pages in STRICT_PAGES only.

`tests/test_docs_from_runs.py` runs the check, so a number typed by hand over a mark, or a run
re-made without regenerating the docs, fails the tests.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path

from attn_sink_circuits.models.registry import display_name

ROOT = Path(__file__).resolve().parent.parent

VALUE = re.compile(r"<!--v (?P<run>\S+) (?P<key>\S+) (?P<fmt>\S+?)-->(?P<text>.*?)<!--/v-->")
TABLE = re.compile(
    r"(?P<open><!--table (?P<name>\S+)(?P<args>(?: \S+)*)-->\n)(?P<body>.*?)(?P<close><!--/table-->)",
    re.S,
)


def load_doc(run: str) -> dict:
    """The JSON document behind RUN: `RUN/summary.json` for a folder, else the file itself."""
    path = ROOT / run
    if path.is_dir():
        path = path / "summary.json"
    if not path.is_file():
        raise ValueError(f"{run}: no such run (looked for {path.relative_to(ROOT)})")
    return json.loads(path.read_text(encoding="utf-8"))


def lookup(doc: dict, key: str):
    """The value at dotted `key` in `doc` (a run summary's first segment falls back to
    doc["summary"])."""
    parts = key.split(".")
    if parts[0] not in doc and isinstance(doc.get("summary"), dict):
        doc = doc["summary"]
    value = doc
    for part in parts:
        try:
            value = value[int(part)] if isinstance(value, list) else value[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ValueError(f"key {key!r}: no {part!r} there") from None
    return value


def render_value(run: str, key: str, fmt: str) -> str:
    value = lookup(load_doc(run), key)
    if value is None:
        return "n/a"
    if fmt == "s":
        return str(value)
    if fmt == "min":  # seconds shown as whole minutes
        return f"{value / 60:.0f} min"
    if fmt == "minsec":  # seconds shown as minutes and seconds
        minutes, seconds = divmod(round(value), 60)
        return f"{minutes} min {seconds} s"
    return format(value, fmt)


# ---------------------------------------------------------------------------------------------
# Tables


def _ci(summary: dict, key: str, digits: int = 2) -> str:
    low, high = summary[key]
    return f"{low:.{digits}f}-{high:.{digits}f}"


def p0_headline(*runs: str) -> str:
    """One row a P0 edge-circuit run: edges, held-out faithfulness with its interval, |1 - f|,
    random circuits of the same size, the complement, edge stability."""
    rows = [
        "| model | run | edges (of all) | held-out f (95 % CI) | abs(1 - f) | random, same size "
        "| complement | edge stability |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        s = lookup(load_doc(run), "summary")
        f = s["heldout_faithfulness"]
        rows.append(
            f"| {display_name(s['model'])} | `{run}` | {s['edge_circuit_edges']:,} of "
            f"{s['edge_circuit_of_all_edges']:,} | {f:.2f} ({_ci(s, 'heldout_faithfulness_ci')}) "
            f"| {abs(1 - f):.2f} | {s['random_faithfulness_mean']:.3f} +- "
            f"{s['random_faithfulness_sd']:.3f} | {s['complement_faithfulness']:.3f} "
            f"| {s['edge_stability_mean']:.2f} |"
        )
    return "\n".join(rows)


def _claims(name: str) -> Callable[..., str]:
    """A table of `attn_sink_circuits.studies.claims.compare` (NAME_markdown) over run folders given from ROOT."""

    def make(*runs: str) -> str:
        from attn_sink_circuits.studies.claims import compare

        return getattr(compare, f"{name}_markdown")(*(ROOT / r for r in runs))

    return make


def include(path: str, *columns: str) -> str:
    """A Markdown table a run wrote (e.g. `docs/emergence/sinks-8l/runs.md`), as it is or with
    only the named COLUMNS, in their order."""
    file = ROOT / path
    if not file.is_file():
        raise ValueError(f"no file {path}")
    lines = file.read_text(encoding="utf-8").strip().splitlines()
    if not columns:
        return "\n".join(lines)
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    missing = [c for c in columns if c not in cells[0]]
    if missing:
        raise ValueError(f"{path} has no column {', '.join(missing)}; it has {', '.join(cells[0])}")
    keep = [cells[0].index(c) for c in columns]
    rows = [cells[0], ["---"] * len(cells[0]), *cells[2:]]
    return "\n".join("| " + " | ".join(row[i] for i in keep) + " |" for row in rows)


def kv_table(run: str, experiment: str) -> str:
    """One `attn_sink_circuits.studies.kv` experiment of a run (`python -m attn_sink_circuits.studies.kv.streaming`): a row per setting
    (policy, the first tokens kept, what stood in them, keys a query reads), the perplexity per
    text row of `data/texts/long.jsonl` and pooled over the texts."""
    doc = load_doc(run)
    rows = [r for r in doc["rows"] if r["experiment"] == experiment]
    if not rows:
        raise ValueError(f"{run} has no {experiment!r} rows")
    texts = sorted({r["text"] for r in rows})
    head = ["policy", "budget (keys)"] + [f"text {t}" for t in texts if t >= 0] + ["pooled"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in (p for p in doc["pooled"] if p["experiment"] == experiment):
        fields = ("first", "policy", "budget", "sinks", "positions", "sink_share")
        same = [r for r in rows if all(r.get(k) == p.get(k) for k in fields)]
        by_text = {r["text"]: r["perplexity"] for r in same}
        name = p["policy"] + (
            f", {p['sinks']} first tokens" if p["policy"] == "streaming_llm" else ""
        )
        name += ", first 4 -> newlines" if p["first"] == "newlines" else ""
        name += ", re-indexed" if p.get("positions") == "reindexed" else ""
        name += f", sinks <= {p['sink_share']:.0%} of it" if p.get("sink_share") else ""
        cells = [f"{by_text[t]:.2f}" if t in by_text else "-" for t in texts if t >= 0]
        lines.append(
            f"| {name} | {p['budget']:,} | " + " | ".join([*cells, f"{p['perplexity']:.2f}"]) + " |"
        )
    return "\n".join(lines)


def kv_blocking(run: str) -> str:
    """The blocking experiment of a run (`python -m attn_sink_circuits.studies.kv.streaming`, `attn_sink_circuits.studies.kv.blocking`):
    per target, the perplexity pooled over texts with the sinks blocked and with each control
    (mean and range over seeds), and the change against nothing blocked."""
    doc = load_doc(run)
    pooled = [p for p in doc["pooled"] if p["experiment"] == "blocking"]
    if not pooled:
        raise ValueError(f"{run} has no 'blocking' rows")
    base = next(p["perplexity"] for p in pooled if p["target"] == "none")
    texts = next(p["texts"] for p in pooled if p["target"] == "none")
    lines = [f"| blocked | perplexity ({texts} text(s) pooled) | change |", "|---|---|---|",
             f"| nothing | {base:.2f} | |"]  # fmt: skip
    what = {"sink": "the sinks", "keys": "as many random keys per query",
            "tokens": "as many random positions"}  # fmt: skip
    for target in ("primary", "secondary"):
        for control in ("sink", "keys", "tokens"):
            ppl = [p["perplexity"] for p in pooled
                   if p["target"] == target and p["control"] == control]  # fmt: skip
            if not ppl:
                continue
            mean = sum(ppl) / len(ppl)
            cell = f"{mean:.2f}" + (f" [{min(ppl):.2f}, {max(ppl):.2f}], {len(ppl)} seeds"
                                    if len(ppl) > 1 else "")  # fmt: skip
            label = f"{target}: {what[control]}"
            lines.append(f"| {label} | {cell} | {100 * (mean / base - 1):+.1f} % |")
    return "\n".join(lines)


def kv_retrieval(run: str, field: str = "accuracy") -> str:
    """The passkey check of a run (`python -m attn_sink_circuits.studies.kv.passkey_check`): a row per policy, a column per
    budget; `field` accuracy (correct / n = accuracy [Wilson 95 %], or "not applicable") or
    nll_kept (mean answer NLL in nats / share of the key's tokens the cache kept)."""
    pooled = load_doc(run)["pooled"]
    budgets = list(dict.fromkeys(p["budget_spec"] for p in pooled if p["policy"] != "full"))
    head = ["policy", *[f"{b} tokens" if b.isdigit() else b for b in budgets]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for policy in dict.fromkeys(p["policy"] for p in pooled if p["policy"] != "full"):
        cells = []
        for b in budgets:
            p = next(p for p in pooled if p["policy"] == policy and p["budget_spec"] == b)
            if field == "nll_kept":
                cells.append(f"{p['answer_nll']:.2f} / {p['key_kept']:.2f}")
            elif not p["applicable"]:
                cells.append("not applicable")
            else:
                cells.append(f"{p['correct']}/{p['n']} = {p['accuracy']:.2f} "
                             f"[{p['low']:.2f}, {p['high']:.2f}]")  # fmt: skip
        lines.append(f"| {policy} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _area_interval(run: str, summary: dict, area: str) -> list[float] | None:
    """A held-out MIB area's 95 % interval: the run's own, else from the run's
    area_intervals.json that scripts/mib_intervals.py wrote; None for a run with neither."""
    ci = summary.get(f"{area}_heldout_ci")
    later = ROOT / run / "area_intervals.json"
    if ci is None and later.is_file():
        ci = json.loads(later.read_text(encoding="utf-8"))[f"{area}_heldout_ci"]
    return ci


def _area_ci(run: str, summary: dict, area: str, digits: int) -> str:
    """` [lo-hi]`: a held-out MIB area's interval (`_area_interval`), or nothing."""
    return _bracket(_area_interval(run, summary, area), digits)


def _bracket(ci: list[float] | None, digits: int) -> str:
    return "" if ci is None else f" [{ci[0]:.{digits}f}-{ci[1]:.{digits}f}]"


def mib_cells(*runs: str) -> str:
    """One row an IOI run of `scripts/mib_ioi.py`: model, partner, method (with any setting
    that is not its protocol's, `variant_name`), pairs, MIB's CPR /
    CMD on held-out pairs (their 95 % bootstrap interval over pairs where the run saved one;
    fit in brackets) beside MIB's published numbers for that method (GPT-2 / Qwen2.5-0.5B),
    and the circuit this library's size rule picks with its held-out f, abs(1 - f), random
    circuits of its size and its edge stability (the share of bootstrap resamples of the fit
    pairs that keep an edge, averaged over its edges; "-" where a method gives no per-pair
    scores to resample: the mask)."""
    from attn_sink_circuits.discovery.protocol import MIB_PUBLISHED, variant_name

    rows = [
        "| model | partner | method | fit / held-out pairs | CPR held-out (fit) | CMD held-out "
        "(fit) | MIB published CPR / CMD (reference): GPT-2 small; Qwen2.5-0.5B base | "
        "circuit: edges (of all) | "
        "held-out f (95 % CI) | abs(1 - f) | random, same size | edge stability |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        s = load_doc(run)
        pub = [MIB_PUBLISHED[m].get(s["method"]) for m in ("gpt2", "qwen2.5-0.5b")]
        published = "; ".join(f"{p[0]:.2f} / {p[1]:.2f}" if p else "-" for p in pub)
        f = s["heldout_faithfulness"]
        judged = s.get("n_fit_judged", s["n_fit_texts"])  # fit_judged: the curve on fewer
        fit = f"{s['n_fit_texts']:,}" + (f" (curve {judged})" if judged < s["n_fit_texts"] else "")
        rows.append(
            f"| {display_name(s['model'])} | {s['partner']} | {variant_name(s)} | {fit} / "
            f"{s['n_heldout_texts']} | {s['cpr_heldout']:.2f}{_area_ci(run, s, 'cpr', 2)} "
            f"({s['cpr_fit']:.2f}) | {s['cmd_heldout']:.3f}{_area_ci(run, s, 'cmd', 3)} "
            f"({s['cmd_fit']:.3f}) | {published} | {s['n_edges']:,} "
            f"({s['n_edges_total']:,}) | {f:.2f} ({_ci(s, 'heldout_faithfulness_ci')}) | "
            f"{abs(1 - f):.2f} | {s['random_faithfulness_mean']:z.3f} | {_stability(s)} |"
        )
    return "\n".join(rows)


def mib_published(*runs: str) -> str:
    """One row an IOI run: its held-out CPR and CMD with their 95 % intervals, beside MIB's
    published row for the run's method (`MIB_PUBLISHED`: Mueller et al. 2025, on GPT-2 small and
    the Qwen2.5-0.5B base model in bf16, MIB's data; the mask beside UGS, named so). The
    published numbers are a reference on other models, weights and data, never a verdict on
    the run; "-" where MIB has no row for the method (`eap_ig`, this library's)."""
    from attn_sink_circuits.discovery.protocol import MIB_PUBLISHED, variant_name

    rows = [
        "| model | partner | method | fit pairs | CPR held-out [95 % CI] | CMD held-out "
        "[95 % CI] | MIB published CPR / CMD, GPT-2 small | MIB published CPR / CMD, "
        "Qwen2.5-0.5B base (bf16) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        s = load_doc(run)
        name = "ugs" if s["method"] == "mask" else s["method"]
        cells = [display_name(s["model"]), s["partner"], variant_name(s), f"{s['n_fit_texts']:,}"]
        for area, digits in (("cpr", 2), ("cmd", 3)):
            cells.append(f"{s[f'{area}_heldout']:.{digits}f}"
                         f"{_bracket(_area_interval(run, s, area), digits)}")  # fmt: skip
        for published in (MIB_PUBLISHED[m].get(name) for m in ("gpt2", "qwen2.5-0.5b")):
            ugs = " (UGS)" if published and name == "ugs" else ""
            cells.append(f"{published[0]:.2f} / {published[1]:.2f}{ugs}" if published else "-")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _stability(summary: dict) -> str:
    value = summary.get("stability_mean")
    return "-" if value is None or math.isnan(value) else f"{value:.2f}"


def mib_cross_partner(*files: str) -> str:
    """One row a circuit judged under another partner (RUN/under_<partner>.json that
    scripts/mib_cross_partner.py wrote): the run's model, method and partner, the circuit's
    edges, its held-out f with its 95 % interval under its own partner and under the other,
    and random circuits of its size under the other."""
    rows = [
        "| model | method | found on | edges | f, own partner [95 % CI] | judged under | f "
        "[95 % CI] | random, same size |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for path in files:
        doc, run = load_doc(path), load_doc(str(Path(path).parent))
        own, other = run["partner"], doc["provenance"]["settings"]["partner"]
        a, b = doc[own], doc[other]
        f = {k: "{:.2f} [{:.2f}, {:.2f}]".format(d["faithfulness"], *d["faithfulness_ci"])
             for k, d in ((own, a), (other, b))}  # fmt: skip
        rows.append(
            f"| {display_name(run['model'])} | {run['method']} | {own} | {a['n_edges']:,} | {f[own]} | "
            f"{other} | {f[other]} | {b['random_faithfulness']:z.2f} |"
        )
    return "\n".join(rows)


TABLES: dict[str, Callable[..., str]] = {
    "mib_cells": mib_cells,
    "mib_cross_partner": mib_cross_partner,
    "mib_published": mib_published,
    "include": include,
    "kv_retrieval": kv_retrieval,
    "kv_table": kv_table,
    "kv_blocking": kv_blocking,
    "p0_headline": p0_headline,
    "claims_side_by_side": _claims("side_by_side"),
    "claims_counts": _claims("counts"),
    "claims_rows": _claims("rows"),
}
"""Table makers by the NAME a `<!--table NAME ...-->` mark gives; each returns Markdown."""


# ---------------------------------------------------------------------------------------------
# Rendering and checking


def render(text: str, where: str) -> str:
    """`text` with every mark filled in from its run; a bad mark raises one clear line."""

    def value(m: re.Match) -> str:
        try:
            new = render_value(m["run"], m["key"], m["fmt"])
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        return f"<!--v {m['run']} {m['key']} {m['fmt']}-->{new}<!--/v-->"

    def table(m: re.Match) -> str:
        name, args = m["name"], m["args"].split()
        if name not in TABLES:
            raise ValueError(f"{where}: unknown table {name!r}; known: {', '.join(TABLES)}")
        try:
            body = TABLES[name](*args)
        except ValueError as err:
            raise ValueError(f"{where}: table {name}: {err}") from None
        return f"{m['open']}{body}\n{m['close']}"

    return VALUE.sub(value, TABLE.sub(table, text))


def marked_docs() -> list[Path]:
    """The Markdown files under the repository that hold at least one mark (run folders' own
    generated summary.md files hold none)."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [
        p for p in paths if p.is_file() and ("<!--v " in (t := p.read_text()) or "<!--table " in t)
    ]


def differences(path: Path) -> list[str]:
    """One line per stretch of `path` whose text differs from what its runs give."""
    old = path.read_text(encoding="utf-8").splitlines()
    new = render("\n".join(old), str(path.relative_to(ROOT))).splitlines()
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag != "equal":
            have = " / ".join(line.strip() for line in old[i1:i2]) or "(nothing)"
            want = " / ".join(line.strip() for line in new[j1:j2]) or "(nothing)"
            out.append(f"{path.relative_to(ROOT)}:{i1 + 1}: is {have!r}; the runs give {want!r}")
    return out


# ---------------------------------------------------------------------------------------------
# Typed numbers: a number in a page's prose that no run wrote


CONSTANTS: dict[str, tuple[str, str | None, object]] = {
    "95 %": (
        "coverage of every bootstrap interval the docs show",
        "attn_sink_circuits.discovery.evaluation.CI",
        0.95,
    ),
    "[0.9, 1.1]": (
        "the size rule's faithfulness band, option `target_band`",
        "attn_sink_circuits.discovery.config.DiscoveryConfig.target_band",
        (0.9, 1.1),
    ),
    "GPT2-XL 77.00 %": (
        "Gu et al.'s sink rate at epsilon 0.3 for GPT2-XL: Gu et al. 2025, Table 1 (original "
        "weights, their texts; the reference row of attn_sink_circuits.studies.protocols.tables)",
        None,
        None,
    ),
}
"""The short allow-list of constants a page may type: the text as a page writes it -> (what it
is, the code that defines it or None for a published number, its value there). A published
number names its paper and table in the first field; a code source is checked by the tests.
The whole text is the constant: its numbers pass only where a page writes all of it."""

STRICT_PAGES: list[str] = ["README.md"]
"""Pages on which `--check` fails for a typed number (the gate, turned on page by page)."""

GENERATED_PAGES = ("docs/ioi/RESULTS.md",)  # written whole by scripts/ioi_docs.py

_FAMILIES = (
    r"SmolLM2?|Qwen[\d.]*|Gemma(?:-?[123]\b|\s3\b)?|GPT-?2|GPT-?J|GPT-?Neo[X]?|Llama(?:-?[123])?"
    r"|Pythia|Mistral|Mixtral|OPT|Phi(?:-?\d)?|OLMo"
)
_SOFTWARE = r"Python|TransformerLens|PyTorch|torch|CUDA|Debian|Ubuntu"  # never a result here
# (a tool that is also measured, as kvpress, passes only with a full x.y.z version)
_REFERENCE = (  # a paper's Table / Figure capitalised ("tables" is also a kind of text)
    r"issues?|items?|seeds?|sections?|(?-i:Tables?|Figures?|Figs?\.)|appendix|eqs?\.|equations?"
    r"|footnotes?|PRs?|rows?|lines?|arXiv:?"
)
_ITEM = r"#?\d[\w.]*"
_NUMS = (  # "37", "35-37", "35 and 37", "2, 12, 13" (after a comma, not one a word follows)
    rf"{_ITEM}(?:(?:\s*[-–/]\s*|\s+(?:and|or)\s+){_ITEM}"
    rf"|,\s*{_ITEM}(?![ \t]+(?!(?:and|or)\b)[A-Za-z]))*"
)
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"

NOT_A_RESULT: dict[str, re.Pattern] = {
    "list marker": re.compile(r"^\s*\d+[.)](?=\s)", re.M),
    "version": re.compile(
        rf"\b\d+\.\d+\.\d+(?:\.\d+)*\b|(?<=\w)(?:==|>=|<=|~=|<|>)\d+(?:\.\d+)*"
        rf"|\bv\d+(?:\.\d+)*\b|\b(?:{_SOFTWARE})\s+\d+(?:\.\d+)*"
    ),
    "model name": re.compile(
        rf"\b(?:{_FAMILIES})(?:[-_.][A-Za-z0-9.]+)*(?:\s\d+(?:\.\d+)?[MB]\b)?", re.I
    ),
    "date": re.compile(
        rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}\s+{_MONTH}\s+\d{{4}}\b"
        rf"|\b{_MONTH}\s+(?:\d{{1,2}},?\s+)?\d{{4}}\b|et al\.?(?:'s)?,?\s*\(?(?:19|20)\d{{2}}[a-z]?"
    ),
    "reference": re.compile(rf"(?:\b(?:{_REFERENCE})[\s-]*|§\s*){_NUMS}|#\d+\b", re.I),
    "file or path": re.compile(
        r"(?<![^\s(\[\"'])[A-Za-z_.~][^\s()\[\],;\"']*/"
        r"[^\s()\[\],;\"']*[A-Za-z_][^\s()\[\],;\"']*"
        r"|[\w.-]+\.(?:py|md|jsonl?|csv|png|svg|pdf|pt|safetensors|txt|toml|ya?ml|ipynb|gguf|html)\b"
    ),
    "commit": re.compile(r"\b(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"),
    "constant": re.compile(
        "|".join(rf"(?<![\w.]){re.escape(text)}(?![\w.]*\d)" for text in CONSTANTS)
    ),
}
"""Numbers in prose that are not results, each by a named rule; every other number is typed."""

NUMBER = re.compile(r"(?<![\w.])[-+−]?\d(?:[\d,]*\d)?(?:\.\d+)?(?:[eE][-+−]?\d+)?")
"""A number as prose writes it (-0.55, 1,613, 3e-7; "6.5x", "8k" and "1/5" hold numbers); digits
glued to a letter before them are part of a name, not a number (P0, L0.H0, bf16, d64, lr0.006)."""

_HIDDEN = (
    TABLE,
    VALUE,
    re.compile(r"<!--.*?-->", re.S),  # other comments do not render
    re.compile(r"(`+)(?:(?!\n\s*\n).)+?\1", re.S),  # inline code, across a line break
    re.compile(r"</?[A-Za-z][^>\n]*>"),  # HTML tags and autolinks
    re.compile(r"(?<=\])\([^)\s]*(?:\s+\"[^\"]*\")?\)"),  # link and image targets
    re.compile(r"^\s{0,3}\[[^\]]+\]:\s+\S+", re.M),  # reference-style link definitions
    re.compile(r"https?://\S+|\{#[^}]*\}|\[\^[^\]]+\]"),  # bare URLs, heading ids, footnotes
)


def _blank(text: str, start: int, end: int) -> str:
    """`text` with [start, end) turned into spaces, its line breaks kept (lines stay lines)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def _code_block_lines(lines: list[str]) -> set[int]:
    """Indices of the lines of fenced code blocks (fences included) and of indented code blocks
    (4+ spaces after a blank line, outside a list: inside one such a line is the item's text)."""
    code, fence, in_list, prev_blank, prev_code = set(), None, False, True, False
    for i, line in enumerate(lines):
        opened = re.match(r"\s{0,3}(`{3,}|~{3,})", line)
        if fence or opened:
            code.add(i)
            fence = None if fence and line.strip().startswith(fence) else (fence or opened[1])
            continue
        blank = not line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if not blank and indent < 4:
            in_list = bool(re.match(r"\s*(?:[-*+]|\d+[.)])\s", line)) or (in_list and indent > 0)
        is_code = not blank and indent >= 4 and (prev_blank or prev_code) and not in_list
        if is_code or (blank and prev_code):
            code.add(i)
        prev_code = is_code or (blank and prev_code)
        prev_blank = blank
    return code


def prose(text: str) -> str:
    """`text` with all that is not typed prose blanked out: code blocks and inline code, value
    and table marks, comments, HTML tags, link targets, URLs."""
    lines = text.split("\n")
    code = _code_block_lines(lines)
    text = "\n".join(" " * len(line) if i in code else line for i, line in enumerate(lines))
    for pattern in _HIDDEN:
        for m in list(pattern.finditer(text)):
            text = _blank(text, *m.span())
    return text


def typed_numbers(text: str) -> list[tuple[int, str, str]]:
    """(line, number, the line) for each number of `text`'s prose that no rule of NOT_A_RESULT
    excuses."""
    shown = prose(text)
    excused = [m.span() for rule in NOT_A_RESULT.values() for m in rule.finditer(shown)]
    lines, out = text.split("\n"), []
    for m in NUMBER.finditer(shown):
        if not any(a <= m.start() and m.end() <= b for a, b in excused):
            line = shown.count("\n", 0, m.start())
            out.append((line + 1, m[0], lines[line].strip()))
    return out


def typed_pages() -> list[Path]:
    """The pages the typed-number rule reads: README.md, docs/*/README.md and the other prose
    pages docs/*/*.md (not GENERATED_PAGES; run folders' own files lie deeper)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*/*.md"))]
    return [p for p in pages if p.is_file() and str(p.relative_to(ROOT)) not in GENERATED_PAGES]


def typed_report(page: str | None) -> int:
    """`--typed`: the number of typed numbers per page (strict pages marked), or with PAGE each
    one with its line; 2 for a page that is not one of `typed_pages()`."""
    if page is None:
        for path in typed_pages():
            name = str(path.relative_to(ROOT))
            found = typed_numbers(path.read_text(encoding="utf-8"))
            print(f"{len(found):5d}  {name}" + ("  (strict)" if name in STRICT_PAGES else ""))
        return 0
    path = ROOT / page
    if path not in typed_pages():
        known = ", ".join(str(p.relative_to(ROOT)) for p in typed_pages())
        print(f"error: {page} is not a page the rule reads; those are: {known}", file=sys.stderr)
        return 2
    found = typed_numbers(path.read_text(encoding="utf-8"))
    for line, number, text in found:
        print(f"{page}:{line}: {number}  | {text}")
    print(f"{len(found)} typed number(s) in {page}")
    return 0


def strict_failures() -> list[str]:
    """One line per typed number on a page of STRICT_PAGES."""
    pages = [str(p.relative_to(ROOT)) for p in typed_pages()]
    unknown = [page for page in STRICT_PAGES if page not in pages]
    if unknown:
        raise ValueError(f"STRICT_PAGES names {', '.join(unknown)}: not a page the rule reads")
    return [
        f"{page}:{line}: typed number {number} (not from a run, not an allowed constant)"
        for page in STRICT_PAGES
        for line, number, _ in typed_numbers((ROOT / page).read_text(encoding="utf-8"))
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 on a difference"
    )
    parser.add_argument(
        "--typed",
        nargs="?",
        const="",
        metavar="PAGE",
        help="change nothing; count the numbers typed by hand per page, or list PAGE's",
    )
    args = parser.parse_args(argv)
    if args.typed is not None:
        return typed_report(args.typed or None)
    try:
        bad = [line for path in marked_docs() for line in differences(path)]
        bad += strict_failures() if args.check else []
        if not args.check:
            for path in marked_docs():
                text = path.read_text(encoding="utf-8")
                new = render(text, str(path.relative_to(ROOT)))
                if new != text:
                    tmp = path.with_name(f".{path.name}.tmp")
                    tmp.write_text(new, encoding="utf-8")
                    tmp.replace(path)
                    print(f"rewrote {path.relative_to(ROOT)}")
            return 0
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for line in bad:
        print(line)
    print(
        f"{len(bad)} marked line(s) differ from their runs or hold a typed number"
        if bad
        else "docs agree with their runs"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
