"""The trigger-conditional task of Ran-Milo 2026: softmax attention needs a sink, ReLU does not.

`data` makes the task, `model` the hookable softmax/ReLU transformers (and the hand-set ReLU
solution of Theorem 3), `train` trains them on CPU, `measure` gives task error, BOS attention and
the theorem checks (`measure_trigger`), `circuit` the head roles as a circuit graph
(`trigger_graph`), `experiment` the multi-seed table, `study` the study in one call
(`run(model, data, config) -> TriggerResult`). Plots live in
`attn_sink_circuits.studies.trigger.plots`.
"""

from attn_sink_circuits.studies.trigger.circuit import (
    AGGREGATE_THRESHOLD,
    SINK_THRESHOLD,
    HeadRole,
    head_roles,
    roles_frame,
    trigger_graph,
)
from attn_sink_circuits.studies.trigger.data import (
    TriggerBatch,
    TriggerTask,
    make_batch,
    trigger_targets,
)
from attn_sink_circuits.studies.trigger.experiment import (
    ExperimentGrid,
    TriggerExperiment,
    TriggerRun,
    run_experiment,
    save_experiment,
)
from attn_sink_circuits.studies.trigger.measure import (
    ERROR_BOUND,
    SINK_BOUND,
    ZERO_BOUND,
    Bounds,
    HeadBOS,
    TheoremCheck,
    TriggerMeasurement,
    bos_attention,
    check_theorems,
    measure_trigger,
)
from attn_sink_circuits.studies.trigger.model import (
    ATTENTION_KINDS,
    TriggerModelConfig,
    TriggerTransformer,
    relu_construction,
)
from attn_sink_circuits.studies.trigger.study import TriggerResult, run
from attn_sink_circuits.studies.trigger.train import (
    Checkpoint,
    TrainResult,
    TriggerTrainConfig,
    eval_batch,
    load_result,
    load_trigger_checkpoint,
    save_checkpoints,
    save_result,
    train_model,
)

# The names these had before they were told apart from `circuits.measure`, the other
# `circuit_graph`s and `attn_sink_circuits.training.TrainConfig`; notebook 03 imports them (CHANGELOG.md
# "Moved").
measure = measure_trigger
circuit_graph = trigger_graph
TrainConfig = TriggerTrainConfig

__all__ = [
    "AGGREGATE_THRESHOLD",
    "ATTENTION_KINDS",
    "ERROR_BOUND",
    "SINK_BOUND",
    "SINK_THRESHOLD",
    "ZERO_BOUND",
    "Bounds",
    "Checkpoint",
    "ExperimentGrid",
    "HeadBOS",
    "HeadRole",
    "TheoremCheck",
    "TrainConfig",
    "TrainResult",
    "TriggerBatch",
    "TriggerExperiment",
    "TriggerMeasurement",
    "TriggerModelConfig",
    "TriggerResult",
    "TriggerRun",
    "TriggerTask",
    "TriggerTrainConfig",
    "TriggerTransformer",
    "bos_attention",
    "check_theorems",
    "circuit_graph",
    "eval_batch",
    "head_roles",
    "load_result",
    "load_trigger_checkpoint",
    "make_batch",
    "measure",
    "measure_trigger",
    "relu_construction",
    "roles_frame",
    "run",
    "run_experiment",
    "save_checkpoints",
    "save_experiment",
    "save_result",
    "train_model",
    "trigger_graph",
    "trigger_targets",
]
