"""Atari evaluation with all episodes side by side: ale_py's own vector environment
(``ale_py.vector_env.AtariVectorEnv``, C++ worker threads) configured to the protocol of
ccvl_tf/envs/atari.py, and one batched policy call per step (`run_batched_episodes`, the
vector form of `ccvl_tf.evaluation.rollouts.run_episodes`). The protocol and the episode rules:
docs/library.md "Module notes", `ccvl_tf/evaluation/atari_vector.py`.
"""
from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Callable, List, Optional, Sequence

import numpy as np
import tensorflow as tf
from tf_agents.policies import tf_policy
from tf_agents.trajectories import time_step as ts
from tf_agents.utils import common

from ccvl_tf.algorithm import belief
from ccvl_tf.evaluation import rollouts
from ccvl_tf.envs import atari
from ccvl_tf.envs import factory

EVAL_ENVS = ("vector", "sequential")
# A slot of run_batched_episodes: playing (its observation awaits a policy call), waiting for
# its copy's autoreset, draining (our step cap ended the episode; the copy ends it next step),
# or done (left the batch).
_PLAY, _WAIT, _DRAIN, _DONE = 0, 1, 2, 3


def use_vector_env(game: str, eval_env: str) -> bool:
  """Whether an evaluation of `game` runs on the vector environment: `eval_env` is 'vector'
  and `game` is an Atari game (MinAtar 'minatar/<Game>' and 'gridworld' never are).

  Raises:
    ValueError: `eval_env` is not one of EVAL_ENVS (the message names --eval_env).
  """
  if eval_env not in EVAL_ENVS:
    raise ValueError(f"--eval_env must be one of {', '.join(EVAL_ENVS)}, got {eval_env!r}")
  if eval_env != "vector":
    return False
  name = str(game).strip()
  if name.lower() == factory.GRIDWORLD or factory.is_minatar(name):
    return False
  try:
    atari.check_game(name)
  except ValueError:
    return False
  return True


def slot_seeds(seed: int, num_slots: int) -> np.ndarray:
  """The ALE seeds of the N slots of an evaluation seeded `seed`: int32 >= 0, mixed by
  numpy's SeedSequence so that runs seeded s and s + 1 share no slot seed."""
  state = np.random.SeedSequence([int(seed), 0x5EED]).generate_state(int(num_slots), np.uint32)
  return (state % np.uint32(2**31 - 1)).astype(np.int64)


