"""The deterministic schedule of online fine-tuning (`--schedule=deterministic`): the same
numbers twice.

More in docs/online.md "Module notes", `ccvl_tf/experiments/online/deterministic.py`.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Dict, List, Optional

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf
from tf_agents.policies import py_tf_eager_policy

from ccvl_tf.experiments.online import actor as online_actor
from ccvl_tf.experiments.online import config as online_config

TRANSITION_KEYS = ("observation", "action", "reward", "next_observation", "terminal")


class SeededReplay:
  """A FIFO of transitions sampled uniformly with replacement, seeded by (seed, step)."""

  def __init__(self, capacity: int, seed: int):
    self.capacity, self.seed = int(capacity), int(seed)
    self._items: List[tuple] = []
    self._next = 0          # slot the next insert overwrites once full (FIFO)
    self.inserts = 0        # transitions inserted (the rate limiter's inserts)
    self.samples = 0        # transitions sampled

  def __len__(self) -> int:
    return len(self._items)

  def add(self, transition: tuple) -> None:
    if len(self._items) < self.capacity:
      self._items.append(transition)
    else:
      self._items[self._next] = transition
      self._next = (self._next + 1) % self.capacity
    self.inserts += 1

  def observer(self) -> Callable:
    """An observer for one actor's trajectories (trajectory.from_transition per env step):
    each trajectory paired with the one before it, as ReverbAddTrajectoryObserver with
    sequence_length=2 and stride 1 writes its items, into the transition the learner's Reverb
    dataset makes of that item (replay.trajectory_to_transition). The pair whose first step
    is LAST (an episode boundary) is no transition and is dropped (replay.is_transition)."""
    previous = [None]

    def observe(traj):
      prev = previous[0]
      if prev is not None and not prev.is_boundary():
        self.add((np.asarray(prev.observation), np.int32(prev.action),
                  np.float32(prev.reward), np.asarray(traj.observation),
                  np.float32(prev.discount == 0.0)))
      previous[0] = None if traj.is_boundary() else traj
    return observe

  def sample(self, batch_size: int, step: int) -> Dict[str, tf.Tensor]:
    """`batch_size` transitions drawn uniformly with replacement by a generator seeded from
    (seed, step), as contract batch tensors."""
    if not self._items:
      raise ValueError("the replay is empty")
    rng = np.random.default_rng((self.seed, int(step)))
    idx = rng.integers(0, len(self._items), int(batch_size))
    self.samples += int(batch_size)
    return {k: tf.constant(np.stack([self._items[i][j] for i in idx]))
            for j, k in enumerate(TRANSITION_KEYS)}


class InProcessActors:
  """The actors of the deterministic schedule, in the learner's process (the module notes).

  It stands where the asynchronous runner has its actor processes and its server link:
  `start`, `alive`, `stop`, `procs` as online_actor.ActorProcesses; `push`, `checkpoint`,
  `check`, `replay_items` as online_server.LearnerServerLink; and `next_batch(step)`, the
  learner's batch at `step` (collecting the env steps due first)."""

  def __init__(self, cfg: online_config.OnlineConfig, pushed: Dict[str, tf.Variable],
               offline_step: int, log: Callable[[str], None] = print):
    self.cfg, self.log, self.offline_step = cfg, log, int(offline_step)
    self.procs: list = []  # no processes (status.json lists none)
    self.replay = SeededReplay(cfg.replay_capacity, cfg.seed)
    self._learner_vars = pushed
    # The weights as last pushed: what the actors pull (the asynchronous 'variables' table).
    self._published = tf.nest.map_structure(
        lambda v: tf.Variable(v.read_value(), trainable=False), pushed)
    tf.random.set_seed(cfg.seed)  # the exploration policy's epsilon-greedy draws
    tss, act = online_config.specs(cfg.game)
    self._actors = []
    for i in range(cfg.num_actors):
      agent = online_config.build_actor_agent(cfg, tss, act)
      variables = online_config.pushed_variables(agent, online_config.control_variables())
      env = online_config.make_env(cfg.game, seed=online_actor.actor_env_seed(cfg.seed, i))
      policy = py_tf_eager_policy.PyTFEagerPolicy(agent.exploration_policy,
                                                  use_tf_function=True)
      self._actors.append({"variables": variables, "env": env, "policy": policy,
                           "observer": self.replay.observer(), "time_step": None,
                           "state": None, "steps": 0})
    self.env_steps = 0
    self.actor_seconds = 0.0

  # ---- as online_actor.ActorProcesses
  def start(self, config_path: Optional[str] = None) -> None:
    del config_path
    for a in self._actors:
      self._pull(a)
      a["time_step"], a["state"] = a["env"].reset(), a["policy"].get_initial_state(1)
    self.log(f"--schedule=deterministic: {len(self._actors)} actor(s) stepped in this process "
             f"in turn; replay sampled with seed {self.cfg.seed}; before the k-th online "
             f"learner step {self.cfg.min_replay_size} + ceil(k x {self.cfg.online_batch_size}"
             f" / {self.cfg.samples_per_insert:g}) transitions are inserted.")

  def alive(self) -> int:
    return len(self._actors)

  def stop(self, grace_s: float = 0.0) -> None:
    del grace_s

  # ---- as online_server.LearnerServerLink
  def push(self, step: int) -> None:
    del step
    tf.nest.map_structure(lambda dst, src: dst.assign(src.read_value()), self._published,
                          self._learner_vars)

  def checkpoint(self, step: int) -> None:
    del step  # nothing to checkpoint: a deterministic run does not resume

  def check(self, step: int, error: Optional[Exception] = None) -> None:
    del step, error  # no server to lose

  def replay_inserts(self, step: int) -> int:
    """Transitions inserted so far: one per env step, as the Reverb table's insert count."""
    del step
    return self.replay.inserts

  def replay_items(self, step: int) -> int:
    del step
    return len(self.replay)

  # ---- the schedule
  def _pull(self, actor) -> None:
    tf.nest.map_structure(lambda dst, src: dst.assign(src.read_value()), actor["variables"],
                          self._published)

  def inserts_due(self, step: int) -> int:
    """Transitions inserted before the learner's step from `step` to `step` + 1."""
    k = step - self.offline_step + 1
    spi = float(self.cfg.samples_per_insert)
    return self.cfg.min_replay_size + int(math.ceil(
        k * self.cfg.online_batch_size / spi - 1e-9))

  def collect_until(self, inserts: int) -> None:
    """Env steps of the actors in turn until `inserts` transitions were inserted."""
    t0 = time.perf_counter()
    period = self.cfg.actor_update_period
    while self.replay.inserts < inserts:
      a = self._actors[self.env_steps % len(self._actors)]
      a["time_step"], a["state"] = online_actor.collect_steps(
          a["env"], a["policy"], a["observer"], a["time_step"], a["state"], 1)
      a["steps"] += 1
      self.env_steps += 1
      if a["steps"] % period == 0:
        self._pull(a)
    self.actor_seconds += time.perf_counter() - t0

  def next_batch(self, step: int) -> Dict[str, tf.Tensor]:
    """The learner's online batch at train step `step` (the env steps due collected first)."""
    self.collect_until(self.inserts_due(step))
    return self.replay.sample(self.cfg.online_batch_size, step)

  def throughput(self, train_seconds: float) -> Dict[str, float]:
    """The runner's throughput keys (runner._throughput) for this schedule."""
    return {"actors/env_steps": float(self.env_steps),
            "actors/actor_seconds": self.actor_seconds,
            "actors/insert_seconds": 0.0,
            "actors/actor_env_steps_per_s": self.env_steps / max(self.actor_seconds, 1e-9),
            "actors/insert_share": 0.0,
            "replay/inserts": float(self.replay.inserts),
            "replay/samples": float(self.replay.samples),
            "env_steps_per_s": self.env_steps / max(train_seconds, 1e-9)}
