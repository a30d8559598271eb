"""The package's shape: studies import report only to save, modules stay small, one site vocabulary,
validated configs, safe writers."""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "attn_sink_circuits"
MAX_LINES = 400
# A ceiling for any one function: the style's aim is ~60 lines; longer ones are still being split.
MAX_FUNCTION_LINES = 120
# Split by the work that owns them (the engine's own issue; modules being changed in parallel).
OWNED_ELSEWHERE: set[str] = set()
# Modules that still build node ids or hook names by hand (none: every one uses attn_sink_circuits.core).
# EAP-IG's own names in graph/eap_ig.py ("a3.h2", "m3", "input", "logits") are not ours and
# the pattern below does not match them.
HAND_BUILT_PENDING: set[str] = set()
# ... and that still import another module's private name (none).
PRIVATE_PENDING: set[str] = set()
HAND_BUILT = re.compile(r"L\{\}\.(H\{\}|MLP|ATTN)|blocks\.")


def _imports_of(node: ast.AST, path: Path) -> set[str]:
    """The modules one import statement of `path` names (relative ones resolved)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    if not isinstance(node, ast.ImportFrom):
        return set()
    package = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts[:-1])
    base = node.module or ""
    if node.level:
        parts = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*parts, base]) if base else ".".join(parts)
    return {base} | {f"{base}.{a.name}" for a in node.names}


def _imports(path: Path) -> set[str]:
    """Every module a file imports, anywhere (function bodies and TYPE_CHECKING blocks too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {m for node in ast.walk(tree) for m in _imports_of(node, path)}


STUDIES_SAVE_PATH = ROOT / "studies" / "result.py"
"""The studies' save path: the result protocol, `TraceResult.save` (report.write_trace),
`FoundCircuit.draw` (report.draw_circuit) and `save_figures` (report.draw.save_figure)."""


def _report_imports_by_function(tree: ast.AST, path: Path, function: str | None = None):
    """(line, module, the innermost function it is imported in, or None) of every import of
    `attn_sink_circuits.report` in `tree`."""
    for node in ast.iter_child_nodes(tree):
        inner = node.name if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else function
        for module in _imports_of(node, path):
            if module.startswith("attn_sink_circuits.report"):
                yield node.lineno, module, function
        yield from _report_imports_by_function(node, path, inner)


def test_studies_import_report_only_to_save():
    # The engine, report included, sits below the studies (report never imports a study, the
    # next test), so a study may use report; but a study measures without it: what it finds
    # is computed, summarised and drawn as figures with no report code, and only writing a
    # result goes through report. So a study imports report in the save path,
    # `STUDIES_SAVE_PATH`, and otherwise only lazily inside a result's own `save` method (as
    # KVResult.save and Claims.save do); nowhere else.
    found = [
        f"{path.relative_to(ROOT)}:{line}: {module}" + (f" (in {function})" if function else "")
        for path in sorted((ROOT / "studies").rglob("*.py"))
        if path != STUDIES_SAVE_PATH
        for line, module, function in _report_imports_by_function(
            ast.parse(path.read_text(encoding="utf-8")), path
        )
        if function != "save"
    ]
    assert not found, "import report only in studies/result.py or a save method: " + "; ".join(
        found
    )


def test_report_never_imports_tracing():
    for path in (ROOT / "report").rglob("*.py"):
        bad = sorted(m for m in _imports(path) if m.startswith("attn_sink_circuits.studies"))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_graph_never_imports_report():
    # What an edge means is typed on the graph (`attn_sink_circuits.graph.roles`): the graph, its files
    # and its Mermaid export need nothing from the report, which draws on the graph.
    for path in (ROOT / "graph").rglob("*.py"):
        bad = sorted(m for m in _imports(path) if m.startswith("attn_sink_circuits.report"))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def _templates(tree: ast.AST):
    """(line, text) of every string literal and f-string (each formatted value as `{}`)."""
    inside = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
            yield node.lineno, "".join(parts)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in inside:
                yield node.lineno, node.value


def test_nothing_builds_a_node_id_or_a_hook_name_by_hand():
    # One builder each: attn_sink_circuits.core.nodes.node_id ("L3.H5") and attn_sink_circuits.core.sites.hook_name.
    found = [
        f"{rel}:{line}: {text[:40]!r}"
        for p in ROOT.rglob("*.py")
        if (rel := str(p.relative_to(ROOT))).split("/")[0] != "core"
        and rel not in HAND_BUILT_PENDING
        for line, text in _templates(ast.parse(p.read_text(encoding="utf-8")))
        if HAND_BUILT.match(text)
    ]
    assert not found, "use node_id / hook_name (attn_sink_circuits.core): " + "; ".join(found)


def test_no_private_name_crosses_a_module():
    # What two modules share is published (no leading underscore), split by concept.
    sources = [*ROOT.rglob("*.py"), *(ROOT.parent / "scripts").glob("*.py")]
    found = [
        f"{rel}:{node.lineno}: from {node.module} import {alias.name}"
        for p in sources
        if (rel := str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p.name))
        not in PRIVATE_PENDING
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("attn_sink_circuits")
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]
    assert not found, "publish what is shared: " + "; ".join(found)


