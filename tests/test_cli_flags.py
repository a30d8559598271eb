"""The command line's flags: renamed ones still work and name their new spelling, an unknown one
gets the command's usage and the nearest flag, `--version`, a description on every command, and
the refusals that need no model come before torch is imported."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import attn_sink_circuits as circuits
from attn_sink_circuits import cli
from attn_sink_circuits.cli import loading
from attn_sink_circuits.cli.renames import RENAMED

ROOT = Path(__file__).resolve().parents[1]
CASES = [(r.old, r.new, c) for r in RENAMED for c in r.commands]
REQUIRED = {"discover": ["--task", "ioi"], "p0": [], "secondary": [], "sinks": [],
            "faithfulness": ["c.json", "--task", "ioi"]}  # fmt: skip


def _value(action) -> list[str]:
    """A value the option takes (none for a switch)."""
    if action.nargs == 0:
        return []
    if action.choices:
        return [list(action.choices)[-1]]
    return ["0.5" if action.type is float else "3"]


@pytest.mark.parametrize(("old", "new", "command"), CASES)
def test_a_renamed_flag_does_what_the_new_one_does_and_says_so(old, new, command, capsys):
    parser = cli.build_parser()
    action = parser.commands[command]._option_string_actions[new]
    base = [command, *REQUIRED[command], "--out", "x"]
    if new.startswith("--no-"):  # a negated switch: set the switch first, so that it changes
        base.append(f"--{new[5:]}")
    value = _value(action)
    parsed = vars(parser.parse_args([*base, new, *value]))
    assert capsys.readouterr().err == ""
    try:
        before = getattr(parser.parse_args(base), action.dest)
    except SystemExit:  # the flag names the command's required input (sinks --texts)
        before = None
    capsys.readouterr()
    again = vars(cli.build_parser().parse_args([*base, old, *value, old, *value]))
    assert again == parsed
    assert again[action.dest] != before  # it changed
    err = capsys.readouterr().err
    assert err.count("\n") == 1  # one note, even when given twice
    assert err.startswith(f"circuits {command}: note: {old} is now {new}")


def test_old_flags_are_hidden_from_help(capsys):
    with pytest.raises(SystemExit):
        cli.main(["p0", "--help"])
    shown = capsys.readouterr().out
    assert "--edge-n-fit" in shown and "--n-fit" not in shown.replace("--edge-n-fit", "")


def test_p0_takes_n_fit_into_its_config(tmp_path, monkeypatch, capsys):
    seen = {}

    def load(args):  # the last step before the model: stop there, keep what reached it
        seen["n_fit"], seen["n_heldout"] = args.edge_n_fit, args.edge_n_heldout
        raise ValueError("stopped before the model")

    monkeypatch.setattr(loading, "load", load)
    argv = ["p0", "--n-fit", "4", "--n-heldout", "5", "--out", str(tmp_path / "o")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert seen == {"n_fit": 4, "n_heldout": 5}
    assert "note: --n-fit is now --edge-n-fit" in err and "stopped before the model" in err


@pytest.mark.parametrize(
    ("argv", "usage", "guess"),
    [
        (["p0", "--n-fitt", "4"], "circuits p0", "--edge-n-fit"),
        (["p0", "--edge-ig-stepz", "4"], "circuits p0", "--edge-ig-steps"),
        (
            ["discover", "--task", "ioi", "--edge-methd", "eap"],
            "circuits discover",
            "--edge-method",
        ),
        (["sinks", "--text", "a", "--rasterz", "1"], "circuits sinks", "--rasters"),
        (["p00"], "circuits", "p0"),
        (["export", "g.json", "--format", "dott"], "circuits export", "dot"),
    ],
)
def test_a_typo_gets_the_commands_usage_and_a_guess(argv, usage, guess, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([*argv, "--out", str(tmp_path / "o")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: {usage} ")
    assert err.rstrip().endswith(f"(did you mean {guess}?)"), err


def test_version_names_the_package_version_and_commit():
    run = subprocess.run(
        [sys.executable, "-m", "attn_sink_circuits.cli", "--version"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert run.stdout.startswith(f"circuits {circuits.__version__} (commit ")
    if head:  # a checkout: the commit is HEAD's
        assert f"(commit {head[:12]}" in run.stdout


def test_every_command_has_a_description():
    commands = cli.build_parser().commands
    assert len(commands) >= 12
    for name, parser in commands.items():
        assert parser.description and len(parser.description) > 20, name


def test_the_changelog_lists_every_renamed_flag():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    rows = {
        line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| `")
    }
    for r in RENAMED:
        line = rows[f"`{r.old}`"]
        assert f"`{r.new}`" in line and f"{', '.join(r.commands)}: {r.since}" in line, r
    assert len(rows) == len({r.old for r in RENAMED})


REFUSALS = [
    (["sinks", "--model", "nope", "--text", "a"], "unknown model key 'nope'"),
    (["p0", "--model", "smollm", "--threads", "1"], "unknown model key 'smollm'"),
    (["sinks", "--device", "tpu", "--text", "a"], "--device tpu is not a device"),
    (["p0", "--texts", "missing.txt"], "--texts missing.txt: no such file"),
    (["sinks", "--texts", "missing.jsonl"], "--texts missing.jsonl: no such file"),
    (["discover", "--pairs", "missing.jsonl"], "--pairs missing.jsonl: no such file"),
    (["secondary", "--traces", "missing.jsonl"], "--traces missing.jsonl: no such file"),
    (["claims", "--secondary", "missing"], "--secondary missing: no such file"),
]


def test_refusals_that_need_no_model_come_before_torch(tmp_path):
    """Each refusal in one line, in one process that never imports torch."""
    code = (
        "import contextlib, io, json, sys, time\n"
        "from attn_sink_circuits import cli\n"
        "out = []\n"
        f"for argv in {[a for a, _ in REFUSALS]!r}:\n"
        "    err = io.StringIO()\n"
        "    t = time.perf_counter()\n"
        "    with contextlib.redirect_stderr(err):\n"
        f"        rc = cli.main([*argv, '--out', {str(tmp_path / 'o')!r}])\n"
        "    out.append([rc, err.getvalue(), time.perf_counter() - t])\n"
        "print(json.dumps([out, 'torch' in sys.modules]))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    results, torch_loaded = json.loads(run.stdout or "null") or ([], None)
    assert torch_loaded is False, run.stderr
    for (argv, message), (rc, err, seconds) in zip(REFUSALS, results, strict=True):
        assert rc == 2 and message in err and err.count("\n") == 1, (argv, err)
        assert seconds < 2, (argv, seconds)


def test_cuda_on_a_cpu_only_torch_is_refused_without_torch(tmp_path):
    from importlib.metadata import version

    if not version("torch").endswith("+cpu"):
        pytest.skip("this torch is not a CPU-only build (its check needs torch)")
    code = (
        "import sys; from attn_sink_circuits import cli\n"
        f"rc = cli.main(['sinks', '--device', 'cuda', '--text', 'a', '--out', {str(tmp_path)!r}])\n"
        "print(rc, 'torch' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.stdout.split() == ["2", "False"]
    assert "CUDA is not available" in run.stderr and "CPU-only build" in run.stderr


def test_an_unknown_model_is_refused_quickly_by_the_installed_command(tmp_path):
    """`circuits sinks --model nope ...` as a person types it: one line, in well under the
    11-14 s that importing torch and the loader took (< 2 s on an idle machine; 5 here for a
    loaded one)."""
    argv = ["sinks", "--model", "nope", "--text", "a", "--out", str(tmp_path / "o")]
    t = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "attn_sink_circuits.cli", *argv], capture_output=True, text=True
    )
    seconds = time.perf_counter() - t
    assert run.returncode == 2 and run.stderr.count("\n") == 1
    assert run.stderr.startswith("circuits sinks: error: unknown model key 'nope'")
    assert seconds < 5, seconds


def test_no_flag_is_taken_by_a_prefix(capsys):
    parser = cli.build_parser()
    assert not parser.allow_abbrev
    assert all(not command.allow_abbrev for command in parser.commands.values())
    with pytest.raises(SystemExit):
        cli.main(["kv", "--budget", "64", "--out", "o"])
    err = capsys.readouterr().err.rstrip().splitlines()[-1]
    assert err.endswith("unrecognized arguments: --budget 64 (did you mean --budgets?)")


def test_the_target_band_help_says_the_size_rule_reads_the_fit_texts():
    for name in ("p0", "discover"):
        action = cli.build_parser().commands[name]._option_string_actions["--edge-target-band"]
        assert "f on the fit texts lies in it" in " ".join(action.help.split()), name


def test_help_lists_the_commands_as_a_newcomer_uses_them(capsys):
    assert list(cli.build_parser().commands)[:4] == ["p0", "sinks", "discover", "faithfulness"]
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "p0 trace the P0-sink circuit and write a report (start here: p0 --quick)" in shown
    assert "Start with `circuits p0 --quick`" in shown
    assert "`circuits discover --pairs FILE` for the circuit of your own" in shown


def test_the_readmes_two_commands_are_two():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert all(f"\n{c.split()[1]}:" in makefile for c in commands)
