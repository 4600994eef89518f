"""Any registered Gymnasium environment with a Discrete action space as an unbatched TF-Agents
PyEnvironment (`GymnasiumEnvironment`), and the checks of an environment id (`check_env_id`).

TF-Agents 0.19 ships no Gymnasium wrapper (its gym_wrapper.py is for gym 0.23's four-value
`step`, with no terminated / truncated distinction), so this is a small one:
  * actions: int32 0..n-1, the Discrete space's actions start, start + 1, ... (`action_set`);
  * observations: a Box of uint8 -> uint8 of its shape and bounds (images); any other Box ->
    float32 of its shape; a Discrete space -> its one-hot float32 vector [n]; other spaces
    (Dict, Tuple, MultiDiscrete, ...) are refused;
  * `terminated` -> a termination (discount 0); `truncated` alone -> a truncation (discount 1,
    StepType.LAST); rewards as the environment gives them (float32 in the TimeStep, the sum in
    `episode_raw_return`);
  * seeding: the first reset is `reset(seed=seed)` and the action space is seeded with `seed`;
    later resets continue the environment's own RNG, so a seed gives one sequence of episodes;
  * episode length: `max_episode_steps` replaces the registered TimeLimit when given, else the
    registered one applies (some environments have none).
"""
from __future__ import annotations

import difflib
import functools
from typing import Dict, List, Optional

import gymnasium
from gymnasium import spaces
import numpy as np
from tf_agents.environments import py_environment
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.envs import gymnasium_name

PREFIX = gymnasium_name.PREFIX


def is_registered(env_id: str) -> bool:
  """Whether gymnasium registers `env_id` now (gymnasium.envs.registry; nothing made)."""
  return env_id in gymnasium.envs.registry


def close_ids(env_id: str) -> List[str]:
  """Up to three registered ids close to `env_id` (difflib), closest first."""
  return difflib.get_close_matches(env_id, sorted(gymnasium.envs.registry), n=3, cutoff=0.6)


def registered_max_episode_steps(env_id: str) -> Optional[int]:
  """The agent-step cap of `env_id`'s registered TimeLimit (CartPole-v1: 500), or None when
  it registers none (nothing made; check the registry first, `check_registered`)."""
  steps = gymnasium.envs.registry[env_id].max_episode_steps
  return None if steps is None else int(steps)


def check_registered(env_id: str) -> None:
  """ValueError unless `env_id` is a registered id, suggesting close ones (no env made)."""
  if is_registered(env_id):
    return
  close = close_ids(env_id)
  hint = (f"did you mean {', '.join(close)}?" if close
          else "gymnasium.pprint_registry() lists the registered ids")
  raise ValueError(f"{PREFIX}{env_id}: gymnasium registers no environment {env_id!r}; {hint}")


def observation_spec_of(env_id: str, space) -> array_spec.ArraySpec:
  """The TF-Agents observation spec of a Gymnasium observation space (module docstring);
  ValueError naming `env_id` and the space for one that has none."""
  if isinstance(space, spaces.Box):
    if space.dtype == np.uint8:
      return array_spec.BoundedArraySpec(space.shape, np.uint8, space.low, space.high,
                                         name="observation")
    return array_spec.ArraySpec(space.shape, np.float32, name="observation")
  if isinstance(space, spaces.Discrete):
    return array_spec.BoundedArraySpec((int(space.n),), np.float32, 0.0, 1.0,
                                       name="observation")
  raise ValueError(f"{PREFIX}{env_id}: its observation space {space} is not supported "
                   f"(expected a Box or a Discrete space)")


def check_action_space(env_id: str, space) -> None:
  """ValueError naming `env_id` and the space unless it is Discrete."""
  if not isinstance(space, spaces.Discrete):
    raise ValueError(f"{PREFIX}{env_id}: its action space {space} is not Discrete (expected "
                     f"Discrete(n): the learners choose among n actions)")


def _make(env_id: str, max_episode_steps: Optional[int], make_kwargs: Dict[str, object]):
  """gymnasium.make, any error it raises (a missing dependency, a deprecated version) as one
  ValueError naming the id."""
  kwargs = dict(make_kwargs)
  if max_episode_steps is not None:
    kwargs["max_episode_steps"] = int(max_episode_steps)
  try:
    return gymnasium.make(env_id, **kwargs)
  except Exception as e:  # pylint: disable=broad-except
    text = " ".join(str(e).split())
    raise ValueError(f"{PREFIX}{env_id}: gymnasium cannot make it: {type(e).__name__}: "
                     f"{text}") from None


