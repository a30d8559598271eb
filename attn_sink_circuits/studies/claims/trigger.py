"""Ran-Milo's theorems on the trigger-conditional task, in the claims table's form: small models
trained on the task (the `circuits trigger` training and measurement) and the hand-set ReLU
solution, each checked against the theorem whose setting it is."""

from __future__ import annotations

import torch

from attn_sink_circuits.runs.steps import Steps
from attn_sink_circuits.studies.claims.config import ClaimsConfig
from attn_sink_circuits.studies.claims.table import AUTO, Claim, ClaimsTable, claim_row
from attn_sink_circuits.studies.trigger import (
    Bounds,
    TrainConfig,
    TriggerModelConfig,
    TriggerTask,
    check_theorems,
    eval_batch,
    make_batch,
    measure,
    relu_construction,
    train_model,
)

PAPER = "Ran-Milo 2026"
WORDING = {
    "theorem 1": "a 1-layer softmax model with small error puts attention ~1 on BOS at every "
    "non-trigger position",
    "theorem 2": "in a multi-layer softmax model with small error some head does so",
    "theorem 3": "1-layer ReLU attention solves the task with ~0 attention on BOS",
}
MODELS = (("softmax", 1, 1), ("relu", 1, 1), ("softmax", 2, 2))
"""Trained models: (attention, layers, heads); theorem 3 is also checked on the hand-set
ReLU solution."""


BOUNDS = Bounds()
"""The theorems' bounds (`attn_sink_circuits.studies.trigger.measure`: "~1", "~0", "small error")."""


def theorem_rows(m, label: str, config: ClaimsConfig) -> list[Claim]:
    """The rows of the theorems whose setting measured model `m` is in: the strongest head's
    BOS attention at non-trigger positions, per evaluation sequence, against the theorem's
    bound (its interval decides); not applicable when a softmax model misses the premise
    (small error), does not hold when a ReLU model does."""
    top = m.strongest_sink()
    per_example = m.bos_nontrigger_per_example[top.layer][top.head]
    solved = m.rel_error_trigger <= BOUNDS.error_bound
    rows = []
    for check in check_theorems(m, BOUNDS):
        if check.detail == "not this theorem's setting":
            continue
        zero = check.theorem == "theorem 3"
        bound = "zero_bound" if zero else "sink_bound"
        ok = None if check.held is None else AUTO if solved else False
        rows.append(
            claim_row(
                config, per_example, bound, ok=ok, bound=getattr(BOUNDS, bound),
                sense="<=" if zero else ">=", family="trigger",
                claim=f"trigger.{check.theorem.replace(' ', '')}", paper=PAPER,
                wording=WORDING[check.theorem], measurement=f"{label}: mean BOS attention of "
                f"its strongest head (L{top.layer}.H{top.head}) at non-trigger positions",
                rule=("<= zero_bound" if zero else ">= sink_bound")
                + " and relative trigger error <= error_bound",
                detail=check.detail, over=f"{m.n_examples} evaluation sequences",
            )
        )  # fmt: skip
    return rows


def trigger_claims(
    config: ClaimsConfig = ClaimsConfig(),  # noqa: B008
    progress: bool = True,
) -> ClaimsTable:
    """Theorems 1-3 on a trained 1x1 softmax, a trained 1x1 ReLU and a trained 2x2 softmax model
    (`config.trigger_steps` steps, seed `config.seed`), and on the hand-set ReLU solution. A
    model outside a theorem's setting gives no row for it; one that misses the premise (small
    error) gives "not applicable". With `progress`, a bar on stderr names each model as it
    trains (under it, the training bar)."""
    torch.manual_seed(config.seed)
    task = TriggerTask()
    train = TrainConfig(steps=config.trigger_steps, n_checkpoints=1, seed=config.seed)

    def trained(attention: str, layers: int, heads: int) -> list[Claim]:
        model_config = TriggerModelConfig.for_task(
            task, attention=attention, n_layers=layers, n_heads=heads
        )
        result = train_model(task, model_config, train, progress)
        label = f"{attention} {layers}x{heads}, {config.trigger_steps} steps"
        return theorem_rows(measure(result.model, eval_batch(task, train)), label, config)

    def hand_set() -> list[Claim]:
        batch = make_batch(task, train.eval_examples, seed=config.seed + 1)
        return theorem_rows(
            measure(relu_construction(task), batch), "hand-set ReLU solution", config
        )

    rows = []
    with Steps(len(MODELS) + 1, "trigger claims", progress) as steps:
        for attention, layers, heads in MODELS:
            rows += steps.run(f"{attention} {layers}x{heads}", trained, attention, layers, heads)
        rows += steps.run("hand-set ReLU", hand_set)
    return ClaimsTable(rows)
