"""Where a trained agent's points go: every point of whole games, and rallies replayed from their start.

    python -m bench.points --model_name pong-fast-p --games 10             # each game's points
    python -m bench.points --model_name pong-fast-p --replay 5:3 --tries 16  # game 5's 4th point, 16 times
    python -m bench.points --model_name pong-fast-p --games 4 --ram 51      # and where the paddle starts each

Games are those of `--mode play` on one rank (the same seeds, sampled actions), so game 5 here is game
5 there. For each game: the score, its length and the points in order, `+95` for a point the agent won
95 agent steps after the previous point (or the game's start), `-125` for one it lost; then the
(result, length) pairs that occur three or more times in the game: a rally the game keeps repeating;
last, one line over the games: mean score, first points won, points lost after the first. `--ram 51`
adds a line per game with that byte of the Atari RAM at each point's first step (Pong's 51: the agent's
paddle, 38 at the top and 203 at the bottom; 99-103 at the game's start).
PongNoFrameskip-v4 has no sticky actions, so a game is deterministic given the actions, and a policy
that is nearly certain in a few states can lose the same rally again and again.

`--replay G:P` plays up to the start of point P (0-based) of game G, saves the emulator, and plays that
point `--tries` times from there: try 0 with greedy (argmax) actions, the others with actions sampled
from the policy with their own seeds (`--random`: uniformly random actions, to check that actions
change the outcome at all). Each try prints whether the agent won or lost the point and after how many
steps: if every sampled try loses after the same number of steps, sampling does not get the agent out.
One process, no mpirun. Works for any game with rewards (a "point" is any step with a non-zero reward).
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter

import numpy as np

from ppo1 import PPO1Error  # light: ppo1/__init__.py imports nothing

MIN_REPEATS = 3


def points_of(rewards: list[tuple[int, float]]) -> list[tuple[int, int]]:
    """(sign, length) of each point from (agent step, reward) pairs of one game, in order: the length
    is the number of agent steps since the previous point (or the game's start, step 0)."""
    points, last = [], 0
    for step, reward in rewards:
        points.append((1 if reward > 0 else -1, step - last))
        last = step
    return points


def repeats(points: list[tuple[int, int]], min_count: int = MIN_REPEATS) -> list[tuple[tuple[int, int], int]]:
    """The (sign, length) pairs that occur at least min_count times, most frequent first."""
    return [(p, n) for p, n in Counter(points).most_common() if n >= min_count]


def summarize_games(games: list[list[tuple[int, int]]], scores: list[float]) -> str:
    """One line over whole games (their points and scores): the mean score, how often the game's first point
    was won and how many points were lost after it, e.g. `10 games: mean score 20.10; first point won in 2 of
    10; points lost after the first: 1 (0.1 per game)`. On Pong a policy that wins its rally but loses the
    opening serve scores +20 (docs/learning.md, "Where the +20 is decided")."""
    n = len(games)
    first = sum(1 for points in games if points and points[0][0] > 0)
    later = sum(1 for points in games for s, _ in points[1:] if s < 0)
    return (f"{n} games: mean score {sum(scores) / n:.2f}; first point won in {first} of {n}; "
            f"points lost after the first: {later} ({later / n:.1f} per game)")


def fmt_point(point: tuple[int, int]) -> str:
    sign, length = point
    return f"{'+' if sign > 0 else '-'}{length}"


def parse_replay(text: str) -> tuple[int, int]:
    try:
        game, point = (int(x) for x in text.split(":"))
    except ValueError:
        raise PPO1Error(f"--replay={text!r} is invalid: give GAME:POINT, e.g. 5:3 (game from 1, point from 0)") from None
    if game < 1 or point < 0:
        raise PPO1Error(f"--replay={text!r} is invalid: the game counts from 1, the point from 0")
    return game, point


def open_run(checkpoint_dir: str, model_name: str):
    """(trained policy, eval env, action generator) with the seeds of `--mode play`'s rank 0."""
    from ppo1.config import Config
    from ppo1.distributed import Comm
    from ppo1.envs import make_eval_env
    from ppo1.evaluate import generator_for, load_trained
    from ppo1.play import PLAY_STREAM

    trained = load_trained(Config(checkpoint_dir=checkpoint_dir, model_name=model_name), {}, Comm(None))
    seed = np.random.SeedSequence([trained.config.seed, PLAY_STREAM, 0])
    env_seed, torch_seed = seed.spawn(2)
    env = make_eval_env(trained.config.env_name, env_seed)
    return trained, env, generator_for(torch_seed)


def parse_ram(text: str) -> list[int]:
    """--ram's comma-separated RAM addresses (0-127), e.g. "51,49" -> [51, 49]."""
    try:
        addresses = [int(a) for a in text.split(",")]
    except ValueError:
        addresses = []
    if not addresses or not all(0 <= a < 128 for a in addresses):
        raise PPO1Error(f"--ram {text!r}: give RAM addresses 0-127, comma-separated (Pong's paddle: 51)")
    return addresses


def read_ram(env, addresses: list[int]) -> str:
    """The bytes of the Atari RAM at `addresses`, joined by '/' (e.g. '203/52')."""
    ale = getattr(env, "ale", None)
    if ale is None:
        raise PPO1Error("--ram needs an Atari game (its emulator's RAM)")
    ram = ale.getRAM()
    return "/".join(str(int(ram[a])) for a in addresses)


def play_points(trained, env, generator, games: int, out=print,
                ram: list[int] | None = None) -> list[list[tuple[int, int]]]:
    """Play `games` whole games; print each one's points and repeated rallies (and with `ram`, those RAM
    bytes at each point's first step: on Pong, 51 is the agent's paddle). Returns their points."""
    from ppo1.evaluate import choose_action, fmt_score

    result, scores, rewards, step = [], [], [], 0
    obs = env.reset()
    starts = [read_ram(env, ram)] if ram else []  # the RAM at the first step of each point of this game
    while len(result) < games:
        obs, reward, _done, episode = env.step(choose_action(trained.policy, obs, False, generator))
        step += 1
        if reward:
            rewards.append((step, reward))
            if ram and episode is None:
                starts.append(read_ram(env, ram))
        if episode is not None:
            points = points_of(rewards)
            result.append(points)
            scores.append(episode.ret)
            won = sum(1 for s, _ in points if s > 0)
            out(f"game {len(result)}: score {fmt_score(episode.ret)}, {episode.length} agent steps, "
                f"{won} points won, {len(points) - won} lost: {' '.join(fmt_point(p) for p in points)}")
            for point, n in repeats(points):
                out(f"  repeated: {fmt_point(point)} x {n}")
            if ram:
                out(f"  RAM {','.join(map(str, ram))} at each point's start: {' '.join(starts[:len(points)])}")
                starts = [read_ram(env, ram)]  # the next game's start: the env has reset itself
            rewards, step = [], 0
    out(summarize_games(result, scores))
    return result


def point_states(trained, env, generator, game: int, points: int) -> tuple[list, list[int]]:
    """Play (sampled actions) to game `game` and save the emulator at the start of each of its first `points`
    points. Returns (the saved states, the results of the points played before the last: 1 won, -1 lost)."""
    from ppo1.evaluate import choose_action

    obs, g, states, results = env.reset(), 1, [], []
    while True:
        if g == game and len(states) == len(results):  # a point of the game starts here
            state = env.get_state()
            if state is None:
                raise PPO1Error(f"--replay needs a game whose state can be saved (Atari): {trained.config.env_name}")
            states.append(state)
            if len(states) == points:
                return states, results
        obs, reward, _done, episode = env.step(choose_action(trained.policy, obs, False, generator))
        if reward and g == game:
            results.append(1 if reward > 0 else -1)
        if episode is not None:
            if g == game:
                n = len(results)
                raise PPO1Error(f"--replay {game}:{points - 1}: game {game} had only {n} points (0..{n - 1})")
            g += 1


def play_point(env, state, act, script=(), setup=None, uncounted_steps: int = 0) -> tuple[int, int]:
    """Play one point from the saved emulator `state`: the actions of `script` first, then act(obs) until a
    point (a non-zero reward) or the game's end. setup(env), if given, runs once the state is restored (e.g.
    RAM writes); a reward in the first `uncounted_steps` steps is not a point. Returns (1 won, -1 lost or 0 no
    point, the agent steps played)."""
    obs = env.set_state(state).copy()
    if setup is not None:
        setup(env)
    steps = 0
    while True:
        obs, reward, _done, episode = env.step(script[steps] if steps < len(script) else act(obs))
        steps += 1
        if steps <= uncounted_steps:
            reward = 0.0
        if reward or episode is not None:  # a point, or the game ended without one (the frame limit)
            return (1 if reward > 0 else -1 if reward < 0 else 0), steps


def sampled_tries(trained, env, state, tries: int, **how) -> tuple[int, list[int]]:
    """Play the point from `state` `tries` times with actions sampled from the policy, try k with its own
    generator seeded 1000 + k (as --replay's sampled tries); `how`: play_point's script, setup,
    uncounted_steps. Returns (tries won, steps per try: +n won, -n lost or no point)."""
    import torch

    from ppo1.evaluate import choose_action

    won, lengths = 0, []
    for k in range(tries):
        gen = torch.Generator().manual_seed(1000 + k)
        sign, steps = play_point(env, state, lambda obs, gen=gen: choose_action(trained.policy, obs, False, gen), **how)
        won += sign > 0
        lengths.append(steps if sign > 0 else -steps)
    return won, lengths


def replay(trained, env, generator, game: int, point: int, tries: int, random_actions: bool,
           out=print) -> list[tuple[int, int]]:
    """Play to the start of `point` of `game`, then that point `tries` times. Returns (sign, steps) per try."""
    import torch

    from ppo1.evaluate import choose_action

    state = point_states(trained, env, generator, game, point + 1)[0][-1]
    outcomes = []
    for k in range(tries):
        gen = torch.Generator().manual_seed(1000 + k)
        greedy = k == 0 and not random_actions
        if random_actions:
            def act(_obs, gen=gen):
                return int(torch.randint(env.num_actions, (1,), generator=gen))
        else:
            def act(obs, gen=gen, greedy=greedy):
                return choose_action(trained.policy, obs, greedy, gen)
        sign, steps = play_point(env, state, act)
        outcomes.append((sign, steps))
        how = "random actions" if random_actions else "greedy" if greedy else "sampled"
        result = {1: "won", -1: "lost", 0: "no point"}[sign]
        out(f"try {k} ({how}): {result} after {steps} steps")
    out(summarize(outcomes))
    return outcomes


def summarize(outcomes: list[tuple[int, int]]) -> str:
    """One line over the tries of a replayed point, e.g. `16 tries: 0 won, 16 lost (after 125 steps: 16)`."""
    won, lost = (sum(1 for s, _ in outcomes if s == sign) for sign in (1, -1))
    lengths = ", ".join(f"{'+' if s > 0 else '-' if s < 0 else '0'}{n}: {c}"
                        for (s, n), c in Counter(outcomes).most_common())
    return f"{len(outcomes)} tries: {won} won, {lost} lost (result and steps: {lengths})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.points", description=__doc__.split("\n\n")[0])
    p.add_argument("--model_name", required=True, help="the run to load (its newest checkpoint)")
    p.add_argument("--checkpoint_dir", default="checkpoints", help="where the run's directory is")
    p.add_argument("--games", type=int, default=10, help="whole games to play and list")
    p.add_argument("--replay", help="GAME:POINT: replay that point of that game (game from 1, point from 0)")
    p.add_argument("--tries", type=int, default=16, help="how many times --replay plays the point")
    p.add_argument("--random", action="store_true", help="--replay with uniformly random actions")
    p.add_argument("--ram", help="ADDR[,ADDR...]: with whole games, those Atari RAM bytes at each point's start")
    args = p.parse_args(argv)
    try:
        if args.games < 1 or args.tries < 1:
            raise PPO1Error("--games and --tries must be whole numbers >= 1")
        target = parse_replay(args.replay) if args.replay else None
        ram = parse_ram(args.ram) if args.ram else None
        if ram and target:
            raise PPO1Error("--ram lists the points of whole games: leave out --replay")
        trained, env, generator = open_run(args.checkpoint_dir, args.model_name)
        if target:
            game, point = target
            replay(trained, env, generator, game, point, args.tries, args.random)
        else:
            play_points(trained, env, generator, args.games, ram=ram)
        env.close()
    except PPO1Error as e:
        print(f"bench.points: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
