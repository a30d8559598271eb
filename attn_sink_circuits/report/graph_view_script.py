"""The interactive circuit view's style sheet and script (`graph_view.graph_view_html` fills in
`__SPEC__`, the elements and legend as JSON): cytoscape with the nodes where the layout puts
them, click for attributes, a switch for the edges outside the circuit, "fit", and a first view
whose labels a reader can read (the whole circuit, or its strongest edges when the whole would
show labels under `spec.min_px`)."""

STYLE = """
.circuits-graph { border: 1px solid #ddd; border-radius: 4px; margin: 1em 0; font-size: 13px;
  max-width: 100%; overflow: hidden; }
.circuits-graph .cg-bar { display: flex; gap: 1em; align-items: center; flex-wrap: wrap;
  padding: .4em .6em; border-bottom: 1px solid #eee; background: #fafafa; }
.circuits-graph .cg-main { display: flex; }
.circuits-graph .cg-canvas { flex: 1 1 auto; position: relative; min-width: 0;
  overflow: hidden; }
.circuits-graph .cg-info { flex: 0 0 260px; border-left: 1px solid #eee; padding: .5em .7em;
  overflow: auto; color: #333; }
.circuits-graph .cg-info table { font-size: 12px; margin: .3em 0; }
.circuits-graph .cg-info td { text-align: left; padding: 1px 6px; border: none; }
.circuits-graph .cg-legend span.sw { display: inline-block; width: 22px; height: 0;
  border-top: 3px solid; vertical-align: middle; margin-right: 4px; }
.circuits-graph .cg-legend span.sw.observed { border-top-style: dashed; }
.circuits-graph button { font-size: 12px; }
"""

SCRIPT = r"""
(function () {
  var spec = __SPEC__;
  var root = document.getElementById(spec.id);
  var box = root.querySelector(".cg-canvas"), info = root.querySelector(".cg-info");
  function esc(s) { var d = document.createElement("div"); d.textContent = String(s);
    return d.innerHTML; }
  function table(attrs) {
    return "<table>" + Object.keys(attrs).sort().map(function (k) {
      return "<tr><td>" + esc(k) + "</td><td>" + esc(attrs[k]) + "</td></tr>"; }).join("") +
      "</table>"; }
  if (typeof cytoscape === "undefined") {
    box.textContent = "cytoscape.js is not loaded: put cytoscape_script() before this view.";
    root.setAttribute("data-rendered", "error"); return; }
  var cy = cytoscape({
    container: box, elements: spec.elements, layout: { name: "preset", fit: false },
    wheelSensitivity: 0.3, minZoom: 0.2, maxZoom: 4,
    style: [
      { selector: "node", style: { shape: "round-rectangle", width: "data(w)",
        height: "data(h)", "background-color": "data(color)", "border-width": 1,
        "border-color": "#666", label: "data(text)", "text-wrap": "wrap", "font-size": 11,
        "text-valign": "center", "text-halign": "center", "font-family": "sans-serif" } },
      { selector: "node.target", style: { "border-width": 2,
        "border-color": "#333" } },
      { selector: "edge", style: { width: "data(width)", "line-color": "data(color)",
        "target-arrow-color": "data(color)", "target-arrow-shape": "triangle",
        "curve-style": "bezier", "arrow-scale": 0.8, opacity: 0.8, label: "data(label)",
        "font-size": 10, color: "data(color)", "text-background-color": "#fff",
        "text-background-opacity": 0.85, "text-background-padding": 1,
        "text-rotation": "none" } },
      { selector: "edge.routed", style: { "curve-style": "unbundled-bezier",
        "control-point-weights": "data(cpw)", "control-point-distances": "data(cpd)",
        "edge-distances": "node-position" } },
      { selector: "edge.observed", style: { "line-style": "dashed", color: "#555" } },
      { selector: ".outside", style: { display: "none" } },
      { selector: ".faded", style: { opacity: 0.12 } },
      { selector: ":selected", style: { "border-width": 3, "border-color": "#000",
        "line-color": "#000", "target-arrow-color": "#000", opacity: 1 } }
    ]
  });
  function show(ele) {
    cy.elements().removeClass("faded");
    if (ele.isNode()) {
      var near = ele.closedNeighborhood();
      cy.elements().not(near).addClass("faded");
      var rows = ele.connectedEdges(":visible").map(function (e) {
        var other = e.source().id() === ele.id() ? "→ " + e.target().id() : "← " + e.source().id();
        return "<tr><td>" + esc(other) + "</td><td style='color:" + e.data("color") + "'>" +
          esc(e.data("value")) + "</td></tr>"; }).join("");
      info.innerHTML = "<b>" + esc(ele.id()) + "</b>" + table(ele.data("attrs")) +
        (rows ? "<b>edges</b><table>" + rows + "</table>" : "");
    } else {
      info.innerHTML = "<b>" + esc(ele.source().id() + " → " + ele.target().id()) + "</b>" +
        "<p style='color:" + ele.data("color") + "'>" + esc(ele.data("role")) + ": " +
        esc(ele.data("value")) + "</p>" + table(ele.data("attrs"));
    }
    root.setAttribute("data-selected", ele.id());
  }
  cy.on("tap", "node, edge", function (evt) { show(evt.target); });
  cy.on("tap", function (evt) { if (evt.target === cy) { cy.elements().removeClass("faded");
    info.innerHTML = spec.hint; root.removeAttribute("data-selected"); } });
  function fitAll() { cy.fit(cy.elements(":visible"), 24); }
  function firstView() {
    // The whole circuit when its labels stay readable; else its strongest edges, at least at
    // the zoom that shows labels at spec.min_px.
    var least = spec.min_px / 10;
    fitAll();
    if (cy.zoom() >= least) { return; }
    var strong = cy.edges("[?first_view]");
    var part = strong.union(strong.connectedNodes());
    if (part.length) { cy.fit(part, 24); }
    if (cy.zoom() < least) { cy.zoom(least); cy.center(part.length ? part : undefined); }
  }
  root.querySelector(".cg-fit").addEventListener("click", fitAll);
  function count() {
    // What is shown: elements not hidden as outside the circuit (nor ending at such a node).
    var shown = cy.elements().filter(function (e) { return !e.hasClass("outside") &&
      (e.isNode() || !(e.source().hasClass("outside") || e.target().hasClass("outside"))); });
    root.setAttribute("data-nodes", shown.nodes().length);
    root.setAttribute("data-visible-edges", shown.edges().length);
  }
  root.querySelector(".cg-all").addEventListener("change", function (evt) {
    cy.batch(function () { cy.elements("[!in_circuit]").toggleClass("outside",
      !evt.target.checked); });
    count(); });
  cy.ready(function () {
    firstView();
    count();
    // The smallest label on screen (edge values are 10 px at zoom 1), for tests and readers.
    root.setAttribute("data-label-px", (10 * cy.zoom()).toFixed(1));
    root.setAttribute("data-rendered", cy.nodes().length > 0 ? "true" : "empty");
  });
  window.circuitsGraphs = window.circuitsGraphs || {};
  window.circuitsGraphs[spec.id] = cy;
})();
"""


__all__ = ["SCRIPT", "STYLE"]
