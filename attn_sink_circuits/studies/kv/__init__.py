"""KV-cache policies decided by the sinks the library measures (issue 35).

In a notebook, three calls: `model = load_model(...)`, `result = kv.run(model, data, config)`
(`data`: a texts file, a list of texts, None: the bundled long texts; `config`: a
`KVRunConfig`, None: `circuits kv`'s defaults), then `result.summary()` (the finding first) and
`result.figures()`; `result.save(folder)` writes what `circuits kv` writes.

`policies`: named cache policies with one signature (`POLICIES`: full, window, streaming_llm,
heavy_hitters, snapkv, sink_aware), each giving per layer which cached positions a query may
attend to under a budget, in a streaming or a compress-once mode; `sinks`: the measured primary
and secondary sinks as per-layer positions; `evaluate`: the perplexity of a continuation under
a policy, through attention-score hooks; `positions`: kept keys at their own positions or
re-indexed inside the cache (StreamingLLM); `blocking`: the sinks blocked against as many random
keys; `stream`: bounded-memory streaming of long texts (chunks of queries, no whole pattern);
`passkey` / `retrieval`: a pass key told once, asked for after the cache is compressed
(`passkey_check`: its run folders);
`config`: `KVConfig`, `KVRunConfig`; `table`: the policy table (`policy_table`, `pooled`);
`study`: the study end to end (`run` -> `KVResult`, saved as one folder), which `circuits kv`
runs (`run_kv`, the earlier entry taking texts and kinds, still works); `plots`: its figure;
`experiments` / `streaming`: StreamingLLM's experiment and the policies at equal budgets on
long texts, the committed docs/kv run folders (`python -m attn_sink_circuits.studies.kv.streaming`).
Names resolve lazily: importing this package loads no model code.
"""

from __future__ import annotations

from attn_sink_circuits._lazy import lazy_exports

_EXPORTS = {
    "KVConfig": "config",
    "KVRunConfig": "config",
    "DEFAULT_TEXTS": "config",
    "SCORE_FROM": "config",
    "POLICIES": "policies",
    "READS_ATTENTION": "policies",
    "READS_SINKS": "policies",
    "CacheView": "policies",
    "get_policy": "policies",
    "layer_sinks": "sinks",
    "measured_sinks": "sinks",
    "PolicyScore": "evaluate",
    "keep_masks": "evaluate",
    "masked_nll": "evaluate",
    "score": "evaluate",
    "BlockScore": "blocking",
    "blocking_table": "blocking",
    "POSITIONS": "positions",
    "streaming_nll": "stream",
    "policy_table": "table",
    "pooled": "table",
    "KVResult": "study",
    "run": "study",
    "run_kv": "study",
    "MIN_FULL_ACCURACY": "retrieval",
    "PasskeyPrompt": "passkey",
    "RetrievalRow": "retrieval",
    "mark_applicable": "retrieval",
    "passkey_prompts": "passkey",
    "pooled_accuracy": "retrieval",
    "retrieval_table": "retrieval",
    "score_prompt": "retrieval",
    "wilson_interval": "retrieval",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
