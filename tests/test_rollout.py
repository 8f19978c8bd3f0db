import numpy as np
import torch

from ppo1.ppo import standardize
from ppo1.rollout import Segment


def _segment(T=4, k=2):
    rng = np.random.default_rng(0)
    seg = Segment(obs=rng.integers(0, 256, (T, k, 4, 84, 84), dtype=np.uint8),
                  actions=rng.integers(0, 6, (T, k)), logp=rng.normal(size=(T, k)).astype(np.float32),
                  values=rng.normal(size=(T, k)).astype(np.float32), rewards=np.zeros((T, k), np.float32),
                  dones=np.zeros((T, k), bool), last_value=np.zeros(k, np.float32), episodes=[])
    seg.advantages = rng.normal(size=(T, k)).astype(np.float32)
    seg.returns = rng.normal(size=(T, k)).astype(np.float32)
    return seg


def test_batch_flattens_time_and_envs_and_standardizes_advantages_over_the_batch():
    seg = _segment()
    b = seg.batch(torch.device("cpu"), np.random.default_rng(1), standardize_adv=True)
    assert len(b) == 8 and b.obs.shape == (8, 4, 84, 84) and b.obs.dtype == torch.uint8
    assert torch.equal(b.obs[3], torch.from_numpy(seg.obs[1, 1]))      # sample t * k + i
    assert torch.equal(b.adv, torch.from_numpy(standardize(seg.advantages.reshape(8))))
    raw = seg.batch(torch.device("cpu"), np.random.default_rng(1), standardize_adv=False)
    assert torch.equal(raw.adv, torch.from_numpy(seg.advantages.reshape(8)))


def test_minibatches_draw_one_permutation_per_epoch_and_cover_every_sample_once():
    seg = _segment()
    rng, twin = np.random.default_rng(5), np.random.default_rng(5)
    b = seg.batch(torch.device("cpu"), rng, standardize_adv=False)
    for _ in range(2):  # epochs
        perm = twin.permutation(8)
        mbs = list(b.minibatches(3))
        assert [len(m) for m in mbs] == [3, 3, 2]
        assert torch.equal(torch.cat([m.returns for m in mbs]), b.returns[torch.from_numpy(perm)])
    assert rng.bit_generator.state == twin.bit_generator.state  # nothing else drawn: resume stays bit-identical
