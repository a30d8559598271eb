"""Moved: texts are read, hashed and split in `attn_sink_circuits.core.texts` and cut into token rows in
`attn_sink_circuits.core.tokens`. This module keeps the import path README.md documents (`from
attn_sink_circuits.discovery.texts import DEFAULT_TEXTS, read_kinded_texts, split_indices`)."""

from attn_sink_circuits.core.texts import (
    DEFAULT_TEXTS,
    PLAIN_KIND,
    read_kinded_texts,
    read_texts,
    split_indices,
    split_texts,
    texts_source,
)
from attn_sink_circuits.core.tokens import token_rows

__all__ = [
    "DEFAULT_TEXTS",
    "PLAIN_KIND",
    "read_kinded_texts",
    "read_texts",
    "split_indices",
    "split_texts",
    "texts_source",
    "token_rows",
]
