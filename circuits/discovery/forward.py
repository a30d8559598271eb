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
post-attention norm's scale in models that have one).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from circuits.discovery.components import _project, head_outputs
from circuits.discovery.config import ABLATIONS, Ablation
from circuits.discovery.dag import EdgeSpace, build_space
from circuits.discovery.pairs import Pairs
from circuits.discovery.where import _derangement, _reference_mask, _where, put, take
from circuits.patching.forward import MetricReady, capture_run, forward_from, hook_layer, tile
from circuits.patching.metrics import Metric

SPARSE_SHARE = 0.01
"""Below this share of ablated (or of kept) edges into a block's inputs, and without gradients,
receiver inputs sum only those senders' differences (the same values, far fewer operations)."""


@dataclass
class CleanRun:
    """Sender outputs of the unpatched run at the ablated positions, their ablated values and
    the unpatched metric per prompt."""

    outputs: Float[Tensor, "batch sender pos d_model"]
    ablated: Float[Tensor, "batch sender pos d_model"]
    metric: Float[Tensor, " batch"]


class EdgeRunner:
    """Runs `tokens` [batch, pos] through `model` with edges of its residual DAG ablated.

    `positions`: where edges are ablated (None: every position); `ablation`: one of ABLATIONS.
    `tokens` may be counterfactual `Pairs`: the clean texts run, an ablated sender takes its
    value in the partner text (ablation 'resample'), and `metric` None means the pairs' own.
    `run(keep)` takes a keep-coefficient per circuit and edge [circuits, n_edges] (1 kept, 0
    ablated) and returns the metric per circuit and prompt [circuits, batch].
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
    ) -> None:
        ablation = Ablation.parse(ablation)
        self.corrupt, self.pairs = None, tokens if isinstance(tokens, Pairs) else None
        if isinstance(tokens, Pairs):  # resample from each text's own partner
            if ablation != "resample":
                raise ValueError(
                    f"text pairs are ablated from the partner text (resample), not {ablation!r}: "
                    "set ablation='resample'"
                )
            tokens, self.corrupt, metric = tokens.clean, tokens.corrupt, metric or tokens.metric
        if not isinstance(metric, Metric):
            raise ValueError(f"metric must be a circuits.patching.Metric, got {metric!r}")
        if tokens.ndim != 2 or tokens.is_floating_point():
            raise ValueError("tokens must be an integer tensor [batch, pos]")
        n_batch, n_pos = tokens.shape
        if ablation == "resample" and n_batch < 2 and self.corrupt is None:
            raise ValueError("resample ablation needs at least 2 texts (it swaps texts)")
        self.where = _where(positions, n_batch, n_pos)
        uniform = bool((self.where == self.where[0]).all())
        self.positions = self.where[0].tolist() if uniform else self.where.tolist()
        self.model, self.tokens, self.metric = model, tokens, metric
        self.space: EdgeSpace = build_space(model, metric, self.positions if uniform else None)
        n_layers = model.cfg.n_layers
        self.stop = (
            n_layers - 1 if metric.logits else max(hook_layer(h, n_layers) for h in metric.hooks)
        )
        self.ablation, self.seed = ablation, seed
        self.clean = self._clean_run()

    # -- the unpatched run ------------------------------------------------------------------

    def _clean_run(self) -> CleanRun:
        where = self.where
        home = torch.device(self.model.cfg.device)  # the embedding's device in a split model
        ref = _reference_mask(where, self.tokens.shape[1]).float()[:, None, :, None].to(home)
        at: list[Tensor] = []  # per sender group: [batch, senders, pos, d] at the ablated positions
        mean: list[Tensor] = []  # the same, averaged over the reference positions

        def record(out: Tensor) -> None:  # out [batch, senders, all positions, d]
            out = out.to(home)
            at.append(take(out.transpose(1, 2), where).transpose(1, 2))
            mean.append((out * ref).sum(2, keepdim=True) / ref.sum(2, keepdim=True))

        def heads(layer):
            def hook(act, hook):
                record(head_outputs(self.model, layer, act).transpose(1, 2))

            return hook

        def single(act, hook):
            record(act.unsqueeze(1))

        fwd = [("blocks.0.hook_resid_pre", single)]
        for layer in range(self.space.n_layers):
            fwd += [(f"blocks.{layer}.attn.hook_z", heads(layer))]
            fwd += [(f"blocks.{layer}.hook_mlp_out", single)]
        with torch.no_grad(), self.model.hooks(fwd_hooks=fwd):
            run = capture_run(
                self.model, self.tokens, self.metric.hooks, self.stop, self.metric.logits,
                blocks=True,
            )  # fmt: skip
            if self.corrupt is not None:  # the partners' sender outputs, same positions
                n_clean, n_layers = len(at), self.model.cfg.n_layers
                last = self.space.n_layers
                self.model(self.corrupt, stop_at_layer=None if last >= n_layers else last)
                partner = torch.cat(at[n_clean:], 1)
                del at[n_clean:], mean[n_clean:]
        metric = self.metric(run.acts, run.logits)
        self.blocks = run
        outputs = torch.cat(at, 1)
        if self.corrupt is not None:
            ablated = partner
        elif self.ablation is Ablation.ZERO:
            ablated = torch.zeros_like(outputs)
        elif self.ablation is Ablation.RESAMPLE:
            ablated = outputs[_derangement(outputs.shape[0], self.seed)]
        else:
            ablated = torch.cat(mean, 1).expand_as(outputs).clone()
        return CleanRun(outputs, ablated, metric)

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
        sub.clean = CleanRun(c.outputs[idx], c.ablated[idx], c.metric[idx])
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
        with self.model.hooks(fwd_hooks=fwd + [(h, grab(h)) for h in live]):
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
    ) -> Float[Tensor, "circuit batch"]:
        """The metric per circuit and prompt [circuit, batch] with edges kept per `keep`.

        `per_row`, when given, is a dense coefficient tensor [circuit * batch, receiver, sender]
        used as is (gradients flow into it); `keep` then only fixes the number of circuits.
        `start`: the first block whose inputs any ablated edge enters (earlier blocks are taken
        from the clean run, which is exact only if no edge into them is ablated).
        `clean_senders`: every sender's difference out_s - ablated_s is the clean run's, not the
        current run's. Where all edges out of a sender are kept nothing changes, and there
        d metric / d c[r, s] = (clean - ablated output of s) . d metric / d x_r: what the
        input-path EAP-IG integrates (`attribution.eap_ig_inputs`)."""
        n_batch = self.tokens.shape[0]
        n_circ = keep.shape[0]
        if per_row is None:
            per_row = self.coefficients(keep).repeat_interleave(n_batch, 0)
        feed = _Feed(self, per_row, n_circ, start, clean_senders)
        values = self._forward(n_circ, start, *feed.hooks(start))
        return values.view(n_circ, n_batch)


class _Feed:
    """The receivers' inputs of one patched run of `runner` on `n_circ` copies of its texts:
    forward hooks that feed receiver r x_r = resid - sum_s drop[r, s] * delta_s at the ablated
    positions (drop = 1 - coef), and the sender differences delta_s = out_s - ablated_s they
    collect as the run goes [rows, pos, d]. Senders before block `start` wrote what they wrote
    in the clean run; with `clean_senders` every sender's difference is the clean run's."""

    def __init__(
        self, runner: EdgeRunner, coef: Tensor, n_circ: int, start: int, clean_senders: bool
    ) -> None:
        sp = self.space = runner.space
        self.model, self.coef, self.drop = runner.model, coef, 1 - coef
        self.where = runner.where.repeat(n_circ, 1)
        self.ablated = runner.clean.ablated.repeat(n_circ, 1, 1, 1)
        known = len(sp.senders) if clean_senders else (1 + start * (sp.n_heads + 1) if start else 0)
        clean = (runner.clean.outputs - runner.clean.ablated)[:, :known].repeat(n_circ, 1, 1, 1)
        self.deltas: list[Tensor] = list(clean.unbind(1))
        self.resid: Tensor | None = None  # the stream entering the current block, ablated positions

    def _sparse_sum(self, x: Tensor, w: Tensor) -> Tensor:
        """x [n, rows, pos, d] plus sum_s w[n, row, s] * delta_s over the nonzero w."""
        nz = w.nonzero()
        for s in nz[:, 2].unique().tolist():
            i, r = nz[nz[:, 2] == s, :2].unbind(1)  # (row, receiver) pairs, unique
            x[i, r] += w[i, r, s][:, None, None] * self.deltas[s][i].to(x.device).float()
        return x

    def inputs(self, rows: list[int], resid: Tensor) -> Tensor:
        """Inputs of receivers `rows` [n, len(rows), pos, d] at the ablated positions."""
        n, grad = self.space.n_senders[rows[0]], self.coef.requires_grad
        d = self.drop[:, rows, :n].to(resid.device)
        deltas = self.deltas[:n]
        # Summed in float32, handed back in the model's dtype (bfloat16 / float16 models).
        # Every sender's difference moves to the receiving block's device. Without gradients
        # and with few ablated edges (path patching) or few kept ones (small circuits), only
        # those senders are summed: the same values, far fewer operations.
        if not grad and (d != 0).float().mean() < SPARSE_SHARE:
            x = resid.float().unsqueeze(1).repeat(1, len(rows), 1, 1)
            return self._sparse_sum(x, -d).to(resid.dtype)
        if not grad and (d != 1).float().mean() < SPARSE_SHARE:
            total = sum(delta.to(resid.device).float() for delta in deltas)
            x = (resid.float() - total).unsqueeze(1).repeat(1, len(rows), 1, 1)
            return self._sparse_sum(x, 1 - d).to(resid.dtype)
        stack = torch.stack([delta.to(resid.device) for delta in deltas], 1).float()
        x = resid.unsqueeze(1) - torch.einsum("nrs,nspd->nrpd", d, stack)
        return x.to(resid.dtype)

    def _add(self, out: Tensor, first: int) -> None:
        """Senders `first`.. output `out` [rows, senders, pos, d] in this run (unless known)."""
        if len(self.deltas) > first:  # taken from the clean run
            return
        for i in range(out.shape[1]):
            self.deltas.append(out[:, i] - self.ablated[:, first + i].to(out.device))

    def hooks(self, start: int) -> tuple[list, dict]:
        """Forward hooks of blocks `start`.. (and of the final residual for logit metrics), and
        the replacement of each other target's value (`EdgeRunner._forward`'s `targets`)."""
        sp, where, fwd, targets = self.space, self.where, [], {}
        for layer in range(start, sp.n_layers):
            first = 1 + layer * (sp.n_heads + 1)
            fwd.append((f"blocks.{layer}.hook_resid_pre", self._resid_pre(layer)))
            fwd += [(f"blocks.{layer}.attn.{k}.hook_out", self._qkv(layer, k))
                    for k in ("q", "k", "v") if sp.group(layer, k)]  # fmt: skip
            fwd.append((f"blocks.{layer}.attn.hook_z", self._heads_out(layer, first)))
            fwd.append((f"blocks.{layer}.ln2.hook_in", self._mlp_in(layer)))
            fwd.append((f"blocks.{layer}.hook_mlp_out", self._mlp_out(first + sp.n_heads)))
        for r, rec in enumerate(sp.receivers):
            if rec.kind != "target":
                continue

            def target(act, r=r):
                return put(act, where, self.inputs([r], take(act, where))[:, 0])

            if rec.hook == "ln_final.hook_in":
                fwd.append((rec.hook, lambda act, hook, t=target: t(act)))
            else:
                targets[rec.hook] = target
        return fwd, targets

    def _resid_pre(self, layer: int):
        def hook(act, hook):
            self.resid = take(act, self.where)
            if layer == 0:
                self._add(self.resid.unsqueeze(1), 0)

        return hook

    def _qkv(self, layer: int, kind: str):
        rows = self.space.group(layer, kind)

        def hook(act, hook):
            x = _project(self.model, layer, kind, self.inputs(rows, self.resid))
            return put(act, self.where, x)

        return hook

    def _heads_out(self, layer: int, first: int):
        def hook(act, hook):
            out = head_outputs(self.model, layer, take(act, self.where)).transpose(1, 2)
            self._add(out, first)

        return hook

    def _mlp_in(self, layer: int):
        rows = self.space.group(layer, "mlp")

        def hook(act, hook):
            return put(act, self.where, self.inputs(rows, take(act, self.where))[:, 0])

        return hook

    def _mlp_out(self, index: int):
        def hook(act, hook):
            self._add(take(act, self.where).unsqueeze(1), index)

        return hook


def full_keep(space: EdgeSpace, n: int = 1, value: float = 1.0) -> Tensor:
    """Keep-coefficients [n, n_edges] all equal to `value` (1: the clean model, 0: empty)."""
    return torch.full((n, space.n_edges), float(value))


__all__ = ["ABLATIONS", "CleanRun", "EdgeRunner", "full_keep", "head_outputs"]
