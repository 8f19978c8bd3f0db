"""Does the score on the screen tell a Pong policy it is at the game's start?

Plays game 1 of `--mode play`'s rank 0 with a run's last checkpoint (as bench.points does) and saves the
emulator at the start of its first point and of its second; then plays each of those points TRIES
times with sampled actions, as it is and with the score bytes of the Atari RAM rewritten (13: the
computer's score, 14: the agent's; the emulator takes a rewritten score for a point on the next step,
which is not counted), and prints how many tries the agent won.
Run: .venv/bin/python assets/reference/pong-first-point/score_cue.py CHECKPOINT_DIR MODEL_NAME [TRIES] > score_cue-MODEL.txt
"""
import sys

from bench.points import open_run, point_states, sampled_tries

checkpoint_dir, model_name = sys.argv[1], sys.argv[2]
tries = int(sys.argv[3]) if len(sys.argv) > 3 else 32
trained, env, generator = open_run(checkpoint_dir, model_name)
starts, results = point_states(trained, env, generator, 1, 2)  # the states at the first and second point's start
print(f"{model_name}: game 1's first point was {'won' if results[0] > 0 else 'lost'}")


def play(state, score=None) -> tuple[int, list[int]]:
    """Won tries of the point from `state` (score: (computer, agent) written into RAM 13, 14 first)."""
    if score is None:
        return sampled_tries(trained, env, state, tries)

    def write_score(env):
        env.ale.setRAM(13, score[0])
        env.ale.setRAM(14, score[1])

    # the emulator rewards a rewritten score as a point on the next step: not one
    return sampled_tries(trained, env, state, tries, setup=write_score, uncounted_steps=1)


ram = env.ale.getRAM
for name, state in (("first point", starts[0]), ("second point", starts[1])):
    env.set_state(state)
    print(f"{name}: score {ram()[13]}-{ram()[14]} (computer-agent)")
    for label, score in (("as it is", None), ("score written as 0-0", (0, 0)), ("score written as 1-0", (1, 0)),
                         ("score written as 5-10", (5, 10))):
        won, lengths = play(state, score)
        print(f"{name}, {label}: won {won} of {tries}; steps {' '.join(f'{n:+d}' for n in lengths)}")
