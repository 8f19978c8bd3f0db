"""ppo1.update_pass: the update's pass of the policy, its precision, --compile and its eager fallback, pi_old."""
import gymnasium
import numpy as np
import pytest
import torch

from conftest import TINY, run_cli
from ppo1.observations import Obs
from ppo1.policies import build
from ppo1.rollout import Batch, RecurrentBatch
from ppo1.update_pass import UpdatePass


def _batch(policy, n: int = 6, seq_len: int = 3) -> Batch:
    """n random samples of `policy`'s observations and actions; for a recurrent policy n / seq_len chunks with an
    episode start inside the first and random memories before each."""
    g = torch.Generator().manual_seed(0)
    obs = Obs({e.name: torch.randint(0, 256, (n, *e.shape), generator=g, dtype=torch.uint8) if len(e.shape) == 3
               else torch.randn(n, *e.shape, generator=g) for e in policy.spec.entries})
    actions = torch.randint(0, policy.num_actions, (n,), generator=g)
    fields = dict(obs=obs, actions=actions, logp=torch.zeros(n), adv=torch.zeros(n), returns=torch.zeros(n),
                  rng=np.random.default_rng(0))
    if not policy.recurrent:
        return Batch(**fields)
    starts = torch.zeros(n, dtype=torch.bool)
    starts[1] = True
    return RecurrentBatch(**fields, starts=starts, memory0=torch.randn(n // seq_len, policy.memory_size, generator=g),
                          seq_len=seq_len)


def _policy(kind: str):
    torch.manual_seed(0)
    if kind == "cnn":
        return build("small", 6)
    return build("mlp", gymnasium.spaces.Discrete(4), (5,), rnn=kind, rnn_size=8)


@pytest.mark.parametrize("kind", ["cnn", "lstm", "gru"])
def test_compile_failure_falls_back_to_eager_with_one_notice_for_feed_forward_and_recurrent_policies(kind):
    def broken_backend(gm, example_inputs):
        raise RuntimeError("no C compiler here")

    policy = _policy(kind)
    batch = _batch(policy)
    notes = []
    update_pass = UpdatePass(policy, compile=True, log=notes.append, backend=broken_backend)
    for _ in range(3):
        got = update_pass.evaluate(batch)
        expected = policy.evaluate(batch.obs, batch.actions, *batch.memory_inputs())
        assert all(torch.equal(a, b) for a, b in zip(got, expected))
    assert update_pass.compilation == "failed"
    assert len(notes) == 1 and notes[0].startswith("ppo1: --compile: torch.compile failed (") and \
        "no C compiler here" in notes[0] and notes[0].endswith("training goes on with the eager forward")
    assert all(p.grad is None for p in policy.parameters())  # the trial left no gradients behind


def test_compiled_pass_gives_the_eager_pass_forward_and_backward():
    policy = _policy("cnn")
    batch = _batch(policy)
    update_pass = UpdatePass(policy, compile=True, log=lambda m: pytest.fail(m), backend="eager")  # no C compiler
    logp, entropy, values = update_pass.evaluate(batch)
    assert update_pass.compilation == "compiled"
    (logp.sum() + entropy.sum() + values.sum()).backward()
    compiled_grads = [p.grad.clone() for p in policy.parameters()]
    policy.zero_grad()
    logp, entropy, values = UpdatePass(policy).evaluate(batch)
    (logp.sum() + entropy.sum() + values.sum()).backward()
    for g, p in zip(compiled_grads, policy.parameters()):
        torch.testing.assert_close(g, p.grad)


def test_a_compiled_minibatch_loss_is_the_eager_one_and_one_graph_serves_every_annealed_clip():
    from ppo1.ppo import Hyper, minibatch_loss
    policy = _policy("cnn")
    batch = _batch(policy)
    batch.adv = torch.linspace(-1, 1, len(batch))
    graphs = []

    def counting(gm, example_inputs):  # dynamo's backend: how many graphs it was given
        graphs.append(gm)
        return gm.forward
    update_pass = UpdatePass(policy, compile=True, log=lambda m: pytest.fail(m), backend=counting)
    for clip in (0.1, 0.05):  # as the clip anneals from one iteration to the next
        hp = Hyper(clip=clip, lr=1e-3, epochs=1, minibatch=6, vf_coef=0.5, ent_coef=0.01, adv_norm="minibatch")
        policy.zero_grad()
        loss, stats = update_pass.run(minibatch_loss, batch, hp, None, torch.tensor([clip, 0.5, 0.01]))
        loss.backward()
        compiled_grads = [p.grad.clone() for p in policy.parameters()]
        policy.zero_grad()
        eager_loss, eager_stats = UpdatePass(policy).run(minibatch_loss, batch, hp, None)
        eager_loss.backward()
        torch.testing.assert_close(loss, eager_loss)
        assert stats.keys() == eager_stats.keys()
        for g, p in zip(compiled_grads, policy.parameters()):
            torch.testing.assert_close(g, p.grad)
    assert update_pass.compilation == "compiled" and len(graphs) == 1


def test_compile_without_a_working_compiler_trains_on_eagerly(tmp_path):
    r = run_cli([*TINY, "--env_steps", "256", "--checkpoint_dir", str(tmp_path), "--model_name", "c", "--compile"],
                env={"CC": "/nonexistent/cc", "CXX": "/nonexistent/c++",
                     "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")})  # nothing compiled to reuse
    assert r.returncode == 0, r.stderr
    notes = [line for line in r.stdout.splitlines() if "--compile" in line]
    assert len(notes) == 1 and "torch.compile failed" in notes[0] and "eager" in notes[0], r.stdout
    assert "ppo1: done: 256 steps" in r.stdout and "Traceback" not in r.stdout + r.stderr


