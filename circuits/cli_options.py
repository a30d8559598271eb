"""The pieces every `circuits` subcommand is built from: checked argument types, the shared
options (--model/--device/--dtype, --out), options generated from a tracer config, and loading
the model. Imports no model code, so building the parser stays instant."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from circuits.config import field_kind, flat_fields

DEFAULT_MODEL = "smollm2-135m"
DTYPES = ("float32", "bfloat16", "float16")


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
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda (%(default)s)")
    p.add_argument("--dtype", default="float32", choices=DTYPES, help="weights dtype (%(default)s)")
    p.add_argument(
        "--threads",
        type=positive_int,
        help="torch CPU threads (default: OMP_NUM_THREADS when set, else the cores not already "
        "busy: allowed cores minus the load average)",
    )


def out_option(p: argparse.ArgumentParser, what: str) -> None:
    """--out, a folder checked (writable, not a file) before any work."""
    p.add_argument(
        "--out",
        required=True,
        help=f"output folder: {what} (replaced as a whole: only a new or empty folder, or one "
        "an earlier circuits run wrote)",
    )


def config_options(p: argparse.ArgumentParser, config_cls: type) -> None:
    """One option per leaf field of a tracer config, with its help and default: `--field-name`,
    a nested config's fields with its prefix (`--edge-n-fit`, `circuits.config.flat_fields`),
    each nested config in its own group."""
    defaults = config_cls().to_flat()
    groups = {"": p.add_argument_group(f"settings ({config_cls.__name__})")}
    for name, path, f in flat_fields(config_cls):
        if path[0] not in groups and len(path) > 1:
            top = config_cls.__dataclass_fields__[path[0]]
            flags = top.metadata["prefix"].replace("_", "-")
            groups[path[0]] = p.add_argument_group(f"{top.metadata['help']} (--{flags}...)")
        group = groups[path[0] if len(path) > 1 else ""]
        kind, is_tuple, _ = field_kind(f)
        default = defaults[name]
        default = tuple(default) if is_tuple else default
        shown = " ".join(map(str, default)) if is_tuple else default
        kw = {"dest": name, "default": default, "help": f"{f.metadata['help']} (default: {shown})"}
        if kind is bool:
            kw["action"] = argparse.BooleanOptionalAction
        else:
            kw["type"] = kind
            kw["metavar"] = kind.__name__.upper()
        if is_tuple:
            kw["nargs"] = "+"
        if f.metadata["choices"]:
            kw["choices"] = f.metadata["choices"]
            kw.pop("metavar", None)
        group.add_argument("--" + name.replace("_", "-"), **kw)


def config_from(args: argparse.Namespace, config_cls: type):
    """The config the options describe (checked: a bad value is a ValueError naming it)."""
    values = {name: getattr(args, name) for name, _, _ in flat_fields(config_cls)}
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


def check_out(path: str) -> Path:
    """The --out folder, refused at once when it cannot be written."""
    from circuits._io import check_out_folder

    return check_out_folder(path)


def check_checkpoints(path: str, resume: bool, option: str = "--checkpoints") -> Path:
    """A folder for a command's checkpoints, refused at once when it cannot be written, or when
    it already holds an earlier run's and `resume` is not set (nothing is silently reused or
    overwritten)."""
    from circuits._io import check_writable_folder

    folder = check_writable_folder(path, option)
    if not resume and folder.is_dir() and any(folder.iterdir()):
        raise ValueError(
            f"{option} {folder} holds the checkpoints of an earlier run: pass --resume to "
            "continue it, or delete the folder"
        )
    return folder


def load(args: argparse.Namespace):
    """The model named by --model on --device in --dtype."""
    import torch

    from circuits.models import load_model

    return load_model(args.model, device=args.device, dtype=getattr(torch, args.dtype))


def short(value, depth: int = 0) -> str:
    """A value as a reader wants it on a terminal: numbers to 4 significant digits, short lists
    inline, a dict of dicts by its keys only (the whole of it is in summary.json)."""
    from circuits._repr import number

    if isinstance(value, float):
        return number(value, ",.0f" if 1e4 <= abs(value) < 1e12 else ".4g")
    if isinstance(value, list | tuple):
        shown = ", ".join(short(v, depth + 1) for v in value[:6])
        return f"[{shown}{', ...' if len(value) > 6 else ''}]"
    if isinstance(value, dict):
        if depth or any(isinstance(v, dict) for v in value.values()):
            return f"{', '.join(map(str, value))} (see summary.json)"
        return "; ".join(f"{k}: {short(v, depth + 1)}" for k, v in value.items())
    return str(value)


def print_summary(summary: dict) -> None:
    """One line a key, values by `short`."""
    width = max(map(len, summary), default=0) + 1
    for key, value in summary.items():
        print(f"{key:<{width}} {short(value)}")
