"""Which serves a Pong policy wins: every point of a run's games, by what came before it (the game's
start, a point won, a point lost) and by its serve (toward whom, upward or downward on the screen).

Plays `GAMES` whole games of `--mode play`'s rank 0 with the run's last checkpoint and sampled actions
(as bench.points does, so its games are bench.points'), reading the serve from RAM 49 (the ball's x)
and 54 (its y) as serves.py does (at most 8 pixels an agent step of 4 frames), and prints one line:
points won of points played per kind, and the range of the ball's y (0 at the top, about 200 at the
bottom) where the computer first returned it (no return: the serve's own point).
Run: .venv/bin/python assets/reference/pong-first-point/serve_table.py CHECKPOINT_DIR MODEL_NAME GAMES >> serve_table.txt
"""
import sys
from collections import Counter

from bench.points import open_run
from ppo1.evaluate import choose_action

checkpoint_dir, model_name, games = sys.argv[1], sys.argv[2], int(sys.argv[3])
trained, env, generator = open_run(checkpoint_dir, model_name)


def ball() -> tuple[int, int]:
    ram = env.ale.getRAM()
    return int(ram[49]), int(ram[54])


obs, game, after, serve, prev, dx, ret = env.reset(), 1, "the start", None, ball(), 0, None
won, played, returns = Counter(), Counter(), {}
while game <= games:
    obs, reward, _done, episode = env.step(choose_action(trained.policy, obs, False, generator))
    x, y = ball()
    if y and prev[1] and x != prev[0] and abs(x - prev[0]) <= 8:  # the ball moved on the court (not a jump)
        if serve is None:
            serve = (("to the agent" if x > prev[0] else "to the computer")
                     + (", downward" if y > prev[1] else ", upward"))
        if ret is None and dx < 0 < x - prev[0]:
            ret = y  # the computer's first return
        dx = x - prev[0]
    prev = (x, y)
    if reward:
        played[after, serve] += 1
        won[after, serve] += reward > 0
        if ret is not None:
            returns.setdefault((after, serve), []).append(ret)
        after, serve, dx, ret = ("a point won" if reward > 0 else "a point lost"), None, 0, None
    if episode is not None:
        game, after = game + 1, "the start"
kinds = sorted(played, key=lambda k: (("the start", "a point won", "a point lost").index(k[0]), str(k[1])))


def returned(kind) -> str:
    ys = returns.get(kind)
    return f" (the computer's first return at y {min(ys)}-{max(ys)})" if ys else ""


print(f"{model_name} ({games} games): "
      + "; ".join(f"after {a}, served {s}: won {won[a, s]} of {played[a, s]}{returned((a, s))}" for a, s in kinds))