def _output_dtypes(policy, modules: dict, fn) -> dict:
    """fn() run with a hook on each of `modules` (name -> module): name -> the dtype of its output."""
    seen = {}

    def note(name, out) -> None:  # returns None: the module's output is left as it is
        out = out[0] if isinstance(out, tuple) else out  # an RNN's (output, memory)
        seen.setdefault(name, out.data.dtype)  # a tensor's, or a PackedSequence's
    hooks = [m.register_forward_hook(lambda _m, _i, out, name=name: note(name, out)) for name, m in modules.items()]
    try:
        fn()
    finally:
        for h in hooks:
            h.remove()
    return seen


@pytest.mark.parametrize("model_type", ["small", "large", "impala"])
def test_the_bf16_pass_runs_the_convolutions_in_bfloat16_and_the_hidden_layer_core_and_heads_in_float32(model_type):
    torch.manual_seed(0)
    policy = build(model_type, 6, rnn="lstm", rnn_size=16)
    batch = _batch(policy)
    convs = [m for m in policy.torso.modules() if isinstance(m, torch.nn.Conv2d)]
    modules = {"first conv": convs[0], "last conv": convs[-1], "hidden": policy.torso[-2], "core": policy.core.rnn,
               "pi": policy.pi, "vf": policy.vf}
    out = {}
    seen = _output_dtypes(policy, modules, lambda: out.update(zip("lev", UpdatePass(policy, precision="bf16")
                                                                  .evaluate(batch))))
    assert seen == {"first conv": torch.bfloat16, "last conv": torch.bfloat16, "hidden": torch.float32,
                    "core": torch.float32, "pi": torch.float32, "vf": torch.float32}
    assert all(t.dtype == torch.float32 for t in out.values())  # log-probs, entropies, values
    memory = policy.initial_memory(2)
    acting = _output_dtypes(policy, modules, lambda: policy.act(batch.obs[:2], memory=memory))
    assert set(acting.values()) == {torch.float32}  # acting is never under autocast


def test_the_bf16_pass_stays_close_to_fp32_in_values_and_gradients():
    torch.manual_seed(0)
    policy = build("small", 6, init="orthogonal")
    batch = _batch(policy, n=16)
    grads, results = {}, {}
    for precision in ("fp32", "bf16"):
        policy.zero_grad()
        logp, entropy, values = results[precision] = UpdatePass(policy, precision=precision).evaluate(batch)
        (logp.sum() + values.sum()).backward()
        grads[precision] = [p.grad.clone() for p in policy.parameters()]
    assert not torch.equal(results["bf16"][0], results["fp32"][0])  # the torso did run in bfloat16
    for got, expected in zip(results["bf16"], results["fp32"]):
        torch.testing.assert_close(got, expected, atol=2e-2, rtol=0.02)
    for g32, g16 in zip(grads["fp32"], grads["bf16"]):
        assert g16.dtype == torch.float32
        assert torch.nn.functional.cosine_similarity(g32.flatten(), g16.flatten(), dim=0) > 0.99


def test_an_mlp_policy_computes_in_float32_in_the_bf16_pass_bit_for_bit():
    policy = _policy("gru")
    batch = _batch(policy)
    bf16 = UpdatePass(policy, precision="bf16").evaluate(batch)
    fp32 = UpdatePass(policy).evaluate(batch)
    assert all(torch.equal(a, b) for a, b in zip(bf16, fp32))


@pytest.mark.parametrize("precision, moved, recomputed", [
    ("fp32", False, False), ("fp32", True, True), ("bf16", False, True)])
def test_pi_old_is_recomputed_only_when_statistics_moved_or_in_bf16(precision, moved, recomputed):
    policy = _policy("cnn")
    batch = _batch(policy)
    rollout_logp = batch.logp
    update_pass = UpdatePass(policy, precision=precision)
    update_pass.set_pi_old(batch, moved, block=4)
    assert (batch.logp is not rollout_logp) == recomputed == update_pass.needs_pi_old(moved)
    if recomputed:  # through the pass the minibatches take: their first ratio is 1
        torch.testing.assert_close(update_pass.evaluate(batch)[0], batch.logp, rtol=0, atol=1e-6)
