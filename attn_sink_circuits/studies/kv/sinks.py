"""The sinks a cache should keep, per layer, from what `attn_sink_circuits.sinks` measured on a text.

The primary sink is kept at every layer. A secondary-sink event (Wong et al.) at position p
whose state is aligned with the primary sink's at layers l_start .. l_end is read as a sink by
the blocks after those layers, l_start + 1 .. l_end + 1 (block l reads block l - 1's output;
capped at the last block), so it is kept there and nowhere else. Which events count is chosen
by lifetime label (`KVConfig.sink_labels`).
"""

from __future__ import annotations

from collections.abc import Sequence

from attn_sink_circuits.sinks.secondary import SinkEvent


def layer_sinks(
    primary: int, events: Sequence[SinkEvent], n_layers: int, labels: Sequence[str]
) -> tuple[tuple[int, ...], ...]:
    """Per layer: the primary sink's position first, then the positions of the events with a
    label in `labels` that are active at that layer, in order."""
    active: list[set[int]] = [set() for _ in range(n_layers)]
    for event in events:
        if event.label not in labels:
            continue
        for layer in range(event.l_start + 1, min(event.l_end + 1, n_layers - 1) + 1):
            active[layer].add(event.position)
    return tuple((primary, *sorted(a - {primary})) for a in active)


def measured_sinks(model, tokens, config) -> tuple[tuple[int, ...], ...]:
    """`layer_sinks` of one token sequence (a list of ids), measured with `attn_sink_circuits.sinks`
    (`config.tau`, `config.sink_labels`; the chunked path for long texts)."""
    from attn_sink_circuits.sinks.runner import measure_tokens

    report = measure_tokens(model, [list(tokens)], tau=config.tau, progress=False)
    text = report.texts[0]
    return layer_sinks(text.sink.position, text.events, report.n_layers, config.sink_labels)


def kept_by_layers(per_layer: Sequence[Sequence[int]]) -> list[dict]:
    """`layer_sinks`' per-layer positions as runs of layers keeping the same positions:
    [{"layers": [first, last], "positions": [...]}, ...] (what a summary lists)."""
    runs: list[dict] = []
    for layer, positions in enumerate(per_layer):
        if runs and runs[-1]["positions"] == list(positions):
            runs[-1]["layers"][1] = layer
        else:
            runs.append({"layers": [layer, layer], "positions": list(positions)})
    return runs


__all__ = ["kept_by_layers", "layer_sinks", "measured_sinks"]