class AtariVectorEnvironment:
  """N copies of one Atari game in ``ale_py.vector_env.AtariVectorEnv`` with our protocol
  (module docstring).

  `reset(seeds)` starts every copy; `step(actions)` steps every copy once and returns
  (observations uint8 [N, 84, 84, 4] oldest frame first, raw rewards float64 [N], ended [N],
  terminated [N]): `ended` means the copy's episode ended in this step (game over, or the frame
  cap `max_episode_steps * frame_skip + 1`), and its next step is the autoreset that returns
  the first observation of a new episode (its action ignored).
  """

  def __init__(self, game: str, num_envs: int, *,
               sticky_action_prob: float = atari.STICKY_ACTION_PROB,
               frame_skip: int = atari.FRAME_SKIP, screen_size: int = atari.SCREEN_SIZE,
               stack_size: int = atari.STACK_SIZE,
               max_episode_steps: int = atari.MAX_EPISODE_STEPS,
               num_threads: Optional[int] = None):
    if int(num_envs) != num_envs or num_envs < 1:
      raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
    if int(max_episode_steps) != max_episode_steps or max_episode_steps < 1:
      raise ValueError(f"max_episode_steps must be an integer >= 1, got {max_episode_steps!r}")
    rid = atari.check_game(game)
    try:
      # Here: without gymnasium only the vector evaluation fails, with the message below.
      from ale_py.vector_env import AtariVectorEnv  # pylint: disable=g-import-not-at-top
    except ImportError as e:
      raise ImportError(
          f"the vector evaluation environment needs gymnasium ({e}); install the lock file "
          f"(pip install -r requirements.txt, gymnasium==1.3.0) or pass --eval_env=sequential"
      ) from e
    self.game = "".join(p.capitalize() for p in rid.split("_"))
    self.num_envs = int(num_envs)
    self.max_episode_steps = int(max_episode_steps)
    threads = min(self.num_envs, os.cpu_count() or 1) if num_threads is None else num_threads
    self._env = AtariVectorEnv(
        rid, self.num_envs, num_threads=int(threads),
        max_num_frames_per_episode=self.max_episode_steps * int(frame_skip) + 1,
        repeat_action_probability=float(sticky_action_prob), full_action_space=False,
        autoreset_mode="NextStep", img_height=int(screen_size), img_width=int(screen_size),
        grayscale=True, stack_num=int(stack_size), frameskip=int(frame_skip), maxpool=True,
        noop_max=0, episodic_life=False, life_loss_info=False, reward_clipping=False,
        use_fire_reset=False)
    self.action_set = [int(a.value) if hasattr(a, "value") else int(a)
                       for a in self._env.ale.get_action_set()]
    self.num_actions = len(self.action_set)

  def reset(self, seeds: Sequence[int]) -> np.ndarray:
    """Starts every copy, copy j with ALE seed seeds[j]; their first observations [N, H, W, S]."""
    seeds = np.asarray(seeds, np.int64).reshape(-1)
    if seeds.shape != (self.num_envs,):
      raise ValueError(f"reset needs {self.num_envs} seeds, got {seeds.shape[0]}")
    obs, _ = self._env.reset(seed=seeds)
    return np.transpose(obs, (0, 2, 3, 1))

  def step(self, actions):
    """Steps every copy with actions [N] (indices of the minimal action set)."""
    actions = np.asarray(actions, np.int64).reshape(-1)
    obs, reward, terminated, truncated, _ = self._env.step(actions)
    terminated = np.asarray(terminated, bool)
    return (np.transpose(obs, (0, 2, 3, 1)), np.asarray(reward, np.float64),
            terminated | np.asarray(truncated, bool), terminated)

  def close(self) -> None:
    self._env.close()


def _numpy_state(state):
  return tf.nest.map_structure(lambda x: np.array(x), state)


def _initial_state(policy, num_slots: int, seed: int):
  """The policy's initial state for `num_slots` rows as numpy arrays, the delta sampler's
  'rng' entry seeded with `seed` (as the sequential loop's batch-1 state)."""
  state = _numpy_state(policy.get_initial_state(batch_size=num_slots))
  if isinstance(state, Mapping):
    state = dict(state)
    if "rng" in state:
      state["rng"] = state["rng"].copy()
      state["rng"][:, 0] = seed
  return state


def _action_fn(policy):
  """policy.action as one tf.function traced for any batch size (the playing slots shrink as
  episodes end) when `policy` is a TF-Agents policy or a ccvl_tf.evaluation.rollouts.CompiledPolicy
  (of a policy or a loaded SavedModel; the trace is kept on it, so later evaluations reuse
  it); other objects' `action` is called as it is."""
  if isinstance(policy, rollouts.CompiledPolicy):
    if getattr(policy, "batched_action", None) is None:
      policy.batched_action = common.function(policy.policy.action)
    return policy.batched_action
  if isinstance(policy, tf_policy.TFPolicy):
    return common.function(policy.action)
  return policy.action


# At most this many environment copies in one evaluation; more episodes queue on the slots.
MAX_SLOTS = 64


# The environment of the last evaluate_atari call, reused by the next one with the same game,
# slot count and step cap: making the copies costs about 0.2-0.3 s each (every evaluation of a
# train_offline.py run has the same three). run_batched_episodes starts with a seeded reset
# of every copy, so what an earlier evaluation left in them does not carry over.
_CACHED: dict = {}


def _environment(game: str, num_envs: int, max_episode_steps: int) -> AtariVectorEnvironment:
  key = (atari.check_game(game), int(num_envs), int(max_episode_steps))
  if _CACHED.get("key") != key:
    if "env" in _CACHED:
      _CACHED.pop("env").close()
    _CACHED["env"] = AtariVectorEnvironment(game, num_envs, max_episode_steps=max_episode_steps)
    _CACHED["key"] = key
  return _CACHED["env"]


