"""Which way Pong serves: after the game's start, a point won and a point lost by the agent.

A scripted paddle (follows the ball, aiming a random offset after each of its returns, so that points
end both ways) plays one game of PongNoFrameskip-v4 frame by frame; RAM 49 is the ball's x (the agent
plays on the right, so x rising = toward the agent), RAM 54 the ball's y (0 while no ball is on the
court; rising = downward), RAM 51 the agent's paddle. A serve's direction is read from the first frame
on which the ball is on the court before and after and has moved at most 4 pixels: between points RAM
49 keeps the x where the ball left the court, so the jump from there to the centre is not a move (the
first version of this script, 2026-11-27, read that jump as one and had every serve the wrong way).
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
    ram2 = ale.getRAM()
    x2, y2 = int(ram2[49]), int(ram2[54])
    moving = x and x2 and x2 != x
    if moving and was_right and x2 < x:  # the agent returned the ball
        offset = int(rng.integers(-14, 6))
    was_right = bool(moving and x2 > x)
    if not served and y and y2 and x2 != x and abs(x2 - x) <= 4:
        served = True
        way = ("toward the agent" if x2 > x else "toward the computer") + (", downward" if y2 > y else ", upward")
        events.append((after, way))
        print(f"frame {frame:6d}: after {after}: the ball at x {x}, y {y}: served {way}")
    if reward:
        after, served = ("a point won" if reward > 0 else "a point lost"), False
    frame += 1
    if terminated or truncated:
        break
print("serves:", dict(Counter(events)))
