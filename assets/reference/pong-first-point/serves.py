"""Which way Pong serves: after the game's start, a point won and a point lost by the agent.

A scripted paddle (follows the ball, aiming a random offset after each of its returns, so that points
end both ways) plays one game of PongNoFrameskip-v4 frame by frame; RAM 49 is the ball's x (the agent
plays on the right, so x rising = toward the agent), RAM 54 the ball's y, RAM 51 the agent's paddle.
Run: .venv/bin/python assets/reference/pong-first-point/serves.py > serves.txt
"""
from collections import Counter

import ale_py
import gymnasium as gym
import numpy as np

gym.register_envs(ale_py)
env = gym.make("PongNoFrameskip-v4")
env.reset(seed=0)
ale = env.unwrapped.ale
rng = np.random.default_rng(0)
NOOP, UP, DOWN = 0, 2, 3
events, after, offset, was_right, frame, served = [], "the game's start", 0, False, 0, False
while True:
    ram = ale.getRAM()
    x, y, paddle = int(ram[49]), int(ram[54]), int(ram[51])
    target = y + offset if y else 120
    _, reward, terminated, truncated, _ = env.step(DOWN if paddle < target - 4 else UP if paddle > target + 4 else NOOP)
    x2 = int(ale.getRAM()[49])
    moving = x and x2 and x2 != x
    if moving and was_right and x2 < x:  # the agent returned the ball
        offset = int(rng.integers(-14, 6))
    was_right = bool(moving and x2 > x)
    if moving and not served:
        served = True
        events.append((after, "toward the agent" if x2 > x else "toward the computer"))
        print(f"frame {frame:6d}: after {after}: served {events[-1][1]}")
    if reward:
        after, served = ("a point won" if reward > 0 else "a point lost"), False
    frame += 1
    if terminated or truncated:
        break
print("serves:", dict(Counter(events)))
