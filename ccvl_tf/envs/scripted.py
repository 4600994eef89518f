"""Scripted behaviour policies that actually play, for default datasets worth learning from.

`breakout_tracker`: reads the paddle and ball positions from the ALE RAM (Breakout RAM map, as
annotated by AtariARI, Anand et al. 2019: ball x = ram[99], ball y = ram[101], paddle x =
ram[72]), fires to serve when no ball is in play and otherwise moves the paddle toward the ball;
with probability `epsilon` it takes a uniformly random action instead (coverage and
sub-optimality for offline RL). Sticky actions and the Dopamine preprocessing of the
environment stay as they are.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

BALL_X, BALL_Y, PADDLE_X = 99, 101, 72
# Breakout's minimal action set: NOOP, FIRE, RIGHT, LEFT (indices of AtariEnvironment actions).
NOOP, FIRE, RIGHT, LEFT = 0, 1, 2, 3
# The paddle's RAM x is its left edge; its centre is ~8 pixels to the right (paddle 16 wide)
# in the same units as the ball's x, minus the ball's own width offset (measured).
PADDLE_CENTRE_OFFSET = 8
DEADBAND = 3


def scripted_policies():
  """game -> factory(env, epsilon, seed) -> (time_step -> action index)."""
  return {"Breakout": breakout_tracker}


def breakout_tracker(env, epsilon: float = 0.25, seed: int = 0) -> Callable:
  """The RAM-reading Breakout player (module doc), epsilon-mixed with uniform actions."""
  if not 0.0 <= epsilon <= 1.0:
    raise ValueError(f"epsilon must be in [0, 1], got {epsilon!r}")
  if getattr(env, "game", None) != "Breakout" or env.num_actions != 4:
    raise ValueError(f"breakout_tracker needs the Breakout AtariEnvironment, got "
                     f"{getattr(env, 'game', env)!r}")
  rng = np.random.default_rng(seed)

  def act(time_step) -> int:
    del time_step
    if rng.random() < epsilon:
      return int(rng.integers(4))
    ram = env.ale.getRAM()
    ball_x, ball_y, paddle_x = int(ram[BALL_X]), int(ram[BALL_Y]), int(ram[PADDLE_X])
    if ball_y == 0:                     # no ball in play: serve
      return FIRE
    diff = ball_x - (paddle_x + PADDLE_CENTRE_OFFSET)
    if diff > DEADBAND:
      return RIGHT
    if diff < -DEADBAND:
      return LEFT
    return NOOP

  return act