def evaluate_atari(policy, game: str, num_episodes: int, *, seed: int, epsilon: float,
                   max_episode_steps: int, run: int = 0, max_slots: int = MAX_SLOTS,
                   on_episode: Optional[Callable] = None) -> list:
  """`num_episodes` episodes of `policy` in `game` on min(num_episodes, max_slots) copies of
  an AtariVectorEnvironment (run_batched_episodes, seeded `seed`); the EpisodeRecords."""
  env = _environment(game, min(int(num_episodes), int(max_slots)), max_episode_steps)
  try:
    return run_batched_episodes(policy, env, num_episodes, run=run, epsilon=epsilon, seed=seed,
                                on_episode=on_episode,
                                max_total_steps=num_episodes * (max_episode_steps + 2))
  except BaseException:
    _CACHED.pop("env").close()  # an evaluation stopped mid-way: make the next one afresh
    _CACHED.pop("key", None)
    raise


def _deltas_of(step) -> Optional[np.ndarray]:
  """The deltas [B] a batched PolicyStep acted under (its info's 'delta'), None if none."""
  info = getattr(step, "info", None)
  delta = getattr(info, "delta", None)
  if delta is None and isinstance(info, Mapping):
    delta = info.get("delta")
  return None if delta is None else np.asarray(delta).reshape(-1)


