"""report.html as a reader sees it, in a real headless browser (Debian's chromium; CI installs
it): no raw Markdown, no table wider than the page (each wide table scrolls inside its own box),
the interactive circuit opening with labels a reader can read. On small fixtures (the planted P0
model's trace, the SmolLM2 circuit saved under docs/), never the demo."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from attn_sink_circuits.graph.io import read
from attn_sink_circuits.report.graph_view import MIN_LABEL_PX
from attn_sink_circuits.report.html import GraphView, KeyValues, Section, Table, write_report
from attn_sink_circuits.report.trace import write_trace

pytestmark = pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="chromium is not installed (apt-get install -y chromium); CI installs it",
)
DOCS_GRAPH = Path(__file__).parents[1] / "docs" / "p0" / "smollm2-135m" / "circuit.graphml"
WIDTHS = (1280, 900)
"""Browser window widths (px) the pages are measured at."""

MEASURE = """<script>
window.addEventListener("load", function () {
  setTimeout(function () {
    var body = document.body, style = getComputedStyle(body);
    var right = body.getBoundingClientRect().right - parseFloat(style.paddingRight);
    var wide = [];
    document.querySelectorAll("table").forEach(function (t) {
      if (t.closest("td")) { return; }  // a table inside a cell lives in its table's box
      var box = t.closest(".scroll") || t;
      var r = box.getBoundingClientRect();
      if (r.right > right + 1) { wide.push((t.innerText || "").slice(0, 60)); }
    });
    var text = body.innerText.split("\\n").filter(function (line) {
      return /^\\s*\\|.*\\|\\s*$/.test(line) || /\\|\\s*-{3,}\\s*\\|/.test(line); });
    var graphs = Array.from(document.querySelectorAll(".circuits-graph")).map(function (g) {
      return {rendered: g.getAttribute("data-rendered"),
              label_px: parseFloat(g.getAttribute("data-label-px"))}; });
    var out = document.createElement("pre");
    out.id = "measured";
    out.textContent = JSON.stringify({
      overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
      wide_tables: wide, markdown_lines: text, graphs: graphs,
      scroll_boxes: document.querySelectorAll(".scroll").length});
    body.appendChild(out);
  }, 500);
});
</script>"""


def measure(page: Path, width: int, tmp_path: Path) -> dict:
    """What chromium shows of `page` in a window `width` px wide (see `MEASURE`)."""
    copy = tmp_path / f"measured-{width}.html"
    copy.write_text(
        page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8"
    )
    out = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         f"--window-size={width},900", "--virtual-time-budget=15000", "--dump-dom",
         copy.as_uri()],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    found = re.search(r'<pre id="measured">(.*?)</pre>', out.stdout, re.S)
    assert found, "the measuring script did not run"
    text = found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
    return json.loads(text.replace("&amp;", "&"))


@pytest.fixture(scope="module")
def planted_report(planted_p0_trace, tmp_path_factory) -> Path:
    """The planted P0 model's trace (tests/test_p0.py's small settings) as report.html."""
    return write_trace(planted_p0_trace, tmp_path_factory.mktemp("p0-report"))


@pytest.fixture(scope="module")
def wide_report(tmp_path_factory) -> Path:
    """A page with everything that could spill: a 24-column table of long snake_case names, a
    Markdown pipe table in text, nested values, and the SmolLM2 circuit saved under docs/
    (1,613 direct edges: too many to read when the whole is fitted to the view)."""
    columns = [f"sink_at_0_by_attention_variant_{i}" for i in range(24)]
    frame = pd.DataFrame([[0.123456] * 24] * 3, columns=columns)
    text = (
        "**By kind of text.** The circuit on each kind:\n\n| kind | held-out texts | f |\n"
        "|---|---|---|\n| prose | 2 | 1.10 |\n| all | 6 | 1.04 |"
    )
    nested = {"sink_stays_at_0": {f"variant_{i}": {"by_attention": 1.0} for i in range(12)}}
    sections = [
        Section("Finding", [text]),
        Section("Tables", [Table(frame, "a wide table"), KeyValues(nested, name="summary")]),
        Section("Circuit", [GraphView(read(DOCS_GRAPH), "the SmolLM2 P0 circuit")]),
    ]
    return write_report(tmp_path_factory.mktemp("wide") / "report.html", "wide", sections)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("which", ["planted_report", "wide_report"])
def test_the_report_shows_no_markdown_and_no_table_wider_than_the_page(
    which, width, request, tmp_path
):
    seen = measure(request.getfixturevalue(which), width, tmp_path)
    assert seen["markdown_lines"] == []  # every pipe table rendered as an HTML table
    assert seen["wide_tables"] == []  # a wide table scrolls inside a box as wide as the page
    assert seen["overflow"] <= 0  # the page itself never scrolls sideways
    assert seen["scroll_boxes"] >= 3


@pytest.mark.parametrize("width", WIDTHS)
def test_the_interactive_circuit_opens_with_readable_labels(wide_report, width, tmp_path):
    seen = measure(wide_report, width, tmp_path)
    [graph] = seen["graphs"]
    assert graph["rendered"] == "true"
    # Fitted whole, 1,600 edges would show 3-5 px labels; the view opens on the strongest part.
    assert graph["label_px"] >= MIN_LABEL_PX
