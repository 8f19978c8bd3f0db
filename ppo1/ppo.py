"""Proximal Policy Optimization (Schulman et al., 2017): the loss, the schedules and the update epochs.

The training loop that ties them to rollouts, MPI and checkpoints is `ppo1.trainer`.
"""
from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import numpy as np
import torch

from ppo1.advantages import ADV_STD_FLOOR
from ppo1.distributed import Comm

if TYPE_CHECKING:
    from ppo1.rollout import Batch
    from ppo1.update_pass import UpdatePass


def linear_alpha(timesteps: int, env_steps: int) -> float:
    """The annealing factor alpha = 1 - t / env_steps, floored at 0 (paper Table 5, baselines 'linear')."""
    return max(1.0 - timesteps / env_steps, 0.0)


def warmup_factor(timesteps: int, warmup_steps: int) -> float:
    """Linear step-size warm-up: timesteps / warmup_steps, capped at 1; 1 when warmup_steps is 0 (off)."""
    return 1.0 if warmup_steps <= 0 else min(timesteps / warmup_steps, 1.0)


def mean(x: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """E[x] over a minibatch (B,): the plain mean, or with `weights` (B,) sum(w x) / sum(w) (0 where every
    weight is 0), so that a sample of weight 0 (a step whose env crashed) adds nothing to it nor to its gradient."""
    if weights is None:
        return x.mean()
    return (x * weights).sum() / weights.sum().clamp(min=1e-8)


def clipped_surrogate(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor,
                      clip: float, weights: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """L^CLIP of the paper's eq. (7), as a loss to minimise.

    -E[min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t)] with r_t = pi(a_t|s_t) / pi_old(a_t|s_t).
    Returns (loss, fraction of samples whose ratio lies outside [1 - eps, 1 + eps]); E and the fraction
    weighted by `weights` where given (see mean).
    """
    ratio = torch.exp(logp - old_logp)
    surr1 = ratio * adv
    surr2 = torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * adv
    clipfrac = mean(((ratio - 1.0).abs() > clip).float(), weights)
    return -mean(torch.min(surr1, surr2), weights), clipfrac


def value_loss(values: torch.Tensor, returns: torch.Tensor, old_values: torch.Tensor | None = None,
               clip: float = 0.0, weights: torch.Tensor | None = None) -> torch.Tensor:
    """The value error E[(V - V^targ)^2] (the paper's L^VF), or with `old_values` (the rollout's V_old)
    the clipped one of baselines ppo2 and CleanRL --clip-vloss:

        E[max((V - V^targ)^2, (V_old + clip(V - V_old, -clip, clip) - V^targ)^2)]

    the pessimistic of the two, so V gains nothing from moving more than `clip` from V_old.
    values, returns, old_values (B,). (ppo2 halves it; here c1 scales it, as for the plain error.) E weighted
    by `weights` where given (see mean).
    """
    unclipped = (values - returns).pow(2)
    if old_values is None:
        return mean(unclipped, weights)
    v_clipped = old_values + torch.clamp(values - old_values, -clip, clip)
    return mean(torch.max(unclipped, (v_clipped - returns).pow(2)), weights)


def approx_kl_k3(logp: torch.Tensor, old_logp: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """KL(pi_old || pi) estimated as E[(r - 1) - log r], r = pi / pi_old (Schulman's k3: unbiased and
    never negative; SB3's and CleanRL's target_kl estimator). logp, old_logp (B,) -> scalar (float32).

    Formed as expm1(log r) - log r in float64: exp(log r) - 1 - log r in float32 is rounding noise
    (about 1e-7, either sign) for the small ratios of the first minibatches. E weighted by `weights` where
    given (see mean)."""
    log_ratio = (logp - old_logp).double()
    return mean(torch.expm1(log_ratio) - log_ratio, weights).float()


def ppo_loss(logp: torch.Tensor, entropy: torch.Tensor, values: torch.Tensor, old_logp: torch.Tensor,
             adv: torch.Tensor, returns: torch.Tensor, clip: float, vf_coef: float,
             ent_coef: float, old_values: torch.Tensor | None = None,
             weights: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The paper's eq. (9) as a loss: L^CLIP + c1 * (V - V^targ)^2 - c2 * entropy (baselines pposgd_simple).

    logp (B,): log pi(a|s) of the B samples' actions now; entropy (B,): that of pi(.|s); values (B,): V(s) now
    (UpdatePass.evaluate gives the three); old_logp (B,), adv (B,), returns (B,);
    old_values (B,): the rollout's values, for the clipped value loss (--clip_vloss; None: plain);
    weights (B,): 1, or 0 for a sample no term learns from (a step whose env crashed); None: all 1.
    Every expectation is the weighted mean (see mean).
    Returns (total loss, dict of detached statistics: STAT_KEYS and kl_k3, the target-KL estimator).
    """
    pol_loss, clipfrac = clipped_surrogate(logp, old_logp, adv, clip, weights)
    vf_loss = value_loss(values, returns, old_values, clip, weights)
    entropy = mean(entropy, weights)
    total = pol_loss + vf_coef * vf_loss - ent_coef * entropy
    approx_kl = mean(old_logp - logp, weights)
    stats = {"pol_loss": pol_loss, "vf_loss": vf_loss, "entropy": entropy,
             "approx_kl": approx_kl, "clipfrac": clipfrac, "kl_k3": approx_kl_k3(logp, old_logp, weights)}
    return total, {k: v.detach() for k, v in stats.items()}


def explained_variance(pred: np.ndarray, target: np.ndarray) -> float:
    """1 - Var[target - pred] / Var[target]: 1 is perfect, 0 no better than a constant; nan if Var[target] = 0."""
    var = np.var(target)
    return float("nan") if var == 0 else float(1.0 - np.var(target - pred) / var)


STAT_KEYS = ("pol_loss", "vf_loss", "entropy", "approx_kl", "clipfrac")


@dataclasses.dataclass(frozen=True)
class Hyper:
    """One iteration's update settings: the annealed clip and step size, and the fixed rest."""

    clip: float                 # epsilon x alpha (or epsilon, without annealing)
    lr: float                   # Adam step size x alpha (without --anneal_lr: x 1) (x the warm-up factor, with --lr_warmup)
    epochs: int
    minibatch: int              # samples per minibatch on this rank (optim_batchsize x envs per rank)
    vf_coef: float              # c1
    ent_coef: float             # c2 (x alpha with --anneal_ent)
    adv_norm: str = "batch"     # "batch": standardised over the rank's batch before; "minibatch": in each
    max_grad_norm: float = 0.0  # > 0: clip the global gradient norm (after averaging over ranks)
    target_kl: float = 0.0      # > 0: stop the epochs once the ranks' mean KL of a minibatch exceeds it
    clip_vloss: bool = False    # clip V around the rollout's values at `clip` (ppo2); False: plain error

    @classmethod
    def at(cls, config, alpha: float, envs_per_rank: int, warmup: float = 1.0) -> "Hyper":
        """The settings of a Config at annealing factor alpha (and step-size warm-up factor `warmup`)."""
        return cls(clip=config.clip_param(alpha), lr=config.optim_stepsize * (alpha if config.anneal_lr else 1.0) * warmup,
                   epochs=config.optim_epochs,
                   minibatch=config.optim_batchsize * envs_per_rank, vf_coef=config.vf_coef,
                   ent_coef=config.ent_coef_at(alpha), adv_norm=config.adv_norm, max_grad_norm=config.max_grad_norm,
                   target_kl=config.target_kl, clip_vloss=config.clip_vloss)

    def record(self, log) -> None:
        """The annealed settings, into a metrics.Recorder (progress.csv: clip_param, stepsize)."""
        log.record(clip_param=self.clip, stepsize=self.lr)


class NonFiniteUpdate(ArithmeticError):
    """The loss or the averaged gradients of a minibatch are not finite (NaN or inf): raised before its
    optimizer step, on every rank alike (the averaged gradients are the same on every rank)."""

    def __init__(self, epoch: int, minibatch: int, loss: float):
        super().__init__(f"epoch {epoch + 1}, minibatch {minibatch + 1}: the gradients are not finite "
                         f"(this rank's loss {loss:.6g})")


def grad_norm(params: list[torch.nn.Parameter], max_norm: float) -> float:
    """The global norm of the gradients, clipped to `max_norm` when > 0 (returning the norm before clipping)."""
    if max_norm > 0:
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm))
    return float(torch.nn.utils.get_total_norm([p.grad for p in params]))


# |approx_kl| of an iteration above which rank 0 says one warning line (kl_warning): healthy runs stay under 0.05
# (every Atari and memory run in assets/), a policy that jumps in one update passes it.
KL_WARNING = 0.1


def kl_warning(iteration: int, approx_kl: float, previous: float | None) -> str | None:
    """The line said when iteration `iteration`'s approx_kl (the ranks' mean) passes KL_WARNING and the previous
    iteration's (`previous`, None for a run's first) did not: one line where it starts, not one per iteration."""
    if not abs(approx_kl) > KL_WARNING or (previous is not None and abs(previous) > KL_WARNING):
        return None
    return (f"ppo1: warning: iteration {iteration}: approx_kl {approx_kl:.4g} is past {KL_WARNING} (healthy updates "
            "stay under 0.05): the policy moved far in one update; a smaller --optim_stepsize, fewer "
            "--optim_epochs, --max_grad_norm or --target_kl keep it closer (progress.csv's grad_norm shows the steps)")


def kl_exceeded(mean_kl: float, target_kl: float) -> bool:
    """Whether the epochs stop: a target is set (> 0) and the ranks' mean KL is above it."""
    return target_kl > 0 and mean_kl > target_kl




def normalized(adv: torch.Tensor, weights: torch.Tensor | None = None,
               returns: torch.Tensor | None = None) -> torch.Tensor:
    """(A - mean) / (max(std, ADV_STD_FLOOR x std of `returns`) + 1e-8) over a minibatch's advantages (B,) (ppo2's
    --adv_norm minibatch; stds with Bessel's correction; returns (B,) the minibatch's value targets, None: no floor).
    With `weights` (1 or 0 per sample): the statistics of the samples of weight 1 alone, those of weight 0 set to 0."""
    if weights is not None:
        live = weights > 0
        out = torch.zeros_like(adv)
        out[live] = normalized(adv[live], None, None if returns is None else returns[live])
        return out
    std = adv.std()
    if returns is not None:
        std = torch.maximum(std, ADV_STD_FLOOR * returns.std())
    return (adv - adv.mean()) / (std + 1e-8)


def agreed_weights(comm: Comm, batch: "Batch") -> torch.Tensor | None:
    """The batch's sample weights where some rank's batch has any (a step whose env crashed), ones on a rank
    whose batch has none; None where no rank's batch has: every rank then takes the same path through the
    update's allreduces (one scalar allreduce decides, with more than one rank)."""
    if not comm.sum(np.array([batch.weights is not None], np.float64))[0]:
        return None
    if batch.weights is None:
        batch.weights = torch.ones(len(batch), device=batch.obs.device)
    return batch.weights


def ranks_share(comm: Comm, weights: torch.Tensor | None, kl: torch.Tensor, target_kl: float) -> tuple[float, float]:
    """(the factor of this rank's minibatch loss, the ranks' mean KL of the minibatch; 0.0 without a target),
    in one allreduce at most. Unweighted, every rank's minibatch holds as many samples: factor 1 (the ranks'
    averaged gradients are those of the mean over all their samples), the KL the mean of the ranks'. Weighted
    (weights w_r of rank r), the rank's weighted mean counts for its share of the ranks' total weight, factor
    size * sum(w_r) / sum_r sum(w_r), so the averaged gradients are those of sum_r sum(w_r l) / sum_r sum(w_r);
    the KL weighted alike."""
    if weights is None:
        return 1.0, float(comm.mean(np.array([kl.item()]))[0]) if target_kl > 0 else 0.0
    live = float(weights.sum())
    total, kl_sum = comm.sum(np.array([live, live * kl.item()]))
    total = max(total, 1e-8)
    return comm.size * live / total, kl_sum / total


def minibatch_loss(forward, mb: "Batch", hp: Hyper, weights: torch.Tensor | None,
                   coefs: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """ppo_loss of the policy on a minibatch, `forward` (UpdatePass.forward) giving its log-probabilities,
    entropies and values: its advantages standardised over it with --adv_norm minibatch, its sample weights `weights`
    (None: all 1), the value loss clipped around the rollout's values with --clip_vloss. coefs: (clip, c1, c2) as
    one tensor (3,), taking the place of hp's (a compiled pass then needs no new graph as they anneal)."""
    clip, vf_coef, ent_coef = (hp.clip, hp.vf_coef, hp.ent_coef) if coefs is None else coefs.unbind()
    a = normalized(mb.adv, weights, mb.returns) if hp.adv_norm == "minibatch" else mb.adv
    logp, entropy, values = forward(mb.obs, mb.actions, *mb.memory_inputs())  # --rnn: chunks replayed
    return ppo_loss(logp, entropy, values, mb.logp, a, mb.returns, clip, vf_coef, ent_coef,
                    old_values=mb.values if hp.clip_vloss else None, weights=weights)


def step(optimizer: torch.optim.Optimizer, comm: Comm, params: list[torch.nn.Parameter], loss: torch.Tensor,
         share: float, max_norm: float, epoch: int, minibatch: int) -> float:
    """One optimizer step on a minibatch's `loss` (times this rank's `share` of the samples, ranks_share):
    backward -> gradients averaged over ranks -> global norm clipped to `max_norm` if > 0 -> Adam step. Returns the
    norm before clipping. Raises NonFiniteUpdate, before the step, when the averaged gradients are not finite
    (`epoch`, `minibatch`: where, for its line)."""
    optimizer.zero_grad(set_to_none=False)
    (loss if share == 1.0 else loss * share).backward()
    comm.average_gradients(params)
    norm = grad_norm(params, max_norm)
    if not math.isfinite(norm):
        raise NonFiniteUpdate(epoch, minibatch, float(loss.detach()))
    optimizer.step()
    return norm


def update(policy: torch.nn.Module, optimizer: torch.optim.Optimizer, comm: Comm, batch: "Batch", hp: Hyper,
           update_pass: "UpdatePass") -> dict[str, float]:
    """`hp.epochs` passes over the rank's batch in shuffled minibatches of `hp.minibatch` samples.

    Each minibatch: loss -> (with `target_kl`: its KL averaged over ranks; above the target, the
    epochs end here, without this step) -> backward -> gradients averaged over ranks -> (global norm
    clipped to `max_grad_norm` if > 0) -> Adam step with step size `lr`. Every rank takes the stop
    decision from the same averaged KL, at the same minibatch, so the ranks' allreduces stay matched
    and their parameters identical. Advantages are standardised over the rank's batch
    (`adv_norm="batch"`, baselines ppo1: done by Segment.batch) or over each minibatch ("minibatch",
    ppo2). `update_pass` (ppo1.update_pass.UpdatePass of `policy`) computes each minibatch's loss
    (minibatch_loss) in the run's precision, compiled with --compile (with its backward); a recurrent
    policy replays each minibatch's chunks. Samples of weight 0 (`batch.weights`: steps whose env crashed)
    count in no loss, no statistic and no mean over ranks (ranks_share).
    Returns the mean of each statistic over all minibatches of this rank whose loss was computed,
    `epochs`: the epochs run, counted in minibatch steps (2.5 = stopped halfway through the third), and
    `grad_norm`: the mean global norm of the averaged gradients before clipping over the steps taken (the same
    on every rank; nan when none was taken).
    Raises NonFiniteUpdate, before that minibatch's step, when the averaged gradients are not finite.
    """
    for group in optimizer.param_groups:
        group["lr"] = hp.lr
    params = [p for p in policy.parameters()]
    coefs = (torch.tensor([hp.clip, hp.vf_coef, hp.ent_coef], device=batch.obs.device)  # compiled: tensors, so that
             if update_pass.compiled is not None else None)  # the annealed clip is no new graph
    weighted = agreed_weights(comm, batch) is not None
    totals = torch.zeros(len(STAT_KEYS), device=batch.obs.device)
    count, steps, per_epoch = 0, 0, batch.minibatch_count(hp.minibatch)
    norms = 0.0  # the steps' global gradient norms before clipping, summed
    for epoch in range(hp.epochs):
        stop = False
        for i, mb in enumerate(batch.minibatches(hp.minibatch)):
            weights = mb.weights if weighted else None
            loss, stats = update_pass.run(minibatch_loss, mb, hp, weights, coefs)
            totals += torch.stack([stats[k] for k in STAT_KEYS])
            count += 1
            share, mean_kl = ranks_share(comm, weights, stats["kl_k3"], hp.target_kl)
            if stop := kl_exceeded(mean_kl, hp.target_kl):  # the same decision on every rank
                break
            norms += step(optimizer, comm, params, loss, share, hp.max_grad_norm, epoch, i)
            steps += 1
        if stop:
            break
    means = dict(zip(STAT_KEYS, (totals / count).tolist()))
    means["epochs"] = steps / per_epoch
    means["grad_norm"] = norms / steps if steps else float("nan")
    return means
