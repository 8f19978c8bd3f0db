"""Does the agent's paddle at mid-court lose Pong's first point?

Plays game 1 of `--mode play`'s rank 0 with a run's last checkpoint (as bench.points does), saves the
emulator at the start of its first point and of its second, and plays each TRIES times with its first
actions scripted (2: the paddle up, 3: down, 0: no-op; the paddle crosses the court in 3 agent steps),
then sampled actions of the policy: prints the paddle (RAM 51: 38 at the top, 203 at the bottom) after
the script and how many tries the agent won.
Run: .venv/bin/python assets/reference/pong-first-point/paddle.py CHECKPOINT_DIR MODEL_NAME [TRIES] > paddle-MODEL.txt
"""
import sys

from bench.points import open_run, point_states, sampled_tries

checkpoint_dir, model_name = sys.argv[1], sys.argv[2]
tries = int(sys.argv[3]) if len(sys.argv) > 3 else 32
trained, env, generator = open_run(checkpoint_dir, model_name)
starts, results = point_states(trained, env, generator, 1, 2)  # the states at the first and second point's start
print(f"{model_name}: game 1's first point was {'won' if results[0] > 0 else 'lost'}")


def paddle_after(state, script: list[int]) -> int:
    """The paddle (RAM 51) after `script` from `state` (the emulator is deterministic without sticky actions)."""
    env.set_state(state)
    for action in script:
        env.step(action)
    return int(env.ale.getRAM()[51])


for name, state in (("first point", starts[0]), ("second point", starts[1])):
    env.set_state(state)
    print(f"{name}: the paddle at {int(env.ale.getRAM()[51])} at its start")
    for label, script in (("as it is", []), ("3 no-ops", [0, 0, 0]), ("1 down", [3]), ("2 down", [3, 3]),
                          ("3 down", [3, 3, 3]), ("1 up", [2]), ("3 up", [2, 2, 2])):
        won, lengths = sampled_tries(trained, env, state, tries, script=script)
        print(f"{name}, {label} (the paddle at {paddle_after(state, script)} after): won {won} of {tries}; "
              f"steps {' '.join(f'{n:+d}' for n in lengths)}")
