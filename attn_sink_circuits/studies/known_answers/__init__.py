"""Known answers: models whose circuit is known by construction (Tracr-compiled RASP programs).

- `programs`: the compiled programs (vocabulary, lengths, the task data ACDC used);
- `compile`: compiles them with Tracr and writes the committed fixtures (needs the `[tracr]`
  extra: jax and dm-haiku; nothing else here does);
- `truth`: the true edges derived from what each block reads and writes, under zero ablation
  and under a task's resample corruption, and ACDC's published truth lists beside them;
- `sinks`: the design sinks (predicted BOS mass per query against measured);
- `scoring`, `planted`: every edge method against the truth of a compiled program or of a
  planted P0-sink model;
- `study`: the study in one call, `run(model, data, config) -> KnownAnswers`.

The compiled models load as TransformerBridges with `attn_sink_circuits.models.compiled.load_compiled`.
This module imports nothing heavy: names resolve lazily.
"""

from attn_sink_circuits._lazy import lazy_exports

_EXPORTS = {
    "KnownAnswers": "study",
    "KnownAnswersConfig": "study",
    "run": "study",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
