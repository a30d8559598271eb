"""`circuits faithfulness`: a saved circuit judged on new texts, or on counterfactual pairs (a
circuit found on pairs, or an EAP-IG / MIB graph JSON)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attn_sink_circuits.cli import loading
from attn_sink_circuits.cli.checks import existing
from attn_sink_circuits.cli.options import TEXTS_HELP, count_int, model_options, texts_option
from attn_sink_circuits.cli.output import print_summary
from attn_sink_circuits.cli.pairs import PAIRS_HELP, make_pairs, pair_options, read_pair_rows
from attn_sink_circuits.cli.parser import command
from attn_sink_circuits.discovery.protocol import PROTOCOLS


def _graph_model(graph, given: str | None) -> str:
    """The model to judge a saved circuit on: `given` (--model), else the one it was found on;
    a different registry model is refused before anything loads."""
    from attn_sink_circuits.models.registry import MODELS

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
    from attn_sink_circuits.models.cache import entry_dir

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


def _on_texts(args: argparse.Namespace):
    """(model, graph, texts) for --texts, checked before the model loads."""
    from attn_sink_circuits.core.texts import read_texts
    from attn_sink_circuits.graph.io import read

    graph = read(args.circuit)
    texts = read_texts(args.texts)
    args.model = _graph_model(graph, args.model)
    _check_text_lengths(graph, texts, args.model)
    return loading.load(args), graph, texts


def _pairs_judging(args: argparse.Namespace, graph):
    """What a saved pairs circuit is judged under (`attn_sink_circuits.discovery.recorded`): its recorded
    task, partner and protocol unless --partner / --protocol say otherwise; checked before the
    model loads. `args.partner` is set to the partner chosen (for --task)."""
    from attn_sink_circuits.discovery.recorded import found_under, judging_under
    from attn_sink_circuits.patching.metrics import PAIRS_SPEC

    if graph.graph.get("metric_spec") != PAIRS_SPEC:
        raise ValueError(
            "this circuit was not found on text pairs (its metric is "
            f"{graph.graph.get('metric', '?')!r}); judge it on --texts, not on pairs"
        )
    how = judging_under(found_under(graph, args.circuit), args.task, args.protocol, args.partner)
    if args.task is not None:
        args.partner = how.partner
    return how


def _eap_ig_judging(args: argparse.Namespace):
    """An EAP-IG / MIB graph JSON names no partner, padding or BOS: judged under --protocol
    (default mib) and its partner unless --partner, and says so."""
    from attn_sink_circuits.discovery.protocol import protocol
    from attn_sink_circuits.discovery.recorded import Judging

    proto = protocol(args.protocol or "mib")
    partner = args.partner or proto.partner
    if args.task is not None:
        args.partner = partner
    made = f"partner {partner}, " if args.task is not None else ""
    note = (
        f"an EAP-IG / MIB graph JSON does not say how its pairs were made: judged under protocol "
        f"{proto.name} ({made}padding {'on' if proto.pad else 'off'}, BOS "
        f"{'first' if proto.bos else 'as the model does'}; --protocol to change)"
    )
    return Judging(proto, partner, (note,))


def _on_pairs(args: argparse.Namespace):
    """(model, graph, pairs, judging) for --pairs / --task: a circuit found on pairs, judged on
    pairs made as its own were (`_pairs_judging`), or an EAP-IG graph file, which names no
    model (then --model)."""
    from attn_sink_circuits.graph.eap_ig import read_json_if_eap_ig

    rows = read_pair_rows(args)  # checked before the model loads
    data = read_json_if_eap_ig(args.circuit)
    graph = None
    if data is None:
        from attn_sink_circuits.graph.io import read

        graph = read(args.circuit)
        args.model = _graph_model(graph, args.model)
        how = _pairs_judging(args, graph)
    elif args.model is None:
        raise ValueError(f"{args.circuit} is an EAP-IG graph, which names no model; pass --model")
    else:
        how = _eap_ig_judging(args)
    for note in how.notes:  # before the model loads: the result comes after
        print(f"circuits faithfulness: note: {note}", file=sys.stderr)
    model = loading.load(args)
    pairs = make_pairs(model, args, rows, args.n_pairs, shuffle=False, proto=how.protocol)
    if data is not None:
        from attn_sink_circuits.discovery.saved import eap_ig_circuit

        graph = eap_ig_circuit(data, model, str(args.circuit))
    return model, graph, pairs, how


def run(args: argparse.Namespace) -> int:
    from attn_sink_circuits.runs.io import check_writable_folder, stored

    args.circuit = str(stored(args.circuit))  # a large graph saved gzip'd: its plain name too
    existing(args.circuit, "CIRCUIT", "a circuit graph file (.graphml, .json ...)")
    existing(args.texts, "--texts", f"a {TEXTS_HELP}")
    existing(args.pairs, "--pairs", f"a {PAIRS_HELP}")
    # faithfulness.json is written into the folder (the folder is never replaced).
    out = check_writable_folder(args.out) if args.out else None
    if args.texts is not None and (args.protocol or args.partner):
        given = "--protocol" if args.protocol else "--partner"
        raise ValueError(f"{given} says how pairs are made; a circuit judged on --texts takes "
                         f"none: leave out {given}")  # fmt: skip
    if args.texts is None:
        model, graph, texts, how = _on_pairs(args)
        judged = {"protocol": how.protocol.name, **({"partner": how.partner} if args.task else {})}
    else:
        (model, graph, texts), how, judged = _on_texts(args), None, {}
    from attn_sink_circuits.discovery.saved import judge_saved
    from attn_sink_circuits.runs.io import write_json
    from attn_sink_circuits.runs.owned import add_to_run

    result = judge_saved(
        model, graph, texts, n_random=args.edge_n_random, n_boot=args.edge_n_boot,
        seed=args.edge_seed, progress=True,
    )  # fmt: skip
    notes = {"notes": list(how.notes)} if how and how.notes else {}
    result = {"circuit": str(args.circuit), "model": args.model, **judged, **notes, **result}
    print_summary(result)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "faithfulness.json", result)
        add_to_run(out, out / "faithfulness.json")  # a run folder: listed as its run's
        print(f"wrote {out / 'faithfulness.json'}")
    return 0


def add(sub) -> None:
    p = command(
        sub,
        "faithfulness",
        "judge a saved circuit on new texts or pairs (faithfulness, interval, baselines)",
        "Judge a circuit written by `circuits p0` on new texts: the model, the token length, "
        "the ablation and the metric are the graph's own (the texts are cut to that length). A "
        "circuit found on pairs, or an EAP-IG / MIB graph JSON, is judged on --pairs or --task, "
        "with pairs made as its own were (task, partner, protocol, padding, BOS): a setting "
        "given that differs from the recorded one is noted before the result.",
    )
    p.add_argument(
        "circuit",
        help="a circuit graph written by `circuits p0` or `circuits discover` (.graphml, .json "
        "...), or an EAP-IG / MIB graph JSON (judged on --pairs / --task, with --model)",
    )
    model_options(p, default=None, default_help="default: the one the graph names")
    src = p.add_mutually_exclusive_group(required=True)
    texts_option(src)
    pair_options(src, p, partner_default="the one the circuit was found with")
    p.add_argument("--out", help="folder to write faithfulness.json into (optional)")
    p.add_argument(
        "--protocol",
        choices=tuple(PROTOCOLS),
        help="how the pairs are made (partner, padding, BOS; attn_sink_circuits.discovery.protocol) "
        "(default: the one the circuit was found under, as its graph or its run's summary.json "
        "records it; mib for an EAP-IG / MIB graph JSON)",
    )
    p.add_argument(
        "--edge-n-random",
        type=count_int,
        default=10,
        help="random circuits of its size (%(default)s)",
    )
    p.add_argument(
        "--edge-n-boot",
        type=count_int,
        default=1000,
        help="bootstrap resamples of texts (%(default)s)",
    )
    p.add_argument(
        "--edge-seed",
        type=count_int,
        default=0,
        help="seed of the random circuits and the bootstrap (%(default)s)",
    )
    p.set_defaults(func=run)
