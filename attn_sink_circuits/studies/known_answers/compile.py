"""Compile the programs of `attn_sink_circuits.studies.known_answers.programs` with Tracr and write the fixtures
the library loads without jax: `<name>.npz` (Tracr's weights, every input up to the maximum
length and Tracr's residual stream after every attention and MLP on it) and `<name>.json`
(residual labels, encoders, output label, and what each block reads and writes as Tracr's
blocks declare it).

Needs the `[tracr]` extra (tracr-pypi, jax, dm-haiku); imports no torch, so it runs in an
environment that has only those and numpy:

    python -m attn_sink_circuits.studies.known_answers.compile [--out FOLDER] [NAME ...]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

from attn_sink_circuits.runs.io import atomic_write, write_json
from attn_sink_circuits.studies.known_answers.programs import BOS, PAD, PROGRAMS, get_program

FIXTURES = Path(__file__).parent / "compiled"
"""Where the committed fixtures live."""

PARAM_KEYS = ("w", "b", "embeddings")


def compile_program(name: str):
    """(assembled model, craft model, rasp graph, sink node) of program `name`, through Tracr's
    own steps (those of `compile_rasp_to_model`, kept apart so that the blocks can be read)."""
    from tracr.compiler import (
        basis_inference,
        craft_graph_to_model,
        craft_model_to_transformer,
        expr_to_craft_graph,
        rasp_to_graph,
    )
    from tracr.craft import bases
    from tracr.rasp import rasp

    prog = get_program(name)
    extracted = rasp_to_graph.extract_rasp_graph(prog.build())
    graph, sources, sink = extracted.graph, extracted.sources, extracted.sink
    basis_inference.infer_bases(graph, sink, set(prog.vocab), prog.max_seq_len)
    expr_to_craft_graph.add_craft_components_to_rasp_graph(
        graph, bos_dir=bases.BasisDirection(rasp.tokens.label, BOS), mlp_exactness=100
    )
    craft = craft_graph_to_model.craft_graph_to_model(graph, sources)
    model = craft_model_to_transformer.craft_model_to_transformer(
        craft_model=craft, graph=graph, sink=sink, max_seq_len=prog.max_seq_len,
        compiler_bos=BOS, compiler_pad=PAD, causal=False,
    )  # fmt: skip
    return model, craft, graph, sink


def label(direction) -> str:
    """A basis direction as Tracr's residual labels write it (`name:value`, or `name`)."""
    return direction.name if direction.value is None else f"{direction.name}:{direction.value}"


def _labels(space) -> list[str]:
    return [label(d) for d in space.basis]


def declared_blocks(model, craft) -> list[dict]:
    """Per layer, what Tracr's blocks declare: {"layer", "attn": [per head {"q", "k", "v",
    "writes"}], "mlp": {"reads", "writes"} or None} (residual labels)."""
    from tracr.compiler import assemble
    from tracr.craft import transformers

    _, module_names = assemble._get_model_config_and_module_names(craft)
    layers = [{"layer": i, "attn": [], "mlp": None} for i in range(model.model_config.num_layers)]
    for block, where in zip(craft.blocks, module_names, strict=True):
        layer = layers[int(where.split("_")[1].split("/")[0])]
        if isinstance(block, transformers.MLP):
            layer["mlp"] = {"reads": _labels(block.fst.input_space),
                            "writes": _labels(block.snd.output_space)}  # fmt: skip
            continue
        for head in block.as_multi().heads():
            layer["attn"].append({
                "q": _labels(head.w_qk.left_space), "k": _labels(head.w_qk.right_space),
                "v": _labels(head.w_ov.input_space), "writes": _labels(head.w_ov.output_space),
            })  # fmt: skip
    return layers


def _json_value(value):
    return value.item() if isinstance(value, np.generic) else value


