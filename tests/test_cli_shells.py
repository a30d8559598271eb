"""Each study command is a thin shell over its study (issue 59): `cli/<command>.py` parses the
arguments into the study's config, loads the model, calls the study's `run` and its result's
`save`, and prints the result. Whatever else a run needs (reading texts or traces files,
checkpoints and resuming, attaching claims, writing files) lives in the study, where a notebook
reaches it through the same `run`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLI = Path(__file__).parents[1] / "attn_sink_circuits" / "cli"

STUDY_COMMANDS = {
    "claims": "claims",
    "emergence": "emergence",
    "kv": "kv",
    "p0": "p0",
    "secondary": "secondary",
    "trigger": "trigger",
}
"""Command module -> the study package (`attn_sink_circuits.studies.<study>`) it runs."""

PENDING = {
    "discover": "the IOI command calls `ioi.run` and `IOIResult.save`, but still builds its "
    "settings from discovery's config and protocol modules and runs.io in the command; once "
    "that moves into studies.ioi.config it joins STUDY_COMMANDS as 'discover': 'ioi'",
}
"""Study commands not checked yet, each with why (checked to name a real command module)."""

COMPOSED = {
    "p0": {
        "attn_sink_circuits.studies.claims.attach": "`--claims` puts the claims study's P0 "
        "table beside the trace; the claims read the P0 study, so the P0 study cannot call them",
    },
    "secondary": {
        "attn_sink_circuits.studies.claims.attach": "Wong et al.'s claims beside the trace; "
        "the claims read the secondary study, so it cannot call them",
    },
}
"""A command that composes a second study onto its own: the module it may import, and why."""


def _imports(tree: ast.Module) -> set[str]:
    """Every module the source imports, at module level or inside functions: `import a.b`
    gives a.b; `from a import b` gives a.b when a.b is a module (a study package imported
    by name) and a otherwise."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                is_module = (CLI.parents[1] / Path(*sub.split("."))).is_dir() or (
                    CLI.parents[1] / Path(*sub.split(".")).with_suffix(".py")
                ).is_file()
                names.add(sub if is_module else node.module)
    return names


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    assert found, f"no function {name}"
    return found[0]


def _calls(func: ast.FunctionDef, owner: str, attr: str) -> bool:
    """Whether `func` calls `owner.attr(...)` (owner "" : any object), or hands `x.attr` to a
    call (`steps.run("report", result.save, out)`, a progress bar around the save)."""
    for node in ast.walk(func):
        if not isinstance(node, ast.Call):
            continue
        for f in [node.func, *node.args]:
            if isinstance(f, ast.Attribute) and f.attr == attr:
                if not owner or (isinstance(f.value, ast.Name) and f.value.id == owner):
                    return True
    return False


def test_every_study_command_is_listed():
    """A command that runs a study is either checked here or pending with its reason."""
    studies = {p.name for p in (CLI.parent / "studies").iterdir() if (p / "__init__.py").exists()}
    listed = set(STUDY_COMMANDS.values()) | set(PENDING) | {"ioi"}
    # no command of their own: known answers (scripts/known_answers.py), the rounding check
    # (scripts/rounding_check.py), the papers' protocols (python -m ...studies.protocols)
    assert studies - listed <= {"known_answers", "rounding", "protocols"}, studies - listed
    assert not set(STUDY_COMMANDS) & set(PENDING)
    assert all((CLI / f"{m}.py").is_file() for m in [*STUDY_COMMANDS, *PENDING])


@pytest.mark.parametrize("command", sorted(STUDY_COMMANDS))
def test_a_study_command_imports_only_the_cli_its_study_and_the_loader(command):
    """The library modules a study command may import, anywhere in it (module level and inside
    functions), are exactly:

    - `attn_sink_circuits.cli` and its modules: parsing, the checks of paths and options made
      before anything loads (`cli.checks`), loading the model (`cli.loading`), printing
      (`cli.output`);
    - its own study package `attn_sink_circuits.studies.<study>`: for `run`, and for the
      settings objects a study without a config class takes (the trigger study's grid, task
      and training);
    - that package's `.config` module: the config the arguments become, and the study's own
      light checks of them that refuse bad input before the model loads (`check_plan`,
      `check_texts`, `check_secondary`, `check_traces`), importable without torch so that
      `--help` stays instant;
    - `attn_sink_circuits.models`: loading a model (`cli.loading` does it today).

    Anything else (reading texts, traces or tables, checkpoints and resuming, discovery,
    another study's claims, reports and files) belongs to the study, inside its `run` or its
    result's `save`, so that a notebook calling `run` and `save` gets the very run the command
    makes."""
    study = STUDY_COMMANDS[command]
    tree = ast.parse((CLI / f"{command}.py").read_text(encoding="utf-8"))
    allowed = {
        f"attn_sink_circuits.studies.{study}",
        f"attn_sink_circuits.studies.{study}.config",
        "attn_sink_circuits.models",
        "attn_sink_circuits.cli",
    }
    allowed |= set(COMPOSED.get(command, {}))
    library = {n for n in _imports(tree) if n.split(".")[0] == "attn_sink_circuits"}
    extra = {n for n in library if n not in allowed and not n.startswith("attn_sink_circuits.cli.")}
    assert not extra, f"cli/{command}.py imports {sorted(extra)}: move that into the study"


@pytest.mark.parametrize("command", sorted(STUDY_COMMANDS))
def test_a_study_command_runs_its_study_and_saves_the_result(command):
    """Its `run(args)` calls `<study>.run(...)` (the study's one entry) and the result's
    `.save` (the study's one way of writing its folder), called or handed to the bar that
    shows the write (`steps.run("report", result.save, out)`)."""
    study = STUDY_COMMANDS[command]
    tree = ast.parse((CLI / f"{command}.py").read_text(encoding="utf-8"))
    run = _function(tree, "run")
    assert _calls(run, study, "run"), f"cli/{command}.py: run does not call {study}.run("
    assert _calls(run, "", "save"), f"cli/{command}.py: run does not save the result"


def test_the_check_sees_a_library_call():
    """The import check fails on a command that reaches past its study (here, `read_texts`)."""
    source = "def run(args):\n    from attn_sink_circuits.core.texts import read_texts\n"
    assert "attn_sink_circuits.core.texts" in _imports(ast.parse(source))
    source = "from attn_sink_circuits.studies import p0\n"
    assert _imports(ast.parse(source)) == {"attn_sink_circuits.studies.p0"}
    run = _function(ast.parse("def run(args):\n    trace_p0(m)\n    write(t)\n"), "run")
    assert not _calls(run, "p0", "run") and not _calls(run, "", "save")
