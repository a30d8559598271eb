"""Write the texts the circuit tracers fit and judge on (data/texts/, see its README.md), from
files that ship with CPython, the `tzdata` package and Debian's vim-runtime (nothing is
downloaded); `python -m attn_sink_circuits.core.mix_texts`:

    python_reference.jsonl   English prose: paragraphs of the Python Language Reference help
                             topics (pydoc_data.topics, PSF License), at least 60 words each
    mix.jsonl                four kinds, N_PER_KIND texts each, interleaved (seeded):
                             prose (from python_reference), code (CPython's own stdlib source,
                             PSF License), german (the German Vim tutor, Vim license, verbatim
                             runs of lines), table (tzdata's zone1970.tab and iso3166.tab rows,
                             public domain)

Every line is a JSON object with `text`, `kind` and `source`. Seeded and deterministic given the
same source files (CPython 3.11.7, tzdata 2026.6 / IANA 2026f, vim-runtime 9.0.1378).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import sys
import sysconfig
from importlib import resources
from pathlib import Path
from pydoc_data.topics import topics

from attn_sink_circuits.core.texts import DATA

SEED = 0
MIN_WORDS = 60
"""Prose paragraphs need this many words (>= 64 tokens for every offline model's tokenizer)."""
MIN_CHARS = 400
"""Code, German and table texts need this many characters (>= 64 tokens for every tokenizer:
they tokenize at fewer than 5 characters a token)."""
MAX_CHARS = 1200
N_PER_KIND = 40
CODE_MODULES = (
    "argparse", "ast", "calendar", "csv", "dataclasses", "difflib", "fractions", "functools",
    "heapq", "inspect", "json/decoder", "json/encoder", "pathlib", "pprint", "random", "shlex",
    "statistics", "string", "textwrap", "tokenize",
)  # fmt: skip
VIM_TUTOR = Path("/usr/share/vim/vim90/tutor/tutor.de.utf-8")
VIM_COPYRIGHT = Path("/usr/share/doc/vim-runtime/copyright")


def prose() -> list[dict]:
    """Whole paragraphs of the Language Reference topics; indented blocks (code, grammar,
    tables) and paragraphs with table or prompt characters are left out."""
    out, seen = [], set()
    for name in sorted(topics):
        for block in re.split(r"\n\s*\n", topics[name]):
            lines = block.strip().splitlines()
            if not lines or any(line.startswith(" ") for line in lines):
                continue  # indented: code, grammar, tables
            text = " ".join(" ".join(lines).split())
            if len(text.split()) < MIN_WORDS or any(c in text for c in "|+="):
                continue
            if ">>>" in text or text.count('"') > 12 or text in seen:
                continue
            seen.add(text)
            out.append({"text": text, "kind": "prose", "source": f"pydoc_data.topics[{name!r}]"})
    return out


def code() -> list[dict]:
    """Top-level functions and classes of CPython's own stdlib modules, source as written."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for name in CODE_MODULES:
        source = (stdlib / f"{name}.py").read_text(encoding="utf-8")
        for node in ast.parse(source).body:
            if not isinstance(node, ast.FunctionDef | ast.ClassDef):
                continue
            text = ast.get_source_segment(source, node)
            if MIN_CHARS <= len(text) <= MAX_CHARS:
                out.append({"text": text, "kind": "code", "source": f"Lib/{name}.py:{node.lineno}"})
    return out


def german() -> list[dict]:
    """Runs of whole lines of the German Vim tutor (verbatim), cut at blank lines once they hold
    MIN_CHARS; frame lines (=== and ~~~) end a run."""
    out, run, start = [], [], 0
    lines = VIM_TUTOR.read_text(encoding="utf-8").splitlines()

    def close(end: int) -> None:
        text = "\n".join(run).strip("\n")
        if len(text) >= MIN_CHARS:
            source = f"vim-runtime tutor/tutor.de.utf-8:{start + 1}-{end}"
            out.append({"text": text, "kind": "german", "source": source})
        run.clear()

    for i, line in enumerate(lines):
        if re.fullmatch(r"[=~]{20,}", line.strip()):
            close(i)
            continue
        if not run:
            start = i
        run.append(line)
        if not line.strip() and len("\n".join(run)) >= MIN_CHARS:
            close(i)
    close(len(lines))
    return out


def tables() -> list[dict]:
    """Consecutive rows of tzdata's zone1970.tab and iso3166.tab (tab-separated tables), as
    many as reach MIN_CHARS, each chunk with the table's column header."""
    out = []
    zoneinfo = resources.files("tzdata") / "zoneinfo"
    headers = {"zone1970.tab": "codes\tcoordinates\tTZ\tcomments", "iso3166.tab": "code\tcountry"}
    for name, header in headers.items():
        rows = [r for r in (zoneinfo / name).read_text().splitlines() if not r.startswith("#")]
        chunk, first = [], 0
        for i, row in enumerate(rows):
            if not chunk:
                first = i
            chunk.append(row)
            if len("\n".join(chunk)) >= MIN_CHARS:
                source = f"tzdata zoneinfo/{name} rows {first + 1}-{i + 1}"
                out.append({"text": "\n".join([header, *chunk]), "kind": "table", "source": source})
                chunk = []
    return out


def mix(kinds: list[list[dict]]) -> list[dict]:
    """N_PER_KIND texts of each kind (a seeded sample), in a seeded order."""
    rng = random.Random(SEED)
    rows = []
    for texts in kinds:
        if len(texts) < N_PER_KIND:
            raise ValueError(f"only {len(texts)} {texts[0]['kind']} texts; need {N_PER_KIND}")
        rows += rng.sample(texts, N_PER_KIND)
    rng.shuffle(rows)
    return rows


def vim_license() -> str:
    """The Vim license text (it must travel with parts of Vim), from Debian's copyright file."""
    text = VIM_COPYRIGHT.read_text(encoding="utf-8")
    body = text.split("\nLicense: Vim\n")[-1].split("\n\n")[0]
    return "\n".join(line[1:] if line != " ." else "" for line in body.splitlines()) + "\n"


def replace_text(path: Path, text: str) -> None:
    """`path` holds `text`, replaced as a whole (through a temporary file beside it)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write(out: Path = DATA) -> str:
    """python_reference.jsonl, mix.jsonl and LICENSE-vim.txt into `out` (each replaced as a
    whole); one line saying what was written."""
    reference = prose()
    rows = [{k: r[k] for k in ("text", "source")} for r in reference]
    replace_text(out / "python_reference.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    by_kind = [reference, code(), german(), tables()]
    replace_text(out / "mix.jsonl", "".join(json.dumps(r) + "\n" for r in mix(by_kind)))
    replace_text(out / "LICENSE-vim.txt", vim_license())
    counts = ", ".join(f"{t[0]['kind']} {len(t)}" for t in by_kind)
    return f"Python {sys.version.split()[0]}: available {counts}; {N_PER_KIND} of each -> {out}"


def writer_main(module: str, doc: str, write_texts, argv: list[str] | None) -> int:
    """A text writer's command (`python -m module`, no options): run `write_texts`, print its
    line; a source file missing or a text refused is one line and exit status 1."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.split("\n\n")[0])
    parser.parse_args(argv)
    try:
        print(write_texts())
    except (OSError, ValueError) as err:
        parser.exit(1, f"texts not written: {err}\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    return writer_main("attn_sink_circuits.core.mix_texts", __doc__, write, argv)


if __name__ == "__main__":
    raise SystemExit(main())