@functools.lru_cache(maxsize=64)
def check_env_id(env_id: str) -> None:
  """ValueError (one line, naming `env_id`) unless it can be made, has a Discrete action space
  and an observation space of `observation_spec_of`: the environment made once (and closed);
  a success is remembered. Check the registry first (`check_registered`)."""
  env = _make(env_id, None, {})
  try:
    check_action_space(env_id, env.action_space)
    observation_spec_of(env_id, env.observation_space)
  finally:
    env.close()


class GymnasiumEnvironment(py_environment.PyEnvironment):
  """One Gymnasium environment as an unbatched TF-Agents PyEnvironment (module docstring).

  Args:
    env_id: a registered Gymnasium id, e.g. 'CartPole-v1'.
    seed: the first reset's seed and the action space's.
    max_episode_steps: cap on agent steps per episode (truncation); None: the registered one.
    make_kwargs: further keyword arguments of gymnasium.make (the environment's own).
  """

  def __init__(self, env_id: str, *, seed: int = 0, max_episode_steps: Optional[int] = None,
               make_kwargs: Optional[Dict[str, object]] = None):
    super().__init__(handle_auto_reset=False)
    if max_episode_steps is not None and int(max_episode_steps) < 1:
      raise ValueError(f"max_episode_steps must be >= 1 or None, got {max_episode_steps!r}")
    check_registered(env_id)
    self.env_id = str(env_id)
    self.game = PREFIX + self.env_id
    self._env = _make(self.env_id, max_episode_steps, make_kwargs or {})
    try:
      check_action_space(self.env_id, self._env.action_space)
      self._obs_spec = observation_spec_of(self.env_id, self._env.observation_space)
    except ValueError:
      self._env.close()
      raise
    space = self._env.action_space
    self._action_start = int(space.start)
    self._act_spec = array_spec.BoundedArraySpec((), np.int32, 0, int(space.n) - 1,
                                                 name="action")
    self._one_hot = isinstance(self._env.observation_space, spaces.Discrete)
    self._seed = int(seed)
    self._env.action_space.seed(self._seed)
    self._seeded = False
    self._done = True   # no episode yet: the first step resets
    self._steps = 0
    self._truncated = False
    self.last_raw_reward = 0.0
    self.episode_raw_return = 0.0

  # --- specs and properties
  def observation_spec(self):
    return self._obs_spec

  def action_spec(self):
    return self._act_spec

  @property
  def num_actions(self) -> int:
    return int(self._act_spec.maximum) + 1

  @property
  def action_set(self) -> List[int]:
    """The Gymnasium actions (index = TF-Agents action): start, ..., start + n - 1."""
    return list(range(self._action_start, self._action_start + self.num_actions))

  @property
  def gymnasium_env(self):
    """The underlying Gymnasium environment (its wrappers included)."""
    return self._env

  @property
  def episode_steps(self) -> int:
    return self._steps

  def get_info(self) -> Dict[str, object]:
    return dict(raw_reward=self.last_raw_reward, episode_raw_return=self.episode_raw_return,
                episode_steps=self._steps, truncated=self._truncated)

  def close(self) -> None:
    self._env.close()

  # --- dynamics
  def _observe(self, obs) -> np.ndarray:
    if self._one_hot:
      space = self._env.observation_space
      out = np.zeros((int(space.n),), np.float32)
      out[int(obs) - int(space.start)] = 1.0
      return out
    return np.asarray(obs, self._obs_spec.dtype).reshape(self._obs_spec.shape)

  def _reset(self):
    if self._seeded:
      obs, _ = self._env.reset()
    else:
      obs, _ = self._env.reset(seed=self._seed)
      self._seeded = True
    self._done, self._steps, self._truncated = False, 0, False
    self.last_raw_reward = 0.0
    self.episode_raw_return = 0.0
    return ts.restart(self._observe(obs))

  def _step(self, action):
    if self._done:
      return self.reset()
    a = int(np.asarray(action).reshape(()))
    if not 0 <= a < self.num_actions:
      raise ValueError(f"action {a} outside [0, {self.num_actions}) for {self.game}")
    obs, reward, terminated, truncated, _ = self._env.step(self._action_start + a)
    self._steps += 1
    self.last_raw_reward = float(reward)
    self.episode_raw_return += float(reward)
    observation = self._observe(obs)
    if terminated:
      self._done = True
      return ts.termination(observation, np.float32(reward))
    if truncated:
      self._done = True
      self._truncated = True
      return ts.truncation(observation, np.float32(reward))
    return ts.transition(observation, np.float32(reward))
