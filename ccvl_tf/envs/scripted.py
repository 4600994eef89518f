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


# The pixel version of breakout_tracker, on the 84x84 greyscale observation (newest frame):
# rows of the paddle and of the open field below the bricks, columns inside the side walls.
PIXEL_PADDLE_ROW = 76
PIXEL_FIELD_ROWS = (38, 75)
PIXEL_COLUMNS = (5, 79)
PIXEL_BALL_MIN = 20      # greyscale level above the black field that counts as the ball
PIXEL_PADDLE_MIN = 100   # and as the paddle
PIXEL_DEADBAND = 1.5     # DEADBAND in the 84-column frame


def breakout_pixel_actions(observations) -> np.ndarray:
  """The actions [B] of breakout_tracker's rule read from observations uint8 [B, 84, 84, S]
  instead of the ALE RAM: serve (FIRE) when no ball is in the open field below the bricks,
  else move the paddle toward the ball's column. An observation-only player, so that one
  behaviour can run through environments without RAM access (ale_py's vector environment)
  and through ours alike."""
  obs = np.asarray(observations)
  frames = obs[..., -1].astype(np.int32)  # [B, 84, 84]
  lo, hi = PIXEL_COLUMNS
  cols = np.arange(lo, hi, dtype=np.float64)
  out = np.full(frames.shape[0], FIRE, np.int32)
  for b, f in enumerate(frames):
    field = f[PIXEL_FIELD_ROWS[0]:PIXEL_FIELD_ROWS[1], lo:hi]
    paddle = f[PIXEL_PADDLE_ROW, lo:hi] > PIXEL_PADDLE_MIN
    ball = np.where(field > PIXEL_BALL_MIN, field, 0).sum(axis=0).astype(np.float64)  # [cols]
    if ball.sum() <= 0 or not paddle.any():
      continue
    diff = float((ball * cols).sum() / ball.sum()) - float(cols[paddle].mean())
    out[b] = RIGHT if diff > PIXEL_DEADBAND else (LEFT if diff < -PIXEL_DEADBAND else NOOP)
  return out