def metadata(name: str, model, craft, sink) -> dict:
    """The fixture's JSON part."""
    from tracr.compiler import nodes
    from tracr.rasp import rasp

    prog = get_program(name)
    cfg = model.model_config
    out_map = getattr(model.output_encoder, "encoding_map", None)
    return {
        "program": name,
        "about": prog.about,
        "vocab": list(prog.vocab),
        "max_seq_len": prog.max_seq_len,
        "bos": BOS,
        "pad": PAD,
        "config": {
            "n_layers": cfg.num_layers,
            "n_heads": cfg.num_heads,
            "d_head": cfg.key_size,
            "d_mlp": cfg.mlp_hidden_size,
            "causal": bool(cfg.causal),
        },  # fmt: skip
        "residual_labels": list(model.residual_labels),
        "input_encoding": [
            [_json_value(k), int(v)] for k, v in model.input_encoder.encoding_map.items()
        ],  # fmt: skip
        "output": {
            "label": sink[nodes.EXPR].label,
            "categorical": bool(rasp.is_categorical(sink[nodes.EXPR])),
            "encoding": None
            if out_map is None
            else [[_json_value(k), int(v)] for k, v in out_map.items()],
        },  # fmt: skip
        "blocks": declared_blocks(model, craft),
    }


def all_inputs(name: str) -> dict[int, np.ndarray]:
    """Every input of each length 1..max_seq_len as token ids, BOS first: {length: [n, 1 + length]}."""
    prog = get_program(name)
    return {
        n: np.array([[BOS, *seq] for seq in itertools.product(sorted(prog.vocab), repeat=n)],
                    dtype=object)
        for n in range(1, prog.max_seq_len + 1)
    }  # fmt: skip


def arrays(model, name: str) -> dict[str, np.ndarray]:
    """The fixture's arrays: Tracr's parameters (`param/<module>/<name>`) and, per input length
    n, the inputs (`tokens_<n>` [inputs, 1 + n]), the residual stream after every attention and
    MLP (`residuals_<n>` [inputs, 2 x layers, 1 + n, d_model]) and Tracr's output
    (`output_<n>` [inputs, 1 + n]: class ids, or the value of a numerical output)."""
    import jax.numpy as jnp

    out = {}
    for module, params in model.params.items():
        for key, value in params.items():
            out[f"param/{module}/{key}"] = np.asarray(value, dtype=np.float32)
    for n, seqs in all_inputs(name).items():
        ids = np.array([model.input_encoder.encode(list(s)) for s in seqs], dtype=np.int64)
        result = model.forward(model.params, jnp.array(ids))
        res = np.stack([np.asarray(r) for r in result.transformer_output.residuals], axis=1)
        out[f"tokens_{n}"] = ids
        out[f"residuals_{n}"] = res.astype(np.float32)
        out[f"output_{n}"] = np.asarray(result.unembedded_output, dtype=np.float32)
    return out


def write_fixture(name: str, folder: Path = FIXTURES) -> tuple[Path, Path]:
    """Compile `name` and write `<folder>/<name>.npz` and `.json` (each atomically)."""
    model, craft, _, sink = compile_program(name)
    folder.mkdir(parents=True, exist_ok=True)
    npz = folder / f"{name}.npz"
    with atomic_write(npz, "wb") as fh:
        np.savez_compressed(fh, **arrays(model, name))
    return npz, write_json(folder / f"{name}.json", metadata(name, model, craft, sink))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"programs (default all: {', '.join(PROGRAMS)})")
    parser.add_argument("--out", type=Path, default=FIXTURES, help="fixture folder")
    args = parser.parse_args(argv)
    try:
        import tracr  # noqa: F401
    except ImportError:
        print("compiling needs Tracr: pip install 'attn-sink-circuits[tracr]'", file=sys.stderr)
        return 2
    for name in args.names or list(PROGRAMS):
        try:
            paths = write_fixture(name, args.out)
        except ValueError as err:
            print(err, file=sys.stderr)
            return 2
        print(f"{name}: {', '.join(str(p) for p in paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
