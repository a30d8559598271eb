"""Reading the line files the library reads and writes (texts, problems, traces: one record a
line), with one rule for where a line ends.

Lines end at "\\n" only (a "\\r" before it is dropped, for CRLF files). `str.splitlines` also ends
a line at U+2028, U+2029, U+0085 and other separators that JSON writers leave raw inside
strings, so a trace or text holding one would not read back. Every error names the file (and
the line): bad UTF-8, bad JSON, a record that is not an object. Imports no model code, so the
CLI checks its files before it loads torch.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

JSONL_SUFFIXES = (".jsonl", ".jsonl.gz")
"""Names of JSONL files (gzip-compressed when they end in .gz)."""


def split_lines(text: str) -> list[str]:
    """`text` cut at each "\\n" (a trailing "\\r" dropped; no empty last line for a final
    "\\n")."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def read_text(path: str | Path) -> str:
    """The UTF-8 text of the file at `path` (decompressed first when its name ends in .gz); a
    ValueError naming the file and the byte when it is not UTF-8 or not gzip."""
    path = Path(path)
    raw = path.read_bytes()
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise ValueError(f"{path}: not a complete gzip file ({err})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{path}: not UTF-8 text ({err.reason} at byte {err.start}); save it as UTF-8"
        ) from None


def read_lines(path: str | Path) -> list[tuple[int, str]]:
    """The non-blank lines of the file at `path` with their 1-based line numbers."""
    return [(n, line) for n, line in enumerate(split_lines(read_text(path)), 1) if line.strip()]


def json_object(path: str | Path, number: int, line: str, fix: str) -> dict:
    """Line `number` of `path` parsed as a JSON object; else a ValueError "PATH:N: FIX (why)",
    where `fix` says what every line must be."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{path}:{number}: {fix} (not JSON: {err.msg}, column {err.colno})"
        ) from None
    if not isinstance(record, dict):
        kind = {list: "a list", str: "a string", bool: "true/false", type(None): "null"}
        raise ValueError(
            f"{path}:{number}: {fix} (this line is {kind.get(type(record), 'a number')})"
        )
    return record


__all__ = ["JSONL_SUFFIXES", "json_object", "read_lines", "read_text", "split_lines"]
