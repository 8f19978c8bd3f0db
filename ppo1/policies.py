"""The policies of baselines' ppo1.

`CnnPolicy` maps uint8 images (B, C, H, W) through a torso of `--model_type` (ppo1.torsos: small, large, impala,
and for an image smaller than small or large take, one that keeps its layout) to categorical logits (B, A) (Discrete
actions; MultiDiscrete and MultiBinary: one categorical per dimension, ppo1.actions.MultiCategorical) and a value
(B,); frames are scaled to [0, 1] inside the model (with `--frame_norm center`, less the running per-pixel mean the
model keeps), so rollouts store uint8; an image of codes (observations.CODES) enters as the numbers it holds.
`mlp` (baselines' `mlp_policy`) maps vector observations (B, D), normalised by a running mean/std kept identical on
all ranks, through separate 2x64 tanh networks to a categorical (Discrete actions), one per dimension (MultiDiscrete,
MultiBinary) or a diagonal Gaussian with state-independent log-std (Box actions) and a value. Linear layers use baselines' normc initialisation
(policy head gain 0.01); conv layers use baselines' Glorot-uniform (= Xavier uniform).

With `--rnn lstm` or `gru`, ppo1.cores.Cores (one recurrent layer of `--rnn_size`, and with `--rnn_critic separate`
a second for the value head, as sb3-contrib's RecurrentPPO with enable_critic_lstm) sits between the torso and the
heads: the policy then carries a memory per env (zeros at each episode's start) and replays the rollout's sequences
of steps in the update from the memories saved at their starts (`evaluate` with starts and memory0).

Observations are named entries (ppo1.observations.Obs): the CNN policy reads each image entry through a torso of
its own and the "vector" entry beside their features; the MLP reads the "vector" entry; an "action_mask" entry
leaves the invalid actions probability 0 (masked_logits). A policy whose observations have one entry also takes
that entry's tensor alone (`as_obs`).

Every policy has `step(obs, memory) -> (distribution, value, memory)`, `act(obs, greedy, memory) -> (action,
logp, value, memory)` and `value(obs, memory)` for acting (memory None without a core), and for the update
`evaluate(obs, actions, starts, memory0) -> (logp, entropy, value)` (starts, memory0 None without a core). None
takes a precision: the update runs `evaluate` under torch.autocast for --precision bf16 (ppo1.update_pass), which
the torsos' convolutions follow while their hidden layer, the cores, heads and distribution run in float32; acting
runs in float32.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.distributions import Distribution

from ppo1.errors import PPO1Error
from ppo1.actions import action_nvec, choose, distribution, head_size
from ppo1.cores import Cores, RecurrentCore
from ppo1.observations import ACTION_MASK, CODES, IMAGE, VECTOR, Obs, ObsSpec
from ppo1.torsos import cnn_torso, frame_layout, linear_layer, orthogonal_init_, torso_features, torso_words


class ActorCritic(nn.Module):
    """A policy with a value head: subclasses define `features(obs) -> (B, F)` (the torso) and the heads'
    modules `pi` (distribution parameters) and `vf` (value), which `heads` applies; `core`, when set (`--rnn`),
    is a RecurrentCore between them."""

    action_shape: tuple = ()
    action_dtype = np.int64
    continuous = False  # Box actions: a Gaussian of mean `pi`'s outputs and std exp(`logstd`) (MlpPolicy)
    nvec: tuple[int, ...] | None = None  # MultiDiscrete / MultiBinary: the choices per action dimension

    def __init__(self, spec: ObsSpec):
        super().__init__()
        self.spec = spec  # the observations' named entries
        self.core: RecurrentCore | None = None  # --rnn lstm / gru
        self.critic_core: RecurrentCore | None = None  # --rnn_critic separate: the value head's own core
        self.cores: Cores | None = None  # both, and the memory's layout (--rnn)

    def laid_out(self, obs: Obs) -> Obs:
        """The update's observations (B, ...) in the memory layout this policy's torso reads fastest, the same
        values: as they are (a CNN's frames: channels-last on the CPU, CnnPolicy)."""
        return obs

    def features(self, obs: Obs) -> torch.Tensor:
        """obs (B, ...) -> the torso's features (B, F), float32: a CNN torso's convolutions run in the ambient
        autocast's precision (bf16 in the update with --precision bf16), its hidden layer in float32."""
        raise NotImplementedError

    def describe(self) -> str:
        """The torsos that read the observations, in words, for the start line ("" where there is nothing to say)."""
        return ""

    def as_obs(self, obs) -> Obs:
        """`obs` as an Obs: itself, or a tensor (or array) that is the only entry of this policy's observations."""
        if isinstance(obs, Obs):
            return obs
        if len(self.spec.entries) != 1:
            raise TypeError(f"a policy of observations {self.spec.describe()} reads an Obs of them")
        return Obs({self.spec.entries[0].name: obs})

    def heads(self, h: torch.Tensor, h_vf: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Features (B, F) (the core's outputs, with --rnn) -> (the policy head `pi`'s outputs (B, ...): logits or
        the Gaussian's mean, float32; the value head `vf`'s value (B,)); the value head reads h_vf (the critic
        core's outputs) when given, else h."""
        return self.pi(h), self.vf(h if h_vf is None else h_vf).squeeze(-1)

    def _add_cores(self, kind: str, n_in: int, size: int, critic: str, init: str = "zeros") -> int:
        """--rnn `kind` (not none): Cores of `size` units on n_in features (with critic `separate`, the value head's
        own core too), registered as this module's `core` and `critic_core`. Returns the features the heads read."""
        self.cores = Cores.build(kind, n_in, size, critic, init)
        self.core, self.critic_core = self.cores.core, self.cores.critic
        return size

    @property
    def recurrent(self) -> bool:
        """Whether the policy has a recurrent core (--rnn): it then carries a memory per env from step to step
        (`step`, `act`) and replays chunks of steps in the update (`evaluate`)."""
        return self.core is not None

    @property
    def memory_size(self) -> int:
        """The width of the recurrent memory (what the policy carries from step to step): the core's, plus the
        critic core's with --rnn_critic separate."""
        return 0 if self.cores is None else self.cores.memory_size

    def distribution(self, out: torch.Tensor, obs: Obs | None = None) -> Distribution:
        """The distribution over actions of the policy head's outputs (ppo1.actions.distribution): a categorical
        (Discrete), one per dimension (MultiDiscrete, MultiBinary) or a diagonal Gaussian with state-independent
        log-std (Box, `continuous`); over the valid actions alone where the observations `obs` carry an
        action mask."""
        mask = None if obs is None else self.as_obs(obs).get(ACTION_MASK)
        return distribution(out, self.nvec, self.logstd.exp().expand_as(out) if self.continuous else None, mask)

    def observe(self, obs: Obs, allreduce_sum=None) -> bool:
        """Add a batch of observations (N, ...) to the model's running input statistics, summed over
        ranks by `allreduce_sum` (Comm.sum); a policy without them ignores it. Returns whether the
        policy changed (it has such statistics)."""
        return False

    def initial_memory(self, n: int, device: torch.device | str = "cpu") -> torch.Tensor | None:
        """The recurrent memory of n envs at an episode's start (zeros (n, memory_size)); None without --rnn."""
        return None if self.cores is None else self.cores.initial(n, device)

    def step(self, obs: Obs, memory: torch.Tensor | None):
        """One step of B envs: (distribution, value (B,), the memory after obs (None without --rnn))."""
        obs = self.as_obs(obs)
        x = self.features(obs)
        if self.cores is None:
            out, value = self.heads(x)
            return self.distribution(out, obs), value, None
        h, h_vf, memory = self.cores.step(x, memory)
        out, value = self.heads(h, h_vf)
        return self.distribution(out, obs), value, memory

    def evaluate(self, obs: Obs, actions: torch.Tensor, starts: torch.Tensor | None = None,
                 memory0: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The update's pass over B samples: (log-probability of `actions` (B,), entropy (B,), value (B,)), all
        float32. A recurrent policy replays n chunks of L steps: obs (n L, ...) chunk after chunk, starts (n, L)
        bool (True: the step begins an episode), memory0 (n, memory_size) the memory before each chunk, giving
        step for step what `step` gave in the rollout; a feed-forward one takes neither (None).

        The torsos run in the ambient autocast's precision (features); the cores, heads, distribution,
        log-probabilities and values with autocast off, in float32, where the ratio and losses are formed."""
        obs = self.as_obs(obs)
        x = self.features(obs)
        with torch.autocast(x.device.type, enabled=False):
            out, value = self.heads(x) if self.cores is None else self._replay(x, starts, memory0)
            dist = self.distribution(out, obs)
            return dist.log_prob(actions), dist.entropy(), value

    def _replay(self, x: torch.Tensor, starts: torch.Tensor, memory0: torch.Tensor):
        """The cores and heads over n chunks of L steps of features x (n L, F) (see evaluate): (the policy head's
        outputs (n L, ...), value (n L,))."""
        n, length = starts.shape
        return self.heads(*self.cores.replay(x.reshape(n, length, -1), starts, memory0))

    @torch.no_grad()
    def value(self, obs: Obs, memory: torch.Tensor | None = None) -> torch.Tensor:
        """V of B observations (B,) (a recurrent policy's from the memories (B, memory_size) before them), the
        value `act` gives them; no action is drawn, so torch's random stream is left as it is."""
        return self.step(obs, memory)[1]

    @torch.no_grad()
    def act(self, obs: Obs, greedy: bool = False, memory: torch.Tensor | None = None):
        """Sample (or take the most probable) actions. Returns (actions (B, ...), log-probs (B,), values (B,),
        the memory after obs (None without --rnn))."""
        dist, value, memory = self.step(obs, memory)
        action = choose(dist, greedy)
        return action, dist.log_prob(action), value, memory


class CnnPolicy(ActorCritic):
    """Actor-critic CNN with a shared torso, a categorical policy head and a value head.

    nvec (MultiDiscrete, MultiBinary actions): the choices per action dimension; the head's num_actions =
    sum(nvec) logits are split into one categorical per dimension (ppo1.actions.MultiCategorical).

    init: `normc` (baselines ppo1: Glorot-uniform convs, normc linears) or `orthogonal` (ppo2, CleanRL).
    obs_shape (C, H, W): the one image's shape, any channels and size, e.g. Atari's stack of four grayscale frames
    (4, 84, 84) or Procgen's one RGB frame (3, 64, 64); the fully connected layer's inputs follow from it (small and
    large need frames of at least 20x20 and 36x36). spec (in its place): the observations' entries
    (ppo1.observations): each image through a torso of its own (the first is `torso`, the others `more_torsos`, in
    the spec's order), and a "vector" entry of D numbers, normalised by their running mean and std (as the MLP's
    observations), beside the torsos' features before both heads.
    """

    def __init__(self, num_actions: int, model_type: str = "small", in_channels: int = 4, init: str = "normc",
                 frame_norm: str = "scale", obs_shape: tuple[int, int, int] | None = None,
                 nvec: tuple[int, ...] | None = None, rnn: str = "none", rnn_size: int = 256,
                 stacked: bool = True, rnn_critic: str = "shared", spec: ObsSpec | None = None,
                 rnn_init: str = "zeros"):
        super().__init__(spec or ObsSpec.of({IMAGE: tuple(obs_shape or (in_channels, 84, 84))}))
        images = self.spec.images
        self.image_names = [e.name for e in images]
        self.codes = [e.kind == CODES for e in images]  # read as the numbers they are (observations.CODES)
        self.vec_dim = self.spec.vector_size
        if self.vec_dim:
            self.vec_rms = RunningMeanStd((self.vec_dim,))
        # --frame_norm center: the running per-pixel mean of the frames. A stack of one-channel frames (the env
        # says so: `stacked`, True by default as for the default image, Atari's 4 frames) keeps one mean frame
        # (H, W), updated from each observation's newest frame; any other image is one frame, its mean (C, H, W)
        # per pixel and channel (an RGBA frame is not a stack of 4).
        first = images[0].shape
        self.stacked = stacked
        self.torso, hidden = cnn_torso(model_type, first)
        self.more_torsos = nn.ModuleList()  # the torsos of the second image on, when there are several
        for entry in images[1:]:
            torso, n = cnn_torso(model_type, entry.shape)
            self.more_torsos.append(torso)
            hidden += n
        if frame_norm == "center":
            self.frame_rms = RunningMeanStd(first[1:] if self.stacked else first)
            self.more_frame_rms = nn.ModuleList(RunningMeanStd(e.shape[1:] if self.stacked else e.shape)
                                                for e in images[1:])
        self.model_type = model_type
        self.num_actions = num_actions
        if nvec is not None:  # num_actions = sum(nvec)
            self.nvec, self.action_shape = tuple(nvec), (len(nvec),)
        n_features = hidden + self.vec_dim
        if rnn != "none":  # the torsos' features (and the vector entry) enter the core(s)
            n_features = self._add_cores(rnn, n_features, rnn_size, rnn_critic, rnn_init)
        self.pi = linear_layer(n_features, num_actions, 0.01)
        self.vf = linear_layer(n_features, 1, 1.0)
        if init == "orthogonal":
            orthogonal_init_(self, {self.pi: 0.01, self.vf: 1.0})

    def _frame_means(self) -> list:
        """--frame_norm center: the running frame mean of each image, in the spec's order (else Nones)."""
        if not hasattr(self, "frame_rms"):
            return [None] * len(self.image_names)
        return [self.frame_rms, *self.more_frame_rms]

    def features(self, obs: Obs) -> torch.Tensor:
        """obs: each image (B, C, H, W) uint8 ((B, 4, 84, 84) on Atari) and the vector (B, D) -> the torsos'
        features and the normalised vector side by side (B, hidden + D) float32.

        The torsos' convolutions run in the ambient autocast's precision: bf16 in the update's passes with
        --precision bf16 (ppo1.update_pass), float32 when acting; their hidden layer, the cores and the heads in
        float32 (torso_features)."""
        obs = self.as_obs(obs)
        torsos = [self.torso, *self.more_torsos]
        inputs = [self.torso_input(obs[name], i) for i, name in enumerate(self.image_names)]
        hs = [torso_features(torso, x) for torso, x in zip(torsos, inputs)]
        if self.vec_dim:
            hs.append(self.vec_rms.normalize(obs[VECTOR]))
        return hs[0] if len(hs) == 1 else torch.cat(hs, -1)

    def laid_out(self, obs: Obs) -> Obs:
        """The frames (B, C, H, W) in frame_layout (channels-last on the CPU), laid out once for the update's
        convolutions rather than in each forward; other entries as they are."""
        return obs.map(lambda x: frame_layout(x) if x.dim() == 4 else x)

    def describe(self) -> str:
        """Each image's torso in words (the start line): `image (3, 7, 7): 2 convolutions 3x3 that keep ...`."""
        return "; ".join(f"{e.name} {e.shape}{' codes' * (e.kind == CODES)}: {torso_words(self.model_type, e.shape)}"
                         for e in self.spec.images)

    def torso_input(self, frames: torch.Tensor, image: int = 0) -> torch.Tensor:
        """uint8 frames (B, C, H, W) of the image `image` (its place in the spec) -> what its torso reads: float32
        in [0, 1] (`scale`), less the image's running per-pixel mean / 255 (`center`).

        The frames enter the convolutions in frame_layout (channels-last on the CPU).
        """
        x = frame_layout(frames).float()  # float() keeps the layout
        if self.codes[image]:  # ids, not intensities: neither centred nor scaled
            return x
        rms = self._frame_means()[image]
        if rms is not None:  # the mean (84, 84) (or (C, H, W)) laid out as one frame of x, so the
            # subtraction runs element by element in x's memory order rather than broadcast across it;
            # in place, as an out-of-place one returns NCHW and undoes the channels-last layout
            x.sub_(rms.frame_mean(x.shape[1:]))
        return x.div_(255.0)

    def observe(self, obs: Obs, allreduce_sum=None) -> bool:
        """The running statistics of the inputs: the vector entry's mean and std; with --frame_norm center, the
        newest frame of each image (..., 4, 84, 84) into its running mean (each frame is the newest of one
        observation, so every frame counts once), an unstacked image (..., C, H, W) whole. Returns whether the
        policy changed (it keeps such statistics)."""
        obs = self.as_obs(obs)
        if self.vec_dim:
            self.vec_rms.update(obs[VECTOR], allreduce_sum)
        for name, rms, codes in zip(self.image_names, self._frame_means(), self.codes):
            if rms is not None and not codes:
                frames = obs[name]
                rms.update(frames[..., -1, :, :] if self.stacked else frames, allreduce_sum)
        return bool(self.vec_dim) or hasattr(self, "frame_rms")


class RunningMeanStd(nn.Module):
    """Mean and std of observations over all ranks' samples so far (baselines' MPI RunningMeanStd).

    Sums are float64 buffers, so they are saved in checkpoints and compared by the rank sync check.
    """

    def __init__(self, shape: tuple[int, ...], epsilon: float = 1e-2):
        super().__init__()
        self.register_buffer("sum", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("sumsq", torch.full(shape, epsilon, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(epsilon, dtype=torch.float64))
        self._kept: dict[str, tuple] = {}  # what _keep computed: name -> (the sums' versions it was computed at, value)

    def update(self, x: np.ndarray, allreduce_sum=None) -> None:
        """Add a batch x (N, *shape); `allreduce_sum` sums a float64 array over ranks (Comm.sum)."""
        x = x.reshape(-1, *self.sum.shape)
        if x.dtype == np.uint8:  # frames: exact integer sums (2.4x faster than in float64, the same values)
            sums, squares = x.sum(0, dtype=np.int64), np.square(x, dtype=np.uint16).sum(0, dtype=np.int64)
        else:
            x = x.astype(np.float64)
            sums, squares = x.sum(0), np.square(x).sum(0)
        local = np.concatenate([sums.ravel(), squares.ravel(), [len(x)]], dtype=np.float64)
        total = torch.from_numpy(allreduce_sum(local) if allreduce_sum else local).to(self.sum.device)
        n = self.sum.numel()
        self.sum += total[:n].view_as(self.sum)
        self.sumsq += total[n:2 * n].view_as(self.sumsq)
        self.count += total[-1]

    def mean(self) -> torch.Tensor:
        return self.sum / self.count

    def _keep(self, name: str, compute, *key):
        """compute(), kept between calls while the sums stay as they are (their version counters: an update or a
        load_state_dict moves them) and `key` is the same, so the rollout's steps and the update's minibatches do
        not compute it anew each call. A compiled graph keeps no Python state: there it is computed in the graph."""
        if torch.compiler.is_compiling():
            return compute()
        key = (self.sum._version, self.sumsq._version, self.count._version, self.sum.data_ptr(), *key)
        kept = self._kept.get(name)
        if kept is None or kept[0] != key:
            kept = self._kept[name] = (key, compute())
        return kept[1]

    def frame_mean(self, shape: torch.Size) -> torch.Tensor:
        """The mean as float32, expanded to one frame of `shape` (C, H, W) and in frame_layout: what a torso's input
        subtracts (kept, _keep)."""
        return self._keep("frame_mean", lambda: frame_layout(self.mean().float().expand(1, *shape)), tuple(shape))

    def mean_std(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, std), float64, std = sqrt(max(E[x^2] - mean^2, 1e-2)) (kept, _keep)."""
        def compute():
            mean = self.mean()
            return mean, torch.sqrt(torch.clamp(self.sumsq / self.count - mean.square(), min=1e-2))
        return self._keep("mean_std", compute)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """clip((x - mean) / std, -5, 5), as float32."""
        mean, std = self.mean_std()
        return torch.clamp((x.double() - mean) / std, -5.0, 5.0).float()


class MlpPolicy(ActorCritic):
    """baselines' mlp_policy: normalised observations, separate 2x64 tanh networks for pi and V."""

    def __init__(self, obs_dim: int, action_space, hidden: int = 64, layers: int = 2, rnn: str = "none",
                 rnn_size: int = 256, rnn_critic: str = "shared", spec: ObsSpec | None = None, rnn_init: str = "zeros"):
        """obs_dim: the numbers of the "vector" entry; spec: the observations' entries (default: that vector)."""
        super().__init__(spec or ObsSpec.of(vector=obs_dim))
        import gymnasium
        self.ob_rms = RunningMeanStd((obs_dim,))
        n_features = obs_dim
        if rnn != "none":  # as sb3-contrib's MlpLstmPolicy: the normalised observations enter the core(s)
            n_features = self._add_cores(rnn, obs_dim, rnn_size, rnn_critic, rnn_init)

        def mlp(out: int, gain: float) -> nn.Sequential:
            mods, n_in = [], n_features
            for _ in range(layers):
                mods += [linear_layer(n_in, hidden, 1.0), nn.Tanh()]
                n_in = hidden
            return nn.Sequential(*mods, linear_layer(n_in, out, gain))

        if isinstance(action_space, gymnasium.spaces.Discrete):
            self.continuous, self.num_actions = False, int(action_space.n)
            self.pi = mlp(self.num_actions, 0.01)
            self.action_shape, self.action_dtype = (), np.int64
        elif isinstance(action_space, gymnasium.spaces.Box) and len(action_space.shape) == 1:
            self.continuous, self.num_actions = True, int(action_space.shape[0])
            self.pi = mlp(self.num_actions, 0.01)
            self.logstd = nn.Parameter(torch.zeros(self.num_actions))
            self.action_shape, self.action_dtype = (self.num_actions,), np.float32
        elif action_nvec(action_space) is not None:  # MultiDiscrete, MultiBinary: one categorical per dimension
            self.nvec = action_nvec(action_space)
            self.continuous, self.num_actions = False, sum(self.nvec)
            self.pi = mlp(self.num_actions, 0.01)
            self.action_shape, self.action_dtype = (len(self.nvec),), np.int64
        else:
            raise PPO1Error(f"action space {action_space} is not supported: use Discrete, MultiDiscrete, "
                            "MultiBinary or a 1-D Box")
        self.vf = mlp(1, 1.0)
        self.model_type = "mlp"

    def observe(self, obs: Obs, allreduce_sum=None) -> bool:
        self.ob_rms.update(self.as_obs(obs)[VECTOR], allreduce_sum)
        return True

    def features(self, obs: Obs) -> torch.Tensor:
        """obs: the vector (B, D) -> the normalised observations (B, D), float32 under any autocast (no op of
        the normalisation is one autocast casts), so with evaluate's float32 heads the MLP runs in float32 in
        every pass, --precision bf16 or not."""
        return self.ob_rms.normalize(self.as_obs(obs)[VECTOR])



def build(model_type: str, action_space, obs: ObsSpec | tuple[int, ...] = (4, 84, 84), init: str = "normc",
          frame_norm: str = "scale", rnn: str = "none", rnn_size: int = 256, stacked: bool = True,
          rnn_critic: str = "shared", rnn_init: str = "zeros") -> nn.Module:
    """The policy of `--model_type` for an action space (or a number of discrete actions) and observations `obs`
    (an ObsSpec, or the shape of one entry: (C, H, W) an image, (D,) a vector): Discrete, MultiDiscrete or
    MultiBinary actions (and 1-D Box with `mlp`); rnn (`lstm`, `gru`, `none`): a RecurrentCore of rnn_size before
    the heads (rnn_critic `separate`: the value head's own second core); stacked: the images are stacks of
    one-channel frames (the env's `stacked`; True by default, as Atari's (4, 84, 84))."""
    spec = obs if isinstance(obs, ObsSpec) else ObsSpec.of(
        {IMAGE: obs} if len(obs) == 3 else None, vector=obs[0] if len(obs) == 1 else 0)
    if not spec.entries:
        raise PPO1Error(f"observations of shape {tuple(obs)} are neither images (C, H, W) nor vectors (D,)")
    num_actions = action_space if isinstance(action_space, int) else head_size(action_space)  # sum(nvec) or n
    if spec.mask_size and spec.mask_size != num_actions:
        raise PPO1Error(f"the action mask has {spec.mask_size} values, the actions {num_actions} choices")
    if model_type == "mlp":
        if spec.images:
            raise PPO1Error(f"--model_type=mlp needs vector observations, not images ({spec.describe()})")
        return MlpPolicy(spec.vector_size, action_space, rnn=rnn, rnn_size=rnn_size, rnn_critic=rnn_critic, spec=spec,
                         rnn_init=rnn_init)
    if model_type in ("small", "large", "impala") and not spec.images:
        raise PPO1Error(f"--model_type={model_type} needs image observations (C, H, W), not {spec.describe()}; "
                        "use --model_type mlp")
    nvec = None if isinstance(action_space, int) else action_nvec(action_space)
    return CnnPolicy(num_actions, model_type, init=init, frame_norm=frame_norm, nvec=nvec, rnn=rnn, rnn_size=rnn_size,
                     stacked=stacked, rnn_critic=rnn_critic, spec=spec, rnn_init=rnn_init)
