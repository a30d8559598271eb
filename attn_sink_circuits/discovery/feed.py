"""The receivers' inputs of one edge-patched run (`attn_sink_circuits.discovery.forward.EdgeRunner.run`):
forward hooks that feed each receiver its own copy of the residual stream, less the ablated
share of each sender's difference from its ablated value, and collect those differences as the
run goes; and the switch that lets a grouped-query attention take one k / v per query head."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from attn_sink_circuits.core.sites import FINAL_RESID, hook_name
from attn_sink_circuits.discovery.components import head_outputs, project_qkv
from attn_sink_circuits.discovery.where import put, take

if TYPE_CHECKING:
    from attn_sink_circuits.discovery.forward import EdgeRunner

SPARSE_SHARE = 0.01
"""Below this share of ablated (or of kept) edges into a block's inputs, and without gradients,
receiver inputs sum only those senders' differences (the same values, far fewer operations)."""


class Feed:
    """The receivers' inputs of one patched run of `runner` on `n_circ` copies of its texts:
    forward hooks that feed receiver r x_r = resid - sum_s drop[r, s] * delta_s at the ablated
    positions (drop = 1 - coef), and the sender differences delta_s = out_s - ablated_s they
    collect as the run goes [rows, pos, d]. Senders before block `start` wrote what they wrote
    in the clean run; with `clean_senders` every sender's difference is the clean run's. With
    `probes` (a list) each receiver group's input gets a zero tensor added that gradients can be
    taken at, appended as (rows, probe): d metric / d coef[r, s] is then that gradient . delta_s
    (clean senders), so the coefficients need no gradient of their own."""

    def __init__(
        self,
        runner: EdgeRunner,
        coef: Tensor,
        n_circ: int,
        start: int,
        clean_senders: bool,
        probes: list | None = None,
    ) -> None:
        sp = self.space = runner.space
        self.model, self.coef, self.drop = runner.model, coef, 1 - coef
        self.where = runner.where.repeat(n_circ, 1)
        self.ablated, self.n_circ = runner.clean.ablated, n_circ  # [batch, ...]: not tiled
        known = len(sp.senders) if clean_senders else (1 + start * (sp.n_heads + 1) if start else 0)
        c = runner.clean
        if known and c.outputs is None:
            raise ValueError("this runner kept no clean outputs (judging only): patch from "
                             "block 0 with the current run's senders")  # fmt: skip
        clean = c.ablated[:, :0] if not known else c.outputs[:, :known] - c.ablated[:, :known]
        clean = clean.repeat(n_circ, 1, 1, 1)
        self.stack: Tensor | None = None  # without gradients: every delta written once, float32
        if not coef.requires_grad and probes is None:
            rows, _, *rest = c.ablated.shape
            self.stack = clean.new_empty(rows * n_circ, len(sp.senders), *rest, dtype=torch.float32)
            self.stack[:, :known] = clean
            clean = self.stack[:, :known]
        self.deltas: list[Tensor] = list(clean.unbind(1))
        self.total, self.summed = None, 0  # running sum of deltas[:summed] (`_sum`)
        self.resid: Tensor | None = None  # the stream entering the current block, ablated positions
        self.probes = probes

    def _sparse_sum(self, x: Tensor, w: Tensor) -> Tensor:
        """x [n, rows, pos, d] plus sum_s w[n, row, s] * delta_s over the nonzero w."""
        nz = w.nonzero()
        for s in nz[:, 2].unique().tolist():
            i, r = nz[nz[:, 2] == s, :2].unbind(1)  # (row, receiver) pairs, unique
            x[i, r] += w[i, r, s][:, None, None] * self.deltas[s][i].to(x.device).float()
        return x

    def _sum(self, n: int, device) -> Tensor:
        """The sum of the first `n` sender differences (float32). Receiver groups ask for
        nondecreasing n in forward order, so the sum runs on: each difference is added once a
        run, not once a group (the same additions in the same order as a fresh sum)."""
        if n < self.summed:
            self.total, self.summed = None, 0
        for delta in self.deltas[self.summed : n]:
            delta = delta.to(device).float()
            self.total = delta if self.total is None else self.total.to(device) + delta
        self.summed = n
        return self.total.to(device)

    def _stack(self, n: int, device) -> Tensor:
        """The first `n` sender differences stacked [rows, n, pos, d] (float32) in a run
        without gradients: a view of the one buffer each difference was written into when made
        (a sender's difference never changes once made)."""
        return self.stack[:, :n].to(device)

    def _probed(self, rows: list[int], resid: Tensor, d: Tensor) -> Tensor:
        """The inputs with a probe added (`probes`); only the senders some coefficient scales
        (d != 0) are summed."""
        x = resid.float().unsqueeze(1).expand(-1, len(rows), -1, -1)
        cols = d.ne(0).any(1).any(0).nonzero().flatten().tolist()
        if cols:
            stack = torch.stack([self.deltas[s].to(resid.device) for s in cols], 1).float()
            x = x - torch.einsum("nrs,nspd->nrpd", d[:, :, cols], stack)
        probe = torch.zeros(x.shape, device=x.device, requires_grad=True)
        self.probes.append((rows, probe))
        return (x + probe).to(resid.dtype)

    def inputs(self, rows: list[int], resid: Tensor) -> Tensor:
        """Inputs of receivers `rows` [n, len(rows), pos, d] at the ablated positions."""
        n, grad = self.space.n_senders[rows[0]], self.coef.requires_grad
        d = self.drop[:, rows, :n].to(resid.device)
        if self.probes is not None:
            return self._probed(rows, resid, d)
        deltas = self.deltas[:n]
        # Summed in float32, handed back in the model's dtype (bfloat16 / float16 models).
        # Every sender's difference moves to the receiving block's device. Without gradients
        # and with few ablated edges (path patching) or few kept ones (small circuits), only
        # those senders are summed: the same values, far fewer operations.
        if not grad and (d != 0).float().mean() < SPARSE_SHARE:
            x = resid.float().unsqueeze(1).repeat(1, len(rows), 1, 1)
            return self._sparse_sum(x, -d).to(resid.dtype)
        if not grad and (d != 1).float().mean() < SPARSE_SHARE:
            x = (resid.float() - self._sum(n, resid.device)).unsqueeze(1).repeat(1, len(rows), 1, 1)
            return self._sparse_sum(x, 1 - d).to(resid.dtype)
        # With gradients a fresh stack per group: a shared one sums its gradients in another
        # order (1e-8 apart), which the mask's training amplifies (the planted test's circuit).
        stack = torch.stack([t.to(resid.device) for t in deltas], 1).float() if grad else None
        stack = self._stack(n, resid.device) if stack is None else stack
        x = resid.unsqueeze(1) - torch.einsum("nrs,nspd->nrpd", d, stack)
        return x.to(resid.dtype)

    def _add(self, out: Tensor, first: int) -> None:
        """Senders `first`.. output `out` [rows, senders, pos, d] in this run (unless known)."""
        if len(self.deltas) > first:  # taken from the clean run
            return
        for i in range(out.shape[1]):
            ablated = self.ablated[:, first + i].to(out.device)
            delta = out[:, i] - ablated.repeat(self.n_circ, 1, 1)
            if self.stack is not None:
                self.stack[:, first + i] = delta
                delta = self.stack[:, first + i]
            self.deltas.append(delta)

    def hooks(self, start: int) -> tuple[list, dict]:
        """Forward hooks of blocks `start`.. (and of the final residual for logit metrics), and
        the replacement of each other target's value (`EdgeRunner._forward`'s `targets`)."""
        sp, where, fwd, targets = self.space, self.where, [], {}
        for layer in range(start, sp.n_layers):
            first = 1 + layer * (sp.n_heads + 1)
            fwd.append((hook_name("resid_pre", layer), self._resid_pre(layer)))
            fwd += [(hook_name(f"{k}_out", layer), self._qkv(layer, k))
                    for k in ("q", "k", "v") if sp.group(layer, k)]  # fmt: skip
            fwd.append((hook_name("head", layer), self._heads_out(layer, first)))
            fwd.append((hook_name("mlp_norm_in", layer), self._mlp_in(layer)))
            fwd.append((hook_name("mlp_out", layer), self._mlp_out(first + sp.n_heads)))
        for r, rec in enumerate(sp.receivers):
            if rec.kind != "target":
                continue

            def target(act, r=r):
                return put(act, where, self.inputs([r], take(act, where))[:, 0])

            if rec.hook == FINAL_RESID:
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

        def hook(act, hook):  # act [rows, pos, heads, d_head]
            x = project_qkv(self.model, layer, kind, self.inputs(rows, self.resid))
            if act.shape[2] != x.shape[2]:  # ungrouped: each query head its own k / v
                act = act.repeat_interleave(x.shape[2] // act.shape[2], 2)
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


@contextmanager
def ungrouped_attention(model, layers: Sequence[int]) -> Iterator[None]:
    """For the duration, the attention of blocks `layers` takes k and v as given, one per query
    head, instead of repeating each key/value head over its group (the ungrouped graph's
    patched run hands it one per query head)."""
    attns = [model.blocks[layer].attn.original_component for layer in layers]
    if any(not hasattr(a, "num_key_value_groups") for a in attns):
        raise ValueError(
            "this model's attention does not repeat key/value heads through "
            "num_key_value_groups, so its k / v inputs cannot be ungrouped here; use "
            "kv_inputs='grouped'"
        )
    saved = [a.num_key_value_groups for a in attns]
    try:
        for a in attns:
            a.num_key_value_groups = 1
        yield
    finally:
        for a, groups in zip(attns, saved, strict=True):
            a.num_key_value_groups = groups


__all__ = ["SPARSE_SHARE", "Feed", "ungrouped_attention"]