def run_batched_episodes(policy, env, num_episodes: int, *, run: int = 0,
                         epsilon: float = 0.0, seed: int = 0,
                         delta_grid: Optional[np.ndarray] = None,
                         on_episode: Optional[Callable] = None,
                         on_step: Optional[Callable[[int, int], None]] = None,
                         max_total_steps: Optional[int] = None) -> list:
  # One state machine over the slots (play, close an episode at LAST, leave the batch), read
  # best in one piece like the sequential loop it mirrors.
  """Runs `policy` for `num_episodes` episodes on the slots of `env` (module docstring).

  Args:
    policy: anything with `get_initial_state(batch_size)` and `action(time_step, state)` on
      batches (TF-Agents policy, ccvl_tf.evaluation.rollouts.CompiledPolicy, loaded SavedModel).
    env: an AtariVectorEnvironment (or an object with its interface: num_envs, num_actions,
      max_episode_steps, reset(seeds), step(actions)); its num_envs slots are all used, so
      make it with min(num_episodes, cap) copies.
    num_episodes: >= num_envs.
    run, epsilon, seed, delta_grid, on_episode, max_total_steps: as
      ccvl_tf.evaluation.rollouts.run_episodes (seed seeds the epsilon RNG, the 'rng' entry of the
      policy state and, through `slot_seeds`, the slots' ALEs).
    on_step: called as on_step(agent steps taken in this call, total agent steps).

  Returns:
    One rollouts.EpisodeRecord per episode, ordered by episode index; raw_score is the sum
    of the raw (unclipped) rewards, return_ the sum of the clipped ones.
  """
  n = int(env.num_envs)
  if int(num_episodes) != num_episodes or num_episodes < n:
    raise ValueError(f"num_episodes must be an integer >= the environment's {n} slots, got "
                     f"{num_episodes!r}")
  if not 0.0 <= epsilon <= 1.0:
    raise ValueError(f"epsilon must be in [0, 1], got {epsilon!r}")
  cap = int(env.max_episode_steps)
  rng = np.random.default_rng(seed)
  action = _action_fn(policy)
  state = _initial_state(policy, n, seed)
  flat = tf.nest.flatten(state)
  has_belief = isinstance(state, Mapping) and "log_belief" in state
  if delta_grid is None and has_belief:
    delta_grid = belief.delta_grid(state["log_belief"].shape[-1])

  # Per slot: its episode index (-1: left the batch), its status, the step type, reward and
  # discount its next policy call sees, whether its environment copy has ended the episode (so
  # that the next step is the autoreset), and the running sums of its episode.
  episode_of = np.arange(n)
  status = np.full(n, _PLAY, np.int8)
  step_type = np.full(n, int(ts.StepType.FIRST), np.int32)
  discount = np.ones(n, np.float32)
  reward = np.zeros(n, np.float32)
  env_ended = np.zeros(n, bool)
  ep_return, ep_raw = np.zeros(n), np.zeros(n)
  ep_len = np.zeros(n, np.int64)
  ep_deltas: List[List[float]] = [[] for _ in range(n)]
  # Per slot, the belief's running record of squared errors at its episode's start.
  summed = [rollouts.sq_errors_of(state, j) for j in range(n)]
  records = {}
  obs = env.reset(slot_seeds(seed, n))
  total = 0
  while len(records) < num_episodes:
    rows = np.flatnonzero(status == _PLAY)
    actions = np.zeros(n, np.int64)
    if rows.size:  # none while every slot waits for its copy's autoreset or end
      t = ts.TimeStep(tf.constant(step_type[rows]), tf.constant(reward[rows]),
                      tf.constant(discount[rows]), tf.constant(obs[rows]))
      sub = tf.nest.map_structure(lambda x: tf.constant(x[rows]), state)
      step = action(t, sub)
      chosen = np.asarray(step.action).reshape(-1).astype(np.int64)
      for whole, part in zip(flat, tf.nest.flatten(_numpy_state(step.state))):
        whole[rows] = part
      deltas = _deltas_of(step)
      if epsilon > 0.0:
        explore = rng.random(rows.size) < epsilon
        chosen = np.where(explore, rng.integers(env.num_actions, size=rows.size), chosen)
        if explore.any() and isinstance(state, Mapping) and "prev_action" in state:
          prev = state["prev_action"]
          prev[rows[explore]] = chosen[explore].astype(prev.dtype)
      for i, j in enumerate(rows):
        if step_type[j] != int(ts.StepType.LAST):
          actions[j] = chosen[i]
          if deltas is not None:
            ep_deltas[j].append(float(deltas[i]))
          continue
        log_b = state["log_belief"][j] if has_belief else None
        map_delta = (float(delta_grid[int(np.argmax(log_b))])
                     if log_b is not None and delta_grid is not None else math.nan)
        now = rollouts.sq_errors_of(state, j)
        sq_sum, sq_count = rollouts.episode_sq_errors(now, summed[j])
        summed[j] = now
        rec = rollouts.EpisodeRecord(
            run=run, episode=int(episode_of[j]), return_=float(ep_return[j]),
            raw_score=float(ep_raw[j]), length=int(ep_len[j]), deltas=ep_deltas[j],
            map_delta=map_delta, log_belief=None if log_b is None else np.array(log_b),
            sq_error_sum=sq_sum, sq_error_count=sq_count)
        records[rec.episode] = rec
        if on_episode is not None:
          on_episode(rec)
        ep_return[j], ep_raw[j], ep_len[j], ep_deltas[j] = 0.0, 0.0, 0, []
        episode_of[j] += n
        if episode_of[j] >= num_episodes:
          status[j], episode_of[j] = _DONE, -1
        else:
          status[j] = _WAIT if env_ended[j] else _DRAIN
    if len(records) >= num_episodes:
      break
    playing = status == _PLAY
    obs, raw, ended, terminated = env.step(actions)
    clipped = np.clip(raw, -1.0, 1.0).astype(np.float32)
    total += int(playing.sum())
    ep_len[playing] += 1
    ep_raw[playing] += raw[playing]
    ep_return[playing] += clipped[playing]
    for j in range(n):
      if status[j] == _DRAIN:  # one frame past our cap: the copy's own cap ends it
        if not ended[j]:
          raise RuntimeError(f"slot {j}: the vector environment did not end the episode one "
                             f"step after the {cap}-step cap")
        status[j] = _WAIT
      elif status[j] == _WAIT:  # this step was the autoreset: a new episode's first state
        status[j], env_ended[j] = _PLAY, False
        step_type[j], reward[j], discount[j] = int(ts.StepType.FIRST), 0.0, 1.0
      elif playing[j]:
        reward[j], env_ended[j] = clipped[j], bool(ended[j])
        if ended[j] or ep_len[j] >= cap:
          step_type[j] = int(ts.StepType.LAST)
          discount[j] = 0.0 if terminated[j] else 1.0
        else:
          step_type[j], discount[j] = int(ts.StepType.MID), 1.0
    if on_step is not None:
      on_step(int(playing.sum()), total)
    if max_total_steps is not None and total >= max_total_steps:
      raise RuntimeError(f"run_batched_episodes: exceeded max_total_steps={max_total_steps}")
  return [records[k] for k in sorted(records)]
