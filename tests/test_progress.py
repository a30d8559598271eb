"""Progress on the long commands (issue 34 item 6): `claims`, `trigger`, `faithfulness` and
`export --mib-sizes` show one bar on stderr (`attn_sink_circuits.runs.steps.Steps`) that names each step
as it runs, while stdout keeps only what the command prints; an interrupt closes the bar first,
so the one-line message comes last."""

from __future__ import annotations

import json

import pytest
from test_cli_mib import FAST, ROWS  # pairs of three lengths; a quick discover
from test_mib import FLIP  # pairs of one length

from attn_sink_circuits import cli
from attn_sink_circuits.cli import loading
from attn_sink_circuits.discovery.areas import MIB_FRACTIONS
from attn_sink_circuits.models.planted import P0_TEXTS, planted_p0_model

BAR = ("\r", "%|", "it/s", "s/it")
"""What only a progress bar writes: none of it may reach stdout."""


def _no_bar(out: str) -> None:
    assert not any(mark in out for mark in BAR), out


def _shows(err: str, desc: str, steps: list[str]) -> None:
    """The bar `desc` named every step and ended at its total."""
    assert f"{desc}: 100%" in err and f"{len(steps)}/{len(steps)}" in err, err
    for step in steps:
        assert f", {step}]" in err, (step, err)


@pytest.fixture(scope="module")
def run(tiny, tmp_path_factory):
    """A `discover --protocol mib` run on the tiny model: a circuit and its importance file."""
    folder = tmp_path_factory.mktemp("progress")
    pairs = folder / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loading, "load", lambda args: tiny)
        argv = ["discover", "--pairs", str(pairs), "--protocol", "mib", *FAST]
        assert cli.main([*argv, "--out", str(folder / "run")]) == 0
    return folder / "run"


def test_export_mib_sizes_names_each_size(run, tmp_path, capsys):
    capsys.readouterr()
    out = tmp_path / "sizes"
    assert cli.main(["export", str(run), "--format", "mib", "--mib-sizes", "--out", str(out)]) == 0
    got = capsys.readouterr()
    assert got.out == f"{out} (10 binary circuits at MIB's sizes, ranked by signed score)\n"
    _shows(got.err, "MIB sizes", [f"k={k:g}" for k in MIB_FRACTIONS])


def test_faithfulness_names_its_steps(run, tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(loading, "load", lambda args: tiny)
    capsys.readouterr()
    pairs = tmp_path / "flip.jsonl"
    pairs.write_text("".join(json.dumps(r) + "\n" for r in FLIP))
    argv = ["faithfulness", str(run / "circuit.json"), "--pairs", str(pairs), "--n-random", "2",
            "--n-boot", "10", "--out", str(tmp_path)]  # fmt: skip
    assert cli.main(argv) == 0
    got = capsys.readouterr()
    _shows(got.err, "faithfulness", ["clean run", "circuits"])
    _no_bar(got.out)
    lines = got.out.splitlines()
    assert lines[0].split()[0] == "circuit" and lines[-1] == f"wrote {tmp_path}/faithfulness.json"
    assert json.loads((tmp_path / "faithfulness.json").read_text())["n_texts"] == len(FLIP)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return planted_p0_model(folder=tmp_path_factory.mktemp("planted"), amplify=10)


def test_judge_saved_on_texts_names_the_tokens_step_too(planted, capsys):
    from attn_sink_circuits.core.tokens import token_rows
    from attn_sink_circuits.discovery import DiscoveryConfig, circuit_graph, discover, judge_saved
    from attn_sink_circuits.discovery.saved import JUDGE_STEPS
    from attn_sink_circuits.patching.metrics import p0_attention

    model, texts = planted.model, list(P0_TEXTS)
    fit, held = token_rows(model, texts[:5], 20), token_rows(model, texts[5:], 20)
    cfg = DiscoveryConfig(n_curve=3, n_random=1, n_boot=5, n_stability=1, n_exact_texts=1,
                          max_exact=2, mib_areas=False)  # fmt: skip
    metric = p0_attention(list(planted.sink_layers))
    found = discover(model, fit, held, metric, config=cfg)
    spec = {"metric": "p0_attention", "layers": list(planted.sink_layers)}
    graph = circuit_graph(found, model, data="planted", metric_spec=spec)
    capsys.readouterr()
    got = judge_saved(model, graph, texts[5:], n_random=2, n_boot=10, progress=True)
    assert got["n_texts"] == 3
    _shows(capsys.readouterr().err, "faithfulness", list(JUDGE_STEPS))
    judge_saved(model, graph, texts[5:], n_random=2, n_boot=10)  # quiet by default
    assert capsys.readouterr().err == ""


def test_claims_names_each_measurement(planted, tmp_path, monkeypatch, capsys):
    from attn_sink_circuits.studies.claims.pipeline import P0_STEPS

    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(P0_TEXTS) + "\n")
    monkeypatch.setattr(loading, "load", lambda args: planted.model)
    out = tmp_path / "out"
    argv = ["claims", "--texts", str(texts), "--out", str(out), "--n-tokens", "24"]
    assert cli.main(argv) == 0
    got = capsys.readouterr()
    _shows(got.err, "claims", list(P0_STEPS))
    _no_bar(got.out)
    assert "| `cone.p0_attention_output_larger` |" in got.out
    assert got.out.endswith(f"report: {out / 'report.html'}\n")
    seconds = json.loads((out / "summary.json").read_text())["seconds"]
    assert list(seconds) == list(P0_STEPS)  # each measurement timed


def test_claims_trigger_names_each_model(tmp_path, capsys):
    assert cli.main(["claims", "--trigger", "--trigger-steps", "3", "--out", str(tmp_path)]) == 0
    got = capsys.readouterr()
    _shows(got.err, "trigger claims", ["softmax 1x1", "relu 1x1", "softmax 2x2", "hand-set ReLU"])
    _no_bar(got.out)
    assert got.out.endswith(f"report: {tmp_path / 'report.html'}\n")


TRIGGER = ["trigger", "--attention", "softmax", "relu", "--seeds", "0", "--steps", "3",
           "--d-model", "8"]  # fmt: skip


def test_trigger_names_each_run(tmp_path, capsys):
    out = tmp_path / "t"
    assert cli.main([*TRIGGER, "--out", str(out)]) == 0
    got = capsys.readouterr()
    _shows(got.err, "trigger runs", ["softmax_1x1_seed0", "relu_1x1_seed0"])
    _no_bar(got.out)
    lines = got.out.splitlines()
    assert lines[0].split()[:3] == ["attention", "size", "seeds"]
    assert lines[-2].startswith("wrote ") and lines[-1].startswith("removed the saved runs")


def test_an_interrupt_closes_the_bar_before_the_message(tmp_path, monkeypatch, capsys):
    import attn_sink_circuits.studies.trigger.experiment as ex

    real = ex.train_model

    def second_interrupted(*args, **kwargs):
        if args[1].attention == "relu":
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(ex, "train_model", second_interrupted)
    assert cli.main([*TRIGGER, "--out", str(tmp_path / "t")]) == 130
    err = capsys.readouterr().err
    assert "trigger runs:  50%" in err and ", relu_1x1_seed0]" in err
    last = err.split("\n")[-2]  # the message is the last line, nothing drawn after it
    assert last.startswith("circuits trigger: interrupted") and err.endswith(
        "--resume to continue\n"
    )
