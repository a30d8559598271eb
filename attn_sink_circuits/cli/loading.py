"""Loading the model a command names: the one place the commands load one (tests replace
`load` here to run a command on a small model, or to check nothing loads)."""

from __future__ import annotations

import argparse


def load(args: argparse.Namespace):
    """The model named by --model on --device in --dtype."""
    import torch

    from attn_sink_circuits.models import load_model

    return load_model(args.model, device=args.device, dtype=getattr(torch, args.dtype))


__all__ = ["load"]
