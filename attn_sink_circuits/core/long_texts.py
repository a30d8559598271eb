"""Write `data/texts/long.jsonl`: six long natural texts (4k-16k tokens) of four kinds, for the
KV-cache evaluation (`attn_sink_circuits.studies.kv`), from files that ship with CPython and
Debian (nothing is downloaded, nothing is repeated); `python -m attn_sink_circuits.core.long_texts`:

    prose    two Python Language Reference help topics, whole (`pydoc_data.topics`, PSF License)
    code     the head of two CPython stdlib modules, as written (`Lib/*.py`, PSF License)
    licence  the GNU GPL version 3, verbatim (Debian's /usr/share/common-licenses/GPL-3; the
             licence allows verbatim copies)
    german   the German Vim tutor, verbatim (Debian vim-runtime, Vim license: LICENSE-vim.txt)

Each text is cut at the last blank line before MAX_CHARS characters (a whole paragraph, block or
function last). Every line is a JSON object with `text`, `kind` and `source`, as in the other
files of data/texts (see its README.md). Deterministic given the same source files (CPython
3.11.7, base-files' common-licenses, vim-runtime 9.0.1378).
"""

from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path
from pydoc_data.topics import topics

from attn_sink_circuits.core.mix_texts import VIM_TUTOR, replace_text, writer_main
from attn_sink_circuits.core.texts import DATA

MAX_CHARS = 48_000
"""At most this many characters a text: <= ~16k tokens for every offline tokenizer (code runs
at ~3 characters a token, English prose at ~4.5)."""
MIN_CHARS = 30_000
"""At least this many: >= ~4k tokens for every offline tokenizer (German at ~2.8 characters a
token is the densest kind)."""
TOPICS = ("specialnames", "compound")
MODULES = ("argparse", "difflib")
GPL = Path("/usr/share/common-licenses/GPL-3")


def cut(text: str) -> str:
    """`text` up to its last blank line before MAX_CHARS (whole if shorter); refuses a text
    shorter than MIN_CHARS."""
    text = text.strip("\n")
    if len(text) > MAX_CHARS:
        text = text[: text.rfind("\n\n", 0, MAX_CHARS)]
    if len(text) < MIN_CHARS:
        raise ValueError(f"a text of {len(text)} characters is below MIN_CHARS ({MIN_CHARS})")
    return text


def texts() -> list[dict]:
    """The six texts, in order: two prose, two code, the licence, the German tutor."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    rows = [
        {"text": cut(topics[name]), "kind": "prose", "source": f"pydoc_data.topics[{name!r}]"}
        for name in TOPICS
    ]
    for name in MODULES:
        source = (stdlib / f"{name}.py").read_text(encoding="utf-8")
        rows.append({"text": cut(source), "kind": "code", "source": f"Lib/{name}.py (head)"})
    rows.append(
        {"text": cut(GPL.read_text()), "kind": "licence", "source": "common-licenses/GPL-3"}
    )
    german = cut(VIM_TUTOR.read_text(encoding="utf-8"))
    rows.append({"text": german, "kind": "german", "source": "vim-runtime tutor/tutor.de.utf-8"})
    return rows


def write(out: Path = DATA / "long.jsonl") -> str:
    """`texts()` into `out` (replaced as a whole); one line saying what was written."""
    rows = texts()
    replace_text(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    sizes = ", ".join(f"{r['kind']} {len(r['text']):,}" for r in rows)
    return f"Python {sys.version.split()[0]}: {len(rows)} texts ({sizes} characters) -> {out}"


def main(argv: list[str] | None = None) -> int:
    return writer_main("attn_sink_circuits.core.long_texts", __doc__, write, argv)


if __name__ == "__main__":
    raise SystemExit(main())
