"""The one flag vocabulary of the `circuits` commands: checked number types, the shared options
(--model / --device / --dtype / --threads, --out, --texts, --corpus), one option per field of a
config (`config_options`, with a prefix such as `--edge-`) and the config they describe. Imports
no model code, so building the parser stays instant."""

from __future__ import annotations

import argparse
import math

from attn_sink_circuits.config import field_kind, flat_fields

DEFAULT_MODEL = "smollm2-135m"
DTYPES = ("float32", "bfloat16", "float16")
TEXTS_HELP = "text file: one text a line, or JSONL with a 'text' field and optionally a 'kind'"
DEFAULT_TEXTS_HELP = (
    f"{TEXTS_HELP} (default: data/texts/mix.jsonl, English prose, Python source, German prose "
    "and tables)"
)


def _number(kind: type, low: float | None = None, what: str = "", strict: bool = False):
    """An argparse type: text -> `kind`, finite, >= `low` (> when `strict`)."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'a whole number' if kind is int else 'a number'}"
            ) from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if low is not None and (value <= low if strict else value < low):
            raise argparse.ArgumentTypeError(f"{value} is too small: {what or f'>= {low}'}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


positive_int = _number(int, 1, "must be >= 1")
count_int = _number(int, 0, "must be >= 0")
positive_float = _number(float, 0.0, "must be > 0", strict=True)
nonneg_float = _number(float, 0.0, "must be >= 0")


def threads_option(p: argparse.ArgumentParser) -> None:
    """--threads: torch's CPU threads."""
    p.add_argument(
        "--threads",
        type=positive_int,
        help="torch CPU threads (default: OMP_NUM_THREADS when set, else the cores not already "
        "busy: allowed cores minus the load average)",
    )


def device_option(p: argparse.ArgumentParser) -> None:
    """--device, checked before the model loads (`attn_sink_circuits.cli.checks.check_device`)."""
    p.add_argument(
        "--device", default="cpu", help="torch device: cpu, cuda, cuda:N or mps (%(default)s)"
    )


def model_options(
    p: argparse.ArgumentParser, default: str | None = DEFAULT_MODEL, default_help: str = ""
) -> None:
    """--model (`default`, described by `default_help` when given), --device, --dtype and
    --threads, for commands that load a model."""
    p.add_argument(
        "--model",
        default=default,
        help=f"model key, .gguf path or HF folder ({default_help or '%(default)s'})",
    )
    device_option(p)
    p.add_argument("--dtype", default="float32", choices=DTYPES, help="weights dtype (%(default)s)")
    threads_option(p)


def out_option(p: argparse.ArgumentParser, what: str) -> None:
    """--out, a folder checked (writable, not a file) before any work, and --force."""
    p.add_argument(
        "--out",
        required=True,
        help=f"output folder: {what} (a new or empty folder, or an earlier run of this command, "
        "whose files are replaced; a folder holding anything else is refused)",
    )
    force_option(p)


def force_option(p: argparse.ArgumentParser) -> None:
    """--force: an --out folder holding other files than its run's (or another command's run)
    gets only that run's listed files replaced (`attn_sink_circuits.runs.owned`)."""
    p.add_argument(
        "--force",
        action="store_true",
        help="--out holds files its run did not write, or another command's run: replace only "
        "that run's own files and keep every other file",
    )


def texts_option(p, help: str = TEXTS_HELP) -> None:
    """--texts PATH on `p` (a parser or a group of one): a texts file (see
    `attn_sink_circuits.core.texts`)."""
    p.add_argument("--texts", metavar="PATH", help=help)


def corpus_option(p: argparse.ArgumentParser, what: str) -> None:
    """--corpus: a training corpus by name (`attn_sink_circuits.training.corpora.CORPORA`)."""
    from attn_sink_circuits.training.corpora import CORPORA

    p.add_argument(
        "--corpus",
        choices=CORPORA,
        default="stdlib",
        help=f"{what}: the Python standard library's source, or synthetic letters with "
        "back-copy triggers on which a sink forms in a few hundred steps "
        "(attn_sink_circuits.training.backcopy) (default: %(default)s)",
    )


def protocol_option(p: argparse.ArgumentParser) -> None:
    """--protocol: a named bundle of pair and discovery settings
    (`attn_sink_circuits.discovery.protocol.PROTOCOLS`); flags given explicitly win over it."""
    from attn_sink_circuits.discovery.protocol import PROTOCOLS

    about = "; ".join(f"{name}: {proto.about}" for name, proto in PROTOCOLS.items())
    p.add_argument(
        "--protocol",
        choices=tuple(PROTOCOLS),
        default="library",
        help=f"named settings of the pairs and of discovery, under the flags given explicitly "
        f"({about}) (default: %(default)s)",
    )


def config_options(
    p: argparse.ArgumentParser, config_cls: type, *, prefix: str = "", defaults=None
) -> None:
    """One option per leaf field of a config, with its help and default: `--field-name`, a
    nested config's fields with its prefix (`--edge-n-fit`, `attn_sink_circuits.config.flat_fields`),
    each nested config in its own group. `prefix` (e.g. "edge_") goes before every flag and
    destination; `defaults` (a config) replaces the class's defaults."""
    defaults = (defaults or config_cls()).to_flat()
    groups = {"": p.add_argument_group(f"settings ({config_cls.__name__})")}
    for name, path, f in flat_fields(config_cls):
        if path[0] not in groups and len(path) > 1:
            top = config_cls.__dataclass_fields__[path[0]]
            flags = (prefix + top.metadata["prefix"]).replace("_", "-")
            groups[path[0]] = p.add_argument_group(f"{top.metadata['help']} (--{flags}...)")
        group = groups[path[0] if len(path) > 1 else ""]
        kind, is_tuple, _ = field_kind(f)
        default = tuple(defaults[name]) if is_tuple else defaults[name]
        shown = " ".join(map(str, default)) if is_tuple else default
        kw = {"dest": prefix + name, "default": default,
              "help": f"{f.metadata['help']} (default: {shown})"}  # fmt: skip
        if kind is bool:
            kw["action"] = argparse.BooleanOptionalAction
        else:
            kw.update(type=kind, metavar=kind.__name__.upper())
        if is_tuple:
            kw["nargs"] = "+"
        if f.metadata["choices"]:
            kw["choices"] = f.metadata["choices"]
            kw.pop("metavar", None)
        group.add_argument("--" + (prefix + name).replace("_", "-"), **kw)


def config_from(args: argparse.Namespace, config_cls: type, prefix: str = ""):
    """The config the options describe (checked: a bad value is a ValueError naming it)."""
    values = {name: getattr(args, prefix + name) for name, _, _ in flat_fields(config_cls)}
    return config_cls().with_options(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    )


def given_options(args: argparse.Namespace, config_cls: type) -> tuple[str, ...]:
    """The flat names of the config options whose value differs from their default."""

    def plain(v):
        return list(v) if isinstance(v, tuple | list) else v

    defaults = config_cls().to_flat()
    names = [name for name, _, _ in flat_fields(config_cls)]
    return tuple(n for n in names if plain(getattr(args, n)) != plain(defaults[n]))


__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_TEXTS_HELP",
    "DTYPES",
    "TEXTS_HELP",
    "config_from",
    "config_options",
    "corpus_option",
    "count_int",
    "device_option",
    "force_option",
    "given_options",
    "model_options",
    "nonneg_float",
    "out_option",
    "positive_float",
    "positive_int",
    "protocol_option",
    "texts_option",
    "threads_option",
]
