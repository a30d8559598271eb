"""Known answers: models whose circuit is known by construction (Tracr-compiled RASP programs).

- `programs`: the compiled programs (vocabulary, lengths, the task data ACDC used);
- `compile`: compiles them with Tracr and writes the committed fixtures (needs the `[tracr]`
  extra: jax and dm-haiku; nothing else here does);
- `truth`: the true edges derived from what each block reads and writes, under zero ablation
  and under a task's resample corruption, and ACDC's published truth lists beside them;
- `sinks`: the design sinks (predicted BOS mass per query against measured).

The compiled models load as TransformerBridges with `attn_sink_circuits.models.compiled.load_compiled`.
This module imports nothing heavy.
"""
