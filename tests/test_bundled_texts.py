"""The bundled texts are made by library code (`python -m attn_sink_circuits.core.mix_texts`,
`... .core.long_texts`): the rules that cut and sample them, and, where the source files are the
ones they were made from, the committed files again, byte for byte."""

from __future__ import annotations

import sys

import pytest

from attn_sink_circuits.core import long_texts, mix_texts
from attn_sink_circuits.core.texts import DATA

SAME_SOURCES = (
    sys.version_info[:3] == (3, 11, 7)
    and mix_texts.VIM_TUTOR.is_file()
    and mix_texts.VIM_COPYRIGHT.is_file()
    and long_texts.GPL.is_file()
)
"""The committed files were made with CPython 3.11.7's stdlib and Debian's vim-runtime 9.0."""


def test_a_long_text_is_cut_at_its_last_blank_line_and_a_short_one_refused(monkeypatch):
    monkeypatch.setattr(long_texts, "MAX_CHARS", 30)
    monkeypatch.setattr(long_texts, "MIN_CHARS", 10)
    text = "first paragraph\n\nsecond one\n\nthird paragraph here"
    assert long_texts.cut(text) == "first paragraph\n\nsecond one"
    with pytest.raises(ValueError, match="below MIN_CHARS"):
        long_texts.cut("tiny\n\nx")


def test_the_mix_samples_each_kind_and_refuses_too_few():
    kinds = [[{"text": f"{k}{i}", "kind": k} for i in range(50)] for k in ("a", "b")]
    rows = mix_texts.mix(kinds)
    assert len(rows) == 2 * mix_texts.N_PER_KIND and rows == mix_texts.mix(kinds)  # seeded
    assert sum(r["kind"] == "a" for r in rows) == mix_texts.N_PER_KIND
    assert rows[: mix_texts.N_PER_KIND] != kinds[0][: mix_texts.N_PER_KIND]  # interleaved
    with pytest.raises(ValueError, match="only 3 c texts"):
        mix_texts.mix([[{"text": "x", "kind": "c"}] * 3])


@pytest.mark.skipif(not SAME_SOURCES, reason="not the source files the texts were made from")
def test_the_committed_texts_are_made_again_byte_for_byte(tmp_path):
    assert mix_texts.write(tmp_path).startswith("Python 3.11.7")
    long_texts.write(tmp_path / "long.jsonl")
    for name in ("python_reference.jsonl", "mix.jsonl", "LICENSE-vim.txt", "long.jsonl"):
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name
    written = sorted(p.name for p in tmp_path.iterdir())  # no temporary file left
    assert written == ["LICENSE-vim.txt", "long.jsonl", "mix.jsonl", "python_reference.jsonl"]


def test_a_missing_source_file_is_one_line_and_nothing_is_written(tmp_path, monkeypatch, capsys):
    out = tmp_path / "long.jsonl"
    monkeypatch.setattr(long_texts, "VIM_TUTOR", tmp_path / "no-tutor.txt")
    monkeypatch.setattr(long_texts, "write", lambda: long_texts.texts() and out.write_text("x"))
    with pytest.raises(SystemExit) as stop:
        long_texts.main([])
    assert stop.value.code == 1 and not out.exists()
    err = capsys.readouterr().err
    assert err.startswith("texts not written: ") and "no-tutor.txt" in err and err.count("\n") == 1
