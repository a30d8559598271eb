"""Write data/texts/python_reference.jsonl: prose paragraphs of the Python Language Reference
help topics shipped with CPython (pydoc_data.topics, PSF License), at least 60 words each."""

import json
import re
import sys
from pathlib import Path
from pydoc_data.topics import topics

MIN_WORDS = 60


def paragraphs() -> list[dict]:
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
            out.append({"text": text, "source": f"pydoc_data.topics[{name!r}]"})
    return out


if __name__ == "__main__":
    path = Path(__file__).resolve().parents[1] / "data" / "texts" / "python_reference.jsonl"
    rows = paragraphs()
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(rows)} paragraphs (Python {sys.version.split()[0]}) -> {path}")