def test_the_vocabulary_floor_imports_nothing_above_it_and_no_torch():
    # Token rows are tensors: attn_sink_circuits.core.tokens is the one module of the floor with torch.
    for path in (ROOT / "core").rglob("*.py"):
        above = sorted(m for m in _imports(path) if m.startswith("attn_sink_circuits.") and not
                       m.startswith("attn_sink_circuits.core"))  # fmt: skip
        assert not above, f"{path.relative_to(ROOT)} imports {above}"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {m.split(".")[0] for node in tree.body for m in _imports_of(node, path)}
        heavy = top & {"torch", "transformer_lens", "transformers"}
        assert not heavy or path.name == "tokens.py", f"{path.relative_to(ROOT)} imports {heavy}"


def test_no_module_is_too_long():
    long = {
        str(p.relative_to(ROOT)): n
        for p in ROOT.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
        and str(p.relative_to(ROOT)) not in OWNED_ELSEWHERE
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_function_is_too_long():
    long = {
        f"{p.relative_to(ROOT)}::{node.name}": n
        for p in ROOT.rglob("*.py")
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES
    }
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them): {long}"


def test_no_module_switches_the_matplotlib_backend():
    users = [p for p in ROOT.rglob("*.py") if "matplotlib.use(" in p.read_text(encoding="utf-8")]
    assert not users


def test_site_names_are_transformer_lens_names(tiny):
    from transformer_lens.utilities import get_act_name

    from attn_sink_circuits.core.sites import SITES, hook_layer, hook_name, parse_hook

    for kind, info in SITES.items():
        if info.act_name is not None:
            assert hook_name(kind, 2) == get_act_name(info.act_name, 2), kind
        gated = kind == "result"  # attn.hook_result exists only when per-head results are on
        assert gated or hook_name(kind, 2) in tiny.hook_dict, kind
        assert parse_hook(hook_name(kind, 2)) == (kind, 2)
        assert hook_layer(hook_name(kind, 2), 4) == 2
    assert parse_hook("blocks.2.attn.hook_nothing") is None and parse_hook("hook_embed") is None
    assert hook_layer("hook_embed", 4) == -1 and hook_layer("ln_final.hook_in", 4) == 4


def test_configs_validate_every_field():
    from attn_sink_circuits.sinks import LABELS, MASSIVE_RATIO, SINK_EPS
    from attn_sink_circuits.sinks.rules import AUTHORS_TAU
    from attn_sink_circuits.sinks.secondary import TAU
    from attn_sink_circuits.studies.p0 import P0Config
    from attn_sink_circuits.studies.secondary import SecondaryConfig

    # The configs' defaults are the sink package's constants (written out to stay light).
    assert P0Config().massive_ratio == MASSIVE_RATIO and P0Config().eps == SINK_EPS
    assert SecondaryConfig().taus == (TAU, AUTHORS_TAU)
    assert set(SecondaryConfig.__dataclass_fields__["labels"].metadata["choices"]) == set(LABELS)
    for bad, message in [
        ({"keep_share": 0}, "keep_share must be > 0"),
        ({"keep_share": float("nan")}, "finite"),
        ({"n_tokens": 3}, "n_tokens must be >= 4"),
        ({"jump_factor": float("inf")}, "jump_factor must be a finite number"),
    ]:
        with pytest.raises(ValueError, match=message):
            P0Config(**bad)
    with pytest.raises(ValueError, match="labels must be one of"):
        SecondaryConfig(labels=("sinkish",))
    with pytest.raises(ValueError, match="taus must not be empty"):
        SecondaryConfig(taus=())
    with pytest.raises(ValueError, match="unknown P0Config options"):
        P0Config().with_options(keepshare=0.3)
    c = SecondaryConfig(scales=(0, 1), max_tokens=64)
    assert c.scales == (0.0, 1.0) and c.max_tokens == 64
    assert P0Config().with_options(n_tokens=16).n_tokens == 16
    assert all("help" in f.metadata for f in P0Config.__dataclass_fields__.values())


def test_strict_json_writes_null_and_says_where(tmp_path):
    from attn_sink_circuits.runs.io import write_json

    path = write_json(tmp_path / "s.json", {"a": {"b": math.nan}, "c": [1.0, math.inf], "d": 2})
    doc = json.loads(path.read_text())
    assert doc == {"a": {"b": None}, "c": [1.0, None], "d": 2, "non_finite": ["a.b", "c[1]"]}


def test_atomic_folder_replaces_as_a_whole_or_not_at_all(tmp_path):
    from attn_sink_circuits.runs.io import MARKER, atomic_folder

    out = tmp_path / "out"
    with atomic_folder(out) as tmp:
        (tmp / "old.csv").write_text("old")
    with pytest.raises(RuntimeError), atomic_folder(out) as tmp:
        (tmp / "new.csv").write_text("new")
        raise RuntimeError("interrupted")
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "old.csv"]
    with atomic_folder(out) as tmp:
        (tmp / "new.csv").write_text("new")
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "new.csv"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"), atomic_folder(tmp_path / "file"):
        pass
