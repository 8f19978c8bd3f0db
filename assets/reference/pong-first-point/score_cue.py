"""Does the score on the screen tell a Pong policy it is at the game's start?

Plays game 1 of `--mode play`'s rank 0 with a run's last checkpoint (as bench.points does) and saves the
emulator at the start of its first point and of its second; then plays each of those points TRIES
times with sampled actions, as it is and with the score bytes of the Atari RAM rewritten (13: the
computer's score, 14: the agent's; the emulator takes a rewritten score for a point on the next step,
which is not counted), and prints how many tries the agent won.
Run: .venv/bin/python assets/reference/pong-first-point/score_cue.py CHECKPOINT_DIR MODEL_NAME [TRIES] > score_cue-MODEL.txt
"""
import sys

import torch

from bench.points import open_run
from ppo1.evaluate import choose_action

checkpoint_dir, model_name = sys.argv[1], sys.argv[2]
tries = int(sys.argv[3]) if len(sys.argv) > 3 else 32
trained, env, generator = open_run(checkpoint_dir, model_name)

obs, starts, first = env.reset(), [env.get_state()], None  # the states at the first and second point's start
while len(starts) < 2:
    obs, reward, _done, _episode = env.step(choose_action(trained.policy, obs, False, generator))
    if reward:
        first = "won" if reward > 0 else "lost"
        starts.append(env.get_state())
print(f"{model_name}: game 1's first point was {first}")


def play(state, score=None) -> tuple[int, list[int]]:
    """Won tries of the point from `state` (score: (computer, agent) written into RAM 13, 14 first)."""
    won, lengths = 0, []
    for k in range(tries):
        obs = env.set_state(state).copy()
        if score is not None:
            env.ale.setRAM(13, score[0])
            env.ale.setRAM(14, score[1])
        gen = torch.Generator().manual_seed(1000 + k)
        reward, steps = 0.0, 0
        while not reward:
            obs, reward, _done, _episode = env.step(choose_action(trained.policy, obs, False, gen))
            steps += 1
            if steps == 1 and score is not None:
                reward = 0.0  # the emulator rewards a rewritten score as a point on the next frame: not one
        won += reward > 0
        lengths.append(steps if reward > 0 else -steps)
    return won, lengths


ram = env.ale.getRAM
for name, state in (("first point", starts[0]), ("second point", starts[1])):
    env.set_state(state)
    print(f"{name}: score {ram()[13]}-{ram()[14]} (computer-agent)")
    for label, score in (("as it is", None), ("score written as 0-0", (0, 0)), ("score written as 1-0", (1, 0)),
                         ("score written as 5-10", (5, 10))):
        won, lengths = play(state, score)
        print(f"{name}, {label}: won {won} of {tries}; steps {' '.join(f'{n:+d}' for n in lengths)}")
