"""MinAtar games (Young & Tian, 2019; ``minatar`` 1.0.15) as TF-Agents PyEnvironments.

More in docs/minatar.md "Module notes", `ccvl_tf/envs/minatar.py`.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional

import numpy as np

from tf_agents.trajectories import time_step as ts

from ccvl_tf.envs import episode

STICKY_ACTION_PROB = 0.1   # MinAtar's Environment default
MAX_EPISODE_STEPS = 10_000
GRID = 10
# CamelCase name -> MinAtar module name (minatar.environments.<module>).
GAMES: Dict[str, str] = {
    "Asterix": "asterix",
    "Breakout": "breakout",
    "Freeway": "freeway",
    "Seaquest": "seaquest",
    "SpaceInvaders": "space_invaders",
}


def valid_game_names() -> List[str]:
  """The five MinAtar games, CamelCase (as in the DQN Replay Dataset's layout)."""
  return sorted(GAMES)


def canonical_game_name(game: str) -> str:
  """'Breakout', 'breakout', 'space_invaders', 'SpaceInvaders', 'MinAtar/Breakout-v1'
  -> the CamelCase name. Raises ValueError listing the valid names."""
  name = str(game).strip()
  m = re.match(r"^(?:minatar[/:])?(?P<g>[A-Za-z_ -]+?)(?:-v\d+)?$", name, re.IGNORECASE)
  key = re.sub(r"[_ -]", "", m.group("g")).lower() if m else None
  for camel in GAMES:
    if camel.lower() == key:
      return camel
  raise ValueError("unknown MinAtar game {!r}; valid names: {}".format(
      game, ", ".join(valid_game_names())))


def _minatar():
  # Here: minatar (~1 s to import) only for MinAtar games; envs/factory imports this module.
  import minatar  # pylint: disable=g-import-not-at-top
  return minatar


class MinAtarEnvironment(episode.GameEnvironment):
  """One MinAtar game as a TF-Agents PyEnvironment (see the module notes).

  Args:
    game: a name accepted by :func:`canonical_game_name`.
    seed: seeds MinAtar's RandomState (sticky actions + game randomness).
    sticky_action_prob: probability of repeating the previous action (MinAtar: 0.1).
    max_episode_steps: truncate an episode after this many agent steps (None: never).
    clip_rewards: clip the TimeStep reward to [-1, 1] (the raw score is kept apart).
    difficulty_ramping: MinAtar's difficulty ramping (Asterix, Seaquest).
  """

  def __init__(self, game: str, *, seed: int = 0,
               sticky_action_prob: float = STICKY_ACTION_PROB,
               max_episode_steps: Optional[int] = MAX_EPISODE_STEPS,
               clip_rewards: bool = True, difficulty_ramping: bool = True):
    super().__init__(handle_auto_reset=False)
    self.game = canonical_game_name(game)
    if not 0.0 <= float(sticky_action_prob) <= 1.0:
      raise ValueError("sticky_action_prob must be in [0, 1], got {!r}".format(
          sticky_action_prob))
    if max_episode_steps is not None and int(max_episode_steps) < 1:
      raise ValueError("max_episode_steps must be >= 1 or None, got {!r}".format(
          max_episode_steps))
    self._env = _minatar().Environment(GAMES[self.game],
                                       sticky_action_prob=float(sticky_action_prob),
                                       difficulty_ramping=bool(difficulty_ramping))
    self._seed = int(seed)
    self._env.seed(self._seed)           # one RandomState for sticky actions and the game
    self._env.last_action = 0           # MinAtar's initial value, explicit
    self._action_set = [int(a) for a in self._env.minimal_action_set()]
    self._shape = tuple(int(d) for d in self._env.state_shape())  # (10, 10, C)
    self._game_over = False
    self._init_game(self._shape, 1, len(self._action_set), max_episode_steps, clip_rewards)

  # --- properties (the specs and num_actions: episode.GameEnvironment)
  @property
  def action_set(self) -> List[int]:
    """MinAtar action ids of the minimal action set (index = TF-Agents action)."""
    return list(self._action_set)

  @property
  def num_channels(self) -> int:
    return self._shape[-1]

  @property
  def episode_steps(self) -> int:
    return self._steps

  @property
  def minatar_env(self):
    """The underlying ``minatar.Environment`` (tests, inspection)."""
    return self._env

  def get_info(self) -> Dict[str, object]:
    return dict(raw_reward=self.last_raw_reward, episode_raw_return=self.episode_raw_return,
                episode_steps=self._steps, truncated=self._truncated,
                game_over=self._game_over,
                difficulty_ramp=self._env.env.difficulty_ramp())

  # --- dynamics
  def _observe(self) -> np.ndarray:
    return self._env.state().astype(np.uint8)  # bool [10, 10, C] -> uint8 {0, 1}

  def _reset(self):
    self._env.reset()
    self._start_episode()
    self._game_over = False
    return ts.restart(self._observe())

  def _step(self, action):
    if self._done:
      return self.reset()
    a = self._action_index(action, "MinAtar " + self.game)
    raw, terminal = self._env.act(self._action_set[a])  # sticky actions inside MinAtar
    self._game_over = bool(terminal)
    return episode.finish_step(self, raw, bool(terminal), self._observe())
