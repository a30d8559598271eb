"""Long-trace generation: KV-cached greedy decoding, resuming, and the checks on trace files."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from attn_sink_circuits.core.identity import model_info, record_info, weights_sha256
from attn_sink_circuits.core.traces import Problem, read_traces
from attn_sink_circuits.decoding import Decoding, prompt_ids
from attn_sink_circuits.generation import generate_long_traces, load_traces, write_traces

PROBLEMS = [Problem(0, "What is 2 + 3?", 5), Problem(1, "Name a colour."), Problem(2, "7 - 4?", 3)]


def uncached_greedy(model, prompt: list[int], n_new: int, banned: int | None = None) -> list[int]:
    """Argmax decoding through the bridge, a full forward each step (no KV cache)."""
    seq = torch.tensor([prompt])
    with torch.no_grad():
        for _ in range(n_new):
            logits = model(seq)[:, -1]
            if banned is not None:
                logits[:, banned] = float("-inf")
            seq = torch.cat([seq, logits.argmax(-1, keepdim=True)], 1)
    return seq[0].tolist()


def test_cached_traces_equal_uncached_decoding_and_resume(tiny, tmp_path):
    out = tmp_path / "t.jsonl"
    first = generate_long_traces(
        tiny, PROBLEMS[:2], out, Decoding(max_new_tokens=12), progress=False
    )
    for p, t in zip(PROBLEMS, first, strict=False):
        prompt = prompt_ids(tiny, p.problem)
        assert t.tokens == uncached_greedy(tiny, prompt, len(t.tokens) - len(prompt))
        g = t.generation
        assert g["new_tokens"] == len(t.tokens) - t.prompt_len <= 12
        assert g["kv_cache"] and g["weights_sha256"] == weights_sha256(tiny)
        assert g["tokens_per_s"] > 0 and g["peak_rss_mib"] > 0 and g["seconds"] > 0
        assert (g["model"], g["decoding"], g["max_new_tokens"], g["seed"]) == (
            "tiny",
            "greedy",
            12,
            0,
        )
        assert g["stop_at_eos"] is True and "natural_end" not in g
        assert {"date", "torch", "transformers", "transformer_lens", "gguf_sha256", "dtype"} <= set(
            g
        )
    assert read_traces(out) == first
    # Resume: the two traces on file are kept as they are (same timings), one is added.
    every = generate_long_traces(tiny, PROBLEMS, out, Decoding(max_new_tokens=12), progress=False)
    assert every[:2] == first
    assert [t.id for t in read_traces(out)] == [0, 1, 2]
    # Another setting cannot resume into the same file.
    with pytest.raises(ValueError, match="max_new_tokens: 12 vs 8"):
        generate_long_traces(tiny, PROBLEMS, out, Decoding(max_new_tokens=8), progress=False)
    with pytest.raises(ValueError, match=r"problems \[1\] whose text differs"):
        generate_long_traces(
            tiny, [Problem(1, "Another?")], out, Decoding(max_new_tokens=12), progress=False
        )


def test_eos_suppressed_traces_are_full_length(tiny, tmp_path):
    eos = tiny.tokenizer.eos_token_id
    traces = generate_long_traces(
        tiny, PROBLEMS[:1], tmp_path / "t.jsonl.gz", Decoding(max_new_tokens=10, stop_at_eos=False),
        progress=False,
    )  # fmt: skip
    t = traces[0]
    assert len(t.tokens) - t.prompt_len == 10
    assert eos not in t.tokens[t.prompt_len :]
    assert t.tokens == uncached_greedy(tiny, t.tokens[: t.prompt_len], 10, banned=eos)
    natural = t.generation["natural_end"]
    assert natural is None or 0 <= natural < 10
    assert t.generation["stop_at_eos"] is False
    assert read_traces(tmp_path / "t.jsonl.gz") == traces


@pytest.mark.parametrize("stop_at_eos", [True, False])
def test_batched_traces_equal_one_at_a_time(tiny, tmp_path, stop_at_eos):
    """Left-padded batches (prompts of different lengths) decode the same tokens, natural ends
    and EOS cuts as one problem at a time; the file is written after each batch."""
    one = Decoding(max_new_tokens=16, stop_at_eos=stop_at_eos)
    single = generate_long_traces(tiny, PROBLEMS, tmp_path / "one.jsonl", one, progress=False)
    assert len({t.prompt_len for t in single}) > 1  # padding is exercised
    out = tmp_path / "batched.jsonl"
    batched = generate_long_traces(tiny, PROBLEMS, out, replace(one, batch_size=2), progress=False)
    for a, b in zip(single, batched, strict=True):
        assert (a.tokens, a.prompt_len, a.completion) == (b.tokens, b.prompt_len, b.completion)
        assert a.generation.get("natural_end") == b.generation.get("natural_end")
        assert b.generation["new_tokens"] == len(b.tokens) - b.prompt_len
    assert [t.generation["batch_size"] for t in batched] == [2, 2, 1]
    assert read_traces(out) == batched
    if not stop_at_eos:
        assert {len(t.tokens) - t.prompt_len for t in batched} == {16}


def test_a_batch_cuts_each_trace_after_its_own_eos(tiny):
    """A row that ends early is padded on (with EOS here) by `generate`; its trace keeps its
    tokens up to and with its first EOS."""
    from attn_sink_circuits import decoding

    eos = tiny.tokenizer.eos_token_id
    assert decoding._until_eos([5, 6, eos, eos, eos], [eos]) == [5, 6, eos]
    assert decoding._until_eos([5, 6, 7], [eos]) == [5, 6, 7]


def test_too_long_for_the_context_is_refused_before_generating(tiny, tmp_path):
    out = tmp_path / "t.jsonl"
    with pytest.raises(ValueError, match="model's context is 256"):
        generate_long_traces(tiny, PROBLEMS, out, Decoding(max_new_tokens=250), progress=False)
    assert not out.exists()
    with pytest.raises(ValueError, match="problem ids repeat"):
        generate_long_traces(
            tiny, [PROBLEMS[0]] * 2, out, Decoding(max_new_tokens=4), progress=False
        )
    with pytest.raises(FileNotFoundError, match="does not exist"):
        generate_long_traces(tiny, PROBLEMS, tmp_path / "no" / "t.jsonl", progress=False)
    with pytest.raises(ValueError, match="max_new_tokens must be >= 1"):
        generate_long_traces(tiny, PROBLEMS, out, Decoding(max_new_tokens=0), progress=False)


def test_trace_files_from_another_model_are_refused(tiny, tmp_path):
    from attn_sink_circuits.models.tiny import tiny_model

    out = tmp_path / "t.jsonl"
    (trace,) = generate_long_traces(
        tiny, PROBLEMS[:1], out, Decoding(max_new_tokens=4), progress=False
    )
    assert load_traces(out, tiny) == [trace]
    other = tiny_model(seed=1, folder=tmp_path / "other")
    with pytest.raises(ValueError, match="made by weights"):
        load_traces(out, other)
    cases = {
        "outside this model's vocabulary": replace(trace, tokens=[*trace.tokens, 10**6]),
        "context is 256": replace(trace, tokens=trace.tokens * 40),
    }
    for message, bad in cases.items():
        write_traces([bad], out)
        with pytest.raises(ValueError, match=message):
            load_traces(out, tiny)
    gguf = replace(trace, generation={**trace.generation, "gguf_sha256": "ab" * 32})
    write_traces([gguf], out)
    record_info(tiny, replace(model_info(tiny), gguf_sha256="cd" * 32))
    try:
        with pytest.raises(ValueError, match="comes from GGUF abababab"):
            load_traces(out, tiny)
    finally:
        record_info(tiny, replace(model_info(tiny), gguf_sha256=None))
    out.write_text(json.dumps(trace.to_dict())[:50] + "\n")
    with pytest.raises(ValueError, match="t.jsonl:1: not a trace record"):
        read_traces(out)


def test_generate_command_checks_its_arguments_before_the_model_loads(
    tmp_path, capsys, monkeypatch
):
    from attn_sink_circuits import cli, models

    def load_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(models, "load_model", load_model)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n')
    cases = {
        str(tmp_path): "is a folder",
        str(tmp_path / "t.txt"): "give a .jsonl (or .jsonl.gz) file name",
        str(tmp_path / "no" / "t.jsonl"): "does not exist; create it first",
        str(bad): "bad.jsonl:1: not a trace record",
    }
    for out, message in cases.items():
        assert cli.main(["generate", "--out", out, "--n", "2"]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert cli.main(["generate", "--out", str(tmp_path / "t.jsonl"), "--n", "49"]) == 2
    assert "n is 49 but" in capsys.readouterr().err
    for argv in (["--threads", "0"], ["--dtype", "int8"], ["--max-new-tokens", "-1"]):
        with pytest.raises(SystemExit):
            cli.main(["generate", "--out", str(tmp_path / "t.jsonl"), *argv])


@pytest.mark.slow
def test_generate_command_resumes_a_file(tmp_path, capsys):
    from attn_sink_circuits import cli

    out = tmp_path / "t.jsonl"
    argv = ["generate", "--model", "smollm2-135m", "--out", str(out), "--max-new-tokens", "4"]
    assert cli.main([*argv, "--n", "1", "--threads", "1"]) == 0
    (first,) = read_traces(out)
    assert "resuming" not in capsys.readouterr().err
    assert cli.main([*argv, "--n", "2"]) == 0
    said = capsys.readouterr()
    assert f"resuming {out}: 1 of 2 problems already there" in said.err
    assert "2 traces" in said.out
    traces = read_traces(out)
    assert [t.id for t in traces] == [first.id, traces[1].id] and traces[0] == first
    # Other settings cannot resume into the file.
    assert cli.main([*argv, "--n", "2", "--no-stop-at-eos"]) == 2
    assert "stop_at_eos: True vs False" in capsys.readouterr().err
    # Without EOS every trace is exactly --max-new-tokens long.
    long = tmp_path / "long.jsonl.gz"
    assert (
        cli.main([*argv[:-3], str(long), "--max-new-tokens", "6", "--n", "1", "--no-stop-at-eos"])
        == 0
    )
    (trace,) = read_traces(long)
    assert len(trace.tokens) - trace.prompt_len == 6 and "natural_end" in trace.generation
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
