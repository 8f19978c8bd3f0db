"""Adam (Kingma & Ba, 2015), the optimizer of the PPO paper, as ppo1 steps it on the CPU.

Why not torch.optim.Adam there: every torch optimizer wraps its methods in torch's dynamo guard,
whose first call imports torch._dynamo, over a second of CPU in every process (each rank, each
launch) for a compiler ppo1 does not use unless `--compile`. This is the same arithmetic as torch's
Adam on the CPU (its single-tensor path, which torch takes there), operation for operation, so a
run's numbers are bit-identical to torch's (tests/test_adam.py); each operation is one torch call over all
the parameters (torch's _foreach kernels), which on a small MLP makes the step 2x faster than a call per
tensor. Its state_dict has torch.optim.Adam's
layout, so a checkpoint written by either loads into the other: a run trained on a GPU (torch's
fused Adam, ppo1.device.make_adam) resumes on the CPU and back.
"""
from __future__ import annotations

import torch


def adam_step(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
              step: float, lr: float, betas: tuple[float, float], eps: float) -> None:
    """One Adam update of `param` in place, `step` counting this update (1 for the first).

    m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2;
    param <- param - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
    (the paper's Algorithm 1 with its bias corrections, epsilon added after the correction as torch does).
    """
    beta1, beta2 = betas
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    bias_correction1 = 1 - beta1 ** step
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-(lr / bias_correction1))


def foreach_adam_step(params: list, grads: list, exp_avgs: list, exp_avg_sqs: list, step: float, lr: float,
                      betas: tuple[float, float], eps: float) -> None:
    """adam_step on every parameter of the lists at once, all at the same `step`: the same operations, each one
    torch call over the list (torch's _foreach kernels run the per-tensor one on each), which on a small network
    saves most of the Python between them."""
    beta1, beta2 = betas
    torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
    torch._foreach_mul_(exp_avg_sqs, beta2)
    torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
    bias_correction1 = 1 - beta1 ** step
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    denom = torch._foreach_sqrt(exp_avg_sqs)
    torch._foreach_div_(denom, bias_correction2_sqrt)
    torch._foreach_add_(denom, eps)
    torch._foreach_addcdiv_(params, exp_avgs, denom, value=-(lr / bias_correction1))


class Adam:
    """Adam over `params` with one step size (`param_groups[0]["lr"]`, set by the update each
    iteration), in the interface ppo1 uses of torch.optim.Adam: zero_grad, step, state_dict,
    load_state_dict."""

    def __init__(self, params, lr: float, eps: float = 1e-8, betas: tuple[float, float] = (0.9, 0.999),
                 fused: bool = False):
        """fused: step with torch's fused CPU kernel (torch.optim.Adam(fused=True)'s, bit for bit): one call for all
        parameters, over 10x faster on a small network, not bit for bit the single-tensor arithmetic."""
        self.params, self.fused = list(params), fused
        self.param_groups = [{"lr": lr, "betas": betas, "eps": eps}]
        self.state: dict[int, dict[str, torch.Tensor]] = {}  # per parameter index, made at its first step

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        live = [(i, p) for i, p in enumerate(self.params) if p.grad is not None]
        for i, p in live:
            s = self.state.get(i)
            if s is None:
                s = self.state[i] = {"step": torch.tensor(0.0), "exp_avg": torch.zeros_like(p),
                                     "exp_avg_sq": torch.zeros_like(p)}
        counts = [self.state[i]["step"] for i, _ in live]
        torch._foreach_add_(counts, 1)
        tensors = ([p for _, p in live], [p.grad for _, p in live], [self.state[i]["exp_avg"] for i, _ in live],
                   [self.state[i]["exp_avg_sq"] for i, _ in live])  # params, grads, exp_avgs, exp_avg_sqs
        if self.fused:
            torch._fused_adam_(*tensors, [], counts, amsgrad=False, lr=group["lr"], beta1=group["betas"][0],
                               beta2=group["betas"][1], weight_decay=0.0, eps=group["eps"], maximize=False)
            return
        steps = {count.item() for count in counts}
        if len(steps) == 1:  # the common case, every parameter at the same step: one call per operation
            foreach_adam_step(*tensors, steps.pop(), group["lr"], group["betas"], group["eps"])
            return
        for i, p in live:
            s = self.state[i]
            adam_step(p, p.grad, s["exp_avg"], s["exp_avg_sq"], s["step"].item(), group["lr"], group["betas"],
                      group["eps"])

    def state_dict(self) -> dict:
        """torch.optim.Adam's layout: {"state": {i: {"step", "exp_avg", "exp_avg_sq"}}, "param_groups": [...]}."""
        group = self.param_groups[0]
        return {"state": {i: dict(s) for i, s in self.state.items()},
                "param_groups": [{**group, "betas": tuple(group["betas"]), "weight_decay": 0.0, "amsgrad": False,
                                  "maximize": False, "params": list(range(len(self.params)))}]}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a state_dict of this class or of torch.optim.Adam (without weight decay, amsgrad or
        maximize) for the same parameters. Raises ValueError when it does not fit them."""
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise ValueError(f"the optimizer state has {sum(len(g['params']) for g in groups)} parameters "
                             f"in {len(groups)} groups; this model has {len(self.params)} in 1")
        group = groups[0]
        if group.get("weight_decay", 0) or group.get("amsgrad") or group.get("maximize"):
            raise ValueError("the optimizer state uses weight decay, amsgrad or maximize, which ppo1's Adam does not")
        state = {}
        for i, key in enumerate(group["params"]):
            if key not in state_dict["state"]:
                continue
            saved, p = state_dict["state"][key], self.params[i]
            for name in ("exp_avg", "exp_avg_sq"):
                if saved[name].shape != p.shape:
                    raise ValueError(f"the optimizer state's {name} of parameter {i} has shape "
                                     f"{tuple(saved[name].shape)}, the parameter {tuple(p.shape)}")
            state[i] = {"step": torch.as_tensor(saved["step"], dtype=torch.float32).detach().cpu().clone(),
                        "exp_avg": saved["exp_avg"].detach().to(p.device, p.dtype, copy=True),
                        "exp_avg_sq": saved["exp_avg_sq"].detach().to(p.device, p.dtype, copy=True)}
        self.state = state
        self.param_groups[0].update(lr=group["lr"], betas=tuple(group["betas"]), eps=group["eps"])
