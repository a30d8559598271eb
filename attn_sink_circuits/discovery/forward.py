"""The edge-patched forward: run the model with every edge of the residual DAG either kept or
ablated, for many circuits at once, with gradients when asked.

Each receiver reads its own copy of the residual stream: the stream of the current run minus,
for every sender whose edge into it is (partly) ablated, (1 - c) times that sender's difference
from its ablated value,

    x_r = resid - sum_s (1 - c[r, s]) * (out_s - ablated_s),

with c[r, s] = 1 for a kept edge and 0 for an ablated one (values in between interpolate, which
is what integrated gradients walk along). Only the ablated positions (`positions`) are touched;
every other position reads the stream unchanged. With every c = 1 the run is the clean model,
exactly; with every c = 0 it is the fully ablated one. Sender outputs are those of the current
run (patched upstream edges change them), as in path patching and EAP-IG's evaluation; with
`clean_senders` they are the clean run's (the input-path EAP-IG's scores).

How receivers are fed without re-implementing attention: the model computes everything as
usual; hooks replace each head's q, k and v projections at the ablated positions by the
projection of its own normalised input, replace the MLP's input (ln2.hook_in), and hand the
metric its target's own input. Head outputs are read from hook_z through W_O (times the
post-attention norm's scale in models that have one). In the ungrouped graph of a grouped-query
model (`kv_inputs="ungrouped"`) every query head has its own k and v: the k / v hooks hand the
attention one per query head and the attention's key/value repetition is switched off for the
patched run (`ungrouped_attention`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.discovery.components import head_outputs
from attn_sink_circuits.discovery.config import ABLATIONS, KV_INPUTS, Ablation
from attn_sink_circuits.discovery.dag import EdgeSpace, build_space
from attn_sink_circuits.discovery.feed import SPARSE_SHARE, Feed, ungrouped_attention
from attn_sink_circuits.discovery.pairs import Pairs
from attn_sink_circuits.discovery.where import derangement, position_index, reference_mask, take
from attn_sink_circuits.patching.forward import (
    MetricReady,
    capture_run,
    forward_from,
    hook_layer,
    tile,
)
from attn_sink_circuits.patching.metrics import Metric, check_metric_range


@dataclass
class CleanRun:
    """Sender outputs of the unpatched run at the ablated positions, their ablated values and
    the unpatched metric per prompt."""

    outputs: Float[Tensor, "batch sender pos d_model"] | None  # None: a judging-only runner
    ablated: Float[Tensor, "batch sender pos d_model"]
    metric: Float[Tensor, " batch"]


class EdgeRunner:
    """Runs `tokens` [batch, pos] through `model` with edges of its residual DAG ablated.

    `positions`: where edges are ablated (None: every position); `ablation`: one of ABLATIONS.
    `tokens` may be counterfactual `Pairs`: the clean texts run, an ablated sender takes its
    value in the partner text (ablation 'resample'), and `metric` None means the pairs' own.
    `run(keep)` takes a keep-coefficient per circuit and edge [circuits, n_edges] (1 kept, 0
    ablated) and returns the metric per circuit and prompt [circuits, batch]. `kv_inputs`:
    "grouped" or "ungrouped" (`attn_sink_circuits.discovery.config.KvInputs`: k / v inputs per key/value
    head or per query head). `judging_only`: the clean outputs are not kept once the ablated
    values are made (half the memory): the runner judges circuits but cannot score edges.
    """

    def __init__(
        self,
        model,
        tokens: Int[Tensor, "batch pos"] | Pairs,
        metric: Metric | None,
        *,
        positions: Sequence[int] | Sequence[Sequence[int]] | None = (0,),
        ablation: str = "mean",
        seed: int = 0,
        kv_inputs: str = "grouped",
        judging_only: bool = False,
    ) -> None:
        ablation = Ablation.parse(ablation)
        if kv_inputs not in KV_INPUTS:
            raise ValueError(f"unknown kv_inputs {kv_inputs!r}; use one of {', '.join(KV_INPUTS)}")
        self.corrupt, self.pairs = None, tokens if isinstance(tokens, Pairs) else None
        if isinstance(tokens, Pairs):  # resample from each text's own partner
            if ablation != "resample":
                raise ValueError(
                    f"text pairs are ablated from the partner text (resample), not {ablation!r}: "
                    "set ablation='resample'"
                )
            tokens, self.corrupt, metric = tokens.clean, tokens.corrupt, metric or tokens.metric
        if not isinstance(metric, Metric):
            raise ValueError(f"metric must be a attn_sink_circuits.patching.Metric, got {metric!r}")
        if tokens.ndim != 2 or tokens.is_floating_point():
            raise ValueError("tokens must be an integer tensor [batch, pos]")
        n_batch, n_pos = tokens.shape
        if ablation == "resample" and n_batch < 2 and self.corrupt is None:
            raise ValueError("resample ablation needs at least 2 texts (it swaps texts)")
        self.where = position_index(positions, n_batch, n_pos)
        uniform = bool((self.where == self.where[0]).all())
        self.positions = self.where[0].tolist() if uniform else self.where.tolist()
        check_metric_range(model, metric)
        self.model, self.tokens, self.metric = model, tokens, metric
        self.space: EdgeSpace = build_space(
            model, metric, self.positions if uniform else None, kv_inputs
        )
        self.kv_inputs = kv_inputs
        n_layers = model.cfg.n_layers
        self.stop = (
            n_layers - 1 if metric.logits else max(hook_layer(h, n_layers) for h in metric.hooks)
        )
        self.ablation, self.seed = ablation, seed
        self.clean = self._clean_run(judging_only)

    # -- the unpatched run ------------------------------------------------------------------

    def _clean_run(self, judging_only: bool = False) -> CleanRun:
        where = self.where
        home = torch.device(self.model.cfg.device)  # the embedding's device in a split model
        ref = reference_mask(where, self.tokens.shape[1]).float()[:, None, :, None].to(home)
        n_senders = len(self.space.senders)
        # Each run's sender outputs at the ablated positions, written in place into one buffer
        # [batch, sender, pos, d] (the clean run's, then the partners'): no list to concatenate,
        # so a run's peak is one copy of them, not two.
        runs: list[Tensor | None] = []
        filled = [0]
        mean: list[Tensor] = []  # mean ablation: each group averaged over the reference positions
        want_mean = self.corrupt is None and self.ablation is Ablation.MEAN
        skip_clean = judging_only and self.corrupt is not None  # only the partners' are used

        def record(out: Tensor) -> None:  # out [batch, senders, all positions, d]
            out = out.to(home)
            if filled[0] == 0:
                shape = (out.shape[0], n_senders, where.shape[1], out.shape[-1])
                runs.append(None if skip_clean and not runs else out.new_empty(shape))
            k = out.shape[1]
            if runs[-1] is not None:
                at = take(out.transpose(1, 2), where).transpose(1, 2)
                runs[-1][:, filled[0] : filled[0] + k] = at
            filled[0] = (filled[0] + k) % n_senders
            if want_mean:
                mean.append((out * ref).sum(2, keepdim=True) / ref.sum(2, keepdim=True))

        def heads(layer):
            def hook(act, hook):
                record(head_outputs(self.model, layer, act).transpose(1, 2))

            return hook

        def single(act, hook):
            record(act.unsqueeze(1))

        fwd = [(hook_name("resid_pre", 0), single)]
        for layer in range(self.space.n_layers):
            fwd += [(hook_name("head", layer), heads(layer))]
            fwd += [(hook_name("mlp_out", layer), single)]
        with torch.no_grad(), self.model.hooks(fwd_hooks=fwd):
            run = capture_run(
                self.model, self.tokens, self.metric.hooks, self.stop, self.metric.logits,
                blocks=True, logit_pos=self.metric.logit_pos,
            )  # fmt: skip
            if self.corrupt is not None:  # the partners' sender outputs, same positions
                n_layers, last = self.model.cfg.n_layers, self.space.n_layers
                self.model(self.corrupt, stop_at_layer=None if last >= n_layers else last)
        if len(runs) != (1 if self.corrupt is None else 2) or filled[0] != 0:
            raise RuntimeError(f"the clean run recorded {len(runs)} run(s) of sender outputs, "
                               f"the last {filled[0] or n_senders} of {n_senders} senders")  # fmt: skip
        self.blocks = run
        ablated = runs[1] if self.corrupt is not None else self._ablated(runs[0], mean)
        metric = self.metric.read(run.acts, run.logits)  # logits cut to logit_pos
        return CleanRun(None if judging_only else runs[0], ablated, metric)

    def _ablated(self, outputs: Tensor, mean: list[Tensor]) -> Tensor:
        """The ablated sender values of texts without partners: zero, another text's outputs
        (resample: a seeded derangement) or each text's mean over its reference positions
        (`mean`, a tensor per sender group)."""
        if self.ablation is Ablation.ZERO:
            return torch.zeros_like(outputs)
        if self.ablation is Ablation.RESAMPLE:
            return outputs[derangement(outputs.shape[0], self.seed)]
        return torch.cat(mean, 1).expand_as(outputs).clone()

    def subset(self, rows: Sequence[int], metric: Metric | None = None) -> EdgeRunner:
        """A runner over texts `rows` only that shares this one's clean run and ablated values
        (so a resampled text keeps its partner from the full set): scoring in chunks of texts
        gives the same per-text values as one pass. A metric built for per-text positions must
        be given again for those rows (`metric`)."""
        per_text = not isinstance(self.positions[0], int)
        idx = torch.as_tensor(list(rows), dtype=torch.long)
        if per_text and metric is None:
            build = getattr(self, "metric_at", None)  # set by `discover`: positions -> Metric
            if build is None:
                raise ValueError("a runner with per-text positions needs the rows' metric")
            metric = build([self.positions[i] for i in idx.tolist()])
        n = self.tokens.shape[0]

        def cut(x):
            if isinstance(x, Tensor):
                return x[idx] if x.ndim >= 2 and x.shape[0] == n else x
            if isinstance(x, tuple | list):
                return type(x)(cut(t) for t in x)
            if isinstance(x, dict):
                return {k: cut(v) for k, v in x.items()}
            return x

        sub = copy.copy(self)
        sub.tokens, sub.where = self.tokens[idx], self.where[idx]
        if getattr(self, "corrupt", None) is not None:
            sub.corrupt = self.corrupt[idx]
        sub.metric = metric or self.metric.for_texts(idx.tolist())
        sub.positions = [self.positions[i] for i in idx.tolist()] if per_text else self.positions
        c = self.clean
        outputs = None if c.outputs is None else c.outputs[idx]
        sub.clean = CleanRun(outputs, c.ablated[idx], c.metric[idx])
        sub.blocks = copy.copy(self.blocks)
        for name in ("resid", "block_kwargs", "acts", "logits"):
            setattr(sub.blocks, name, cut(getattr(self.blocks, name)))
        return sub

    # -- the patched run --------------------------------------------------------------------

    def _forward(self, n_circ: int, start: int, fwd: list, targets: dict) -> Tensor:
        """Blocks `start`..`self.stop` on `n_circ` copies of the texts, from the clean residual
        entering block `start`, with hooks `fwd`; the metric reads the hooks it names, each
        target hook's value replaced by `targets[hook](act)`."""
        metric, n_batch = self.metric, self.tokens.shape[0]
        acts: dict[str, Tensor] = {}
        live = [h for h in metric.hooks if hook_layer(h, self.model.cfg.n_layers) >= start]

        def grab(name):
            def hook(act, hook):
                acts[name] = targets[name](act) if name in targets else act
                if not metric.logits and len(acts) == len(live):
                    raise MetricReady  # nothing after the metric's last hook can change it

            return hook

        resid = tile(self.blocks.resid[start], n_batch, n_circ)
        kwargs = [tile(kw, n_batch, n_circ) for kw in self.blocks.block_kwargs[start:]]
        layers = range(start, self.space.n_layers) if self.space.ungrouped else range(0)
        with (
            ungrouped_attention(self.model, layers),
            self.model.hooks(fwd_hooks=fwd + [(h, grab(h)) for h in live]),
        ):
            logits = forward_from(
                self.model, resid.clone(), start, self.stop, kwargs, metric.logits,
                metric.logit_pos,
            )  # fmt: skip
        for h in metric.hooks:
            if h not in acts:  # fired before block `start`: no patch can have changed it
                acts[h] = tile(self.blocks.acts[h], n_batch, n_circ)
        return metric.read(acts, logits)

    def coefficients(self, keep: Float[Tensor, "circuit edge"]) -> Tensor:
        """Dense keep-coefficients [circuit, receiver, sender] (1 where there is no edge)."""
        sp = self.space
        if keep.ndim != 2 or keep.shape[1] != sp.n_edges:
            raise ValueError(
                f"keep must be [circuits, {sp.n_edges}] (one value per edge), got "
                f"{tuple(keep.shape)}"
            )
        dense = torch.ones(keep.shape[0], len(sp.receivers), len(sp.senders), dtype=keep.dtype)
        dense[:, sp.edges[:, 0], sp.edges[:, 1]] = keep
        return dense

    def run(
        self,
        keep: Float[Tensor, "circuit edge"],
        *,
        per_row: Tensor | None = None,
        start: int = 0,
        clean_senders: bool = False,
        hooks: Sequence[tuple] = (),
        probes: list | None = None,
    ) -> Float[Tensor, "circuit batch"]:
        """The metric per circuit and prompt [circuit, batch] with edges kept per `keep`.

        `per_row`, when given, is a dense coefficient tensor [circuit * batch, receiver, sender]
        used as is (gradients flow into it); `keep` then only fixes the number of circuits.
        `start`: the first block whose inputs any ablated edge enters (earlier blocks are taken
        from the clean run, which is exact only if no edge into them is ablated).
        `clean_senders`: every sender's difference out_s - ablated_s is the clean run's, not the
        current run's. Where all edges out of a sender are kept nothing changes, and there
        d metric / d c[r, s] = (clean - ablated output of s) . d metric / d x_r: what the
        input-path EAP-IG integrates (`attribution.eap_ig_inputs`). `hooks`: further forward
        hooks (name, fn) of the patched run, after the receivers' own. `probes`: a list that
        gets (receiver rows, a zero tensor added to their inputs) per receiver group, to take
        gradients at (with clean senders: `attribution`'s fast gradient)."""
        n_batch = self.tokens.shape[0]
        n_circ = keep.shape[0]
        if per_row is None:
            per_row = self.coefficients(keep).repeat_interleave(n_batch, 0)
        feed = Feed(self, per_row, n_circ, start, clean_senders, probes)
        fwd, targets = feed.hooks(start)
        values = self._forward(n_circ, start, fwd + list(hooks), targets)
        return values.view(n_circ, n_batch)


def chunks(runner: EdgeRunner, batch: int | None) -> Iterator[EdgeRunner]:
    """Runners over consecutive chunks of at most `batch` texts (the runner itself when
    `batch` is None or covers every text)."""
    n = runner.tokens.shape[0]
    if batch is None or batch >= n:
        yield runner
        return
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive int, got {batch!r}")
    for i in range(0, n, batch):
        yield runner.subset(range(i, min(i + batch, n)))


def full_keep(space: EdgeSpace, n: int = 1, value: float = 1.0) -> Tensor:
    """Keep-coefficients [n, n_edges] all equal to `value` (1: the clean model, 0: empty)."""
    return torch.full((n, space.n_edges), float(value))


__all__ = [
    "ABLATIONS",
    "SPARSE_SHARE",
    "CleanRun",
    "EdgeRunner",
    "chunks",
    "full_keep",
    "head_outputs",
    "ungrouped_attention",
]
