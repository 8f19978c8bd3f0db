"""The update's pass of the policy over its samples: how every computation of the PPO update runs.

    update_pass = UpdatePass(policy, device, "bf16", compile=True, log=log)  # once per run (Trainer)
    update_pass.set_pi_old(batch, statistics_moved)  # before the epochs, when pi_old must be recomputed
    loss, stats = update_pass.run(minibatch_loss, mb, hp, weights, coefs)  # each minibatch's loss (ppo1.ppo)

One pass serves both the minibatches' losses and the pi_old they start from, so the first minibatch's ratio
is 1: the same precision (--precision bf16: `policy.evaluate` under torch.autocast; the policy keeps its cores
and heads in float32). With --compile each minibatch's forward, loss and backward run compiled as one graph,
which on a small network removes most of the per-operation overhead. Acting (the rollout) never comes here and
runs in float32.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable

import torch

from ppo1.errors import error_line

if TYPE_CHECKING:
    from ppo1.rollout import Batch


class UpdatePass:
    """The update's computations in its precision, under torch.compile with --compile: `evaluate` (pi_old's
    recomputation) and `run(fn, ...)` (each minibatch's loss, ppo1.ppo.minibatch_loss: the forward, the loss and,
    compiled, their backward as one graph).

    torch.compile compiles lazily and needs a C compiler then (Inductor). The first call of each function therefore
    runs one trial forward and backward (gradients discarded) so that both are compiled there; any failure (no
    compiler, a backend error, a recurrent core dynamo cannot trace) switches to the eager pass for the rest of the
    run, with one notice through `log`. Nothing is lost: the trial has no effect on parameters or gradients. Each
    rank decides for itself; gradients are averaged over ranks whichever path computed them, so the ranks stay
    in sync."""

    def __init__(self, policy: torch.nn.Module, device: torch.device | str = "cpu", precision: str = "fp32",
                 compile: bool = False, log: Callable[[str], None] = print, backend: str = "inductor"):
        """precision: `fp32` or `bf16` (`auto` is resolved before, Trainer.setup); compile: --compile."""
        if precision not in ("fp32", "bf16"):
            raise ValueError(f"the update's precision is fp32 or bf16, not {precision!r}")
        self.policy, self.log, self.backend = policy, log, backend
        self.device_type = torch.device(device).type
        self.bf16 = precision == "bf16"
        self.compiled: dict[Callable, Callable] | None = {} if compile else None  # fn -> torch.compile(fn)
        self.compilation = "untried" if compile else "eager"  # --compile: -> "compiled" or "failed"

    def forward(self, obs, actions, starts, memory0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """policy.evaluate in the update's precision: under bfloat16 autocast with bf16 (the torsos' convolutions
        follow it)."""
        if not self.bf16:
            return self.policy.evaluate(obs, actions, starts, memory0)
        with torch.autocast(self.device_type, dtype=torch.bfloat16):
            return self.policy.evaluate(obs, actions, starts, memory0)

    def evaluate(self, batch: "Batch") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(log-probabilities of the batch's actions (N,), entropies (N,), values (N,)) of the policy as it is now;
        a RecurrentBatch's chunks replayed from their saved memories."""
        return self.run(evaluate_batch, batch)

    def run(self, fn: Callable, *args):
        """fn(forward, *args), where `forward` is this pass's (policy.evaluate in the update's precision): eager, or
        with --compile fn compiled as a whole (its backward too, when its outputs are differentiated)."""
        if self.compilation in ("untried", "compiled"):
            compiled = self.compiled.get(fn)
            if compiled is None:  # fn's first call: compiled, then its trial
                compiled = self.compiled[fn] = torch.compile(functools.partial(fn, self.forward), backend=self.backend)
                self._attempt(self._trial, compiled, args)
            if self.compilation == "compiled":  # a new minibatch size (or grad mode) recompiles: that may fail too
                result = self._attempt(lambda c, a: c(*a), compiled, args)
                if result is not None:
                    return result
        return fn(self.forward, *args)

    def _trial(self, compiled: Callable, args: tuple) -> None:
        """One compiled forward and backward of every differentiable output, gradients discarded (grad on, also
        within set_pi_old's no_grad)."""
        with torch.enable_grad():
            outputs = [t for t in _tensors(compiled(*args)) if t.requires_grad]
            params = [p for p in self.policy.parameters() if p.requires_grad]
            torch.autograd.grad(sum(t.sum() for t in outputs), params, allow_unused=True)

    def _attempt(self, fn: Callable, compiled: Callable, args: tuple):
        """fn(compiled, args), marking the state compiled; on any error, failed (with the notice) and None."""
        try:
            result = fn(compiled, args)
            self.compilation = "compiled"
            return result
        except Exception as e:  # noqa: BLE001 -- any compile or backend error: go eager
            self.compilation = "failed"
            self.log(f"ppo1: --compile: torch.compile failed ({_root_cause(e)}); "
                     "training goes on with the eager forward")
            return None

    def needs_pi_old(self, statistics_moved: bool) -> bool:
        """Whether the rollout's log-probabilities are not the pi_old the update starts from: the policy's input
        statistics moved after the rollout (baselines: ob_rms.update, then old = new), or the update computes
        in another precision than the rollout (bf16). A float32 update of unmoved statistics keeps them."""
        return statistics_moved or self.bf16

    @torch.no_grad()
    def set_pi_old(self, batch: "Batch", statistics_moved: bool, block: int = 1024) -> None:
        """Where needs_pi_old: the batch's logp set to this pass's log-probabilities of the policy as it is now, in
        `blocks` of about `block` samples, so the update's first ratio is 1. `values` stay the rollout's: the
        returns were built on them, so the clipped value loss (--clip_vloss) is centred there."""
        if not self.needs_pi_old(statistics_moved):
            return
        logp = [self.evaluate(part)[0] for part in batch.blocks(block)]  # a new tensor: on the CPU, the batch's
        batch.logp = torch.cat(logp).float()                              # logp shares the Segment's buffer


def evaluate_batch(forward: Callable, batch: "Batch") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """forward (UpdatePass.forward) over a batch: its observations and actions (and a RecurrentBatch's chunks)."""
    return forward(batch.obs, batch.actions, *batch.memory_inputs())


def _tensors(out) -> list[torch.Tensor]:
    """The tensors of a function's result: itself, or those in its tuples, lists and dicts."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    return [t for o in out for t in _tensors(o)] if isinstance(out, (tuple, list)) else []


def _root_cause(e: BaseException) -> str:
    """`Type: first line` of the innermost exception behind `e` (dynamo wraps backend errors)."""
    for _ in range(10):
        inner = getattr(e, "inner_exception", None) or e.__cause__
        if not isinstance(inner, BaseException) or inner is e:
            break
        e = inner
    return error_line(e, 200)
