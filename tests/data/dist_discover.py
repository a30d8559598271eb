"""Run by tests/test_scale.py, alone or under torchrun: discover the planted P0 circuit and
save its edge scores, circuit and faithfulness values to argv[1] (rank 0; any other rank writes
into its scratch copy of the path, `writer_paths`). At exit each rank writes into its model folder
whether it still belonged to a process group after the library's exit handler ran."""

import atexit
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from attn_sink_circuits.discovery import DiscoveryConfig, discover, token_rows
from attn_sink_circuits.discovery.distributed import writer_paths
from attn_sink_circuits.models.planted import P0_TEXTS, planted_p0_model
from attn_sink_circuits.patching.metrics import p0_attention

torch.set_num_threads(1)
folder = Path(f"{sys.argv[2]}/rank{os.environ.get('RANK', '0')}")
# Registered before the library joins the group: exit handlers run last-in first-out.
atexit.register(lambda: (folder / "exit.txt").write_text(f"joined={dist.is_initialized()}"))
planted = planted_p0_model(folder=folder)
model = planted.model
fit, held = token_rows(model, P0_TEXTS[:5], 20), token_rows(model, P0_TEXTS[5:], 20)
# One text per gradient batch in both runs, so each text gets the same arithmetic (gradients
# taken in batches of different sizes differ by float rounding, ~2e-5 here).
config = DiscoveryConfig(
    n_curve=4, n_stability=4, n_exact_texts=1, max_exact=5, n_random=3, n_boot=50, grad_batch=1
)
circuit = discover(model, fit, held, p0_attention(list(planted.sink_layers)), config=config)
(out,) = writer_paths(Path(sys.argv[1]))
summary = circuit.summary()
torch.save(
    {
        "scores": circuit.scores,
        "mask": circuit.mask,
        "fit_faithfulness": circuit.fit_faithfulness,
        "heldout": summary["heldout_faithfulness"],
        "random": summary["random_faithfulness_mean"],
        "curve": circuit.curve.to_dict("list"),
    },
    out,
)
