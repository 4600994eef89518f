"""Online fine-tuning's actors: the actor process (`actor_main`) and, in the learner, the
actor subprocesses it starts, watches and stops (`ActorProcesses`).

An actor runs the exploration policy in its own environment, writes 2-step trajectories into
the Reverb 'replay' table and pulls the learner's weights every `actor_update_period` env steps
(runner.py has the picture).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import List

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import tensorflow as tf
from tf_agents.experimental.distributed import reverb_variable_container
from tf_agents.policies import py_tf_eager_policy
from tf_agents.replay_buffers import reverb_utils
from tf_agents.trajectories import trajectory

from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.data import reverb_replay
from ccvl_tf.runtime import strict_json

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))  # ccvl_tf/experiments/online/<this file>


def collect_steps(env, policy, observer, time_step, policy_state, num_steps: int):
  """Runs `policy` for `num_steps` env steps, passing each transition to `observer`; returns
  the last (time_step, policy_state).

  PyDriver's loop, except that the policy state is carried across episode boundaries: on an
  unbatched environment PyDriver calls `get_initial_state` at every FIRST step, which would
  reset the exploration policy's belief each episode (ccvl_tf/algorithm/policies.py,
  ConfidenceAdaptivePolicy)."""
  for _ in range(num_steps):
    action_step = policy.action(time_step, policy_state)
    next_time_step = env.step(action_step.action)
    observer(trajectory.from_transition(time_step, action_step, next_time_step))
    time_step, policy_state = next_time_step, action_step.state
  return time_step, policy_state


class TimedObserver:
  """An observer that adds up the seconds spent in it: writing to Reverb, including the
  waits of the replay table's rate limiter (an insert blocks while the learner is behind)."""

  def __init__(self, observer):
    self._observer = observer
    self.seconds = 0.0

  def __call__(self, traj):
    t0 = time.perf_counter()
    self._observer(traj)
    self.seconds += time.perf_counter() - t0


def stats_path(root_dir: str, actor_id: int) -> str:
  return os.path.join(root_dir, "actors", f"actor_{actor_id}_stats.json")


def write_stats(path: str, env_steps: int, seconds: float, insert_seconds: float) -> None:
  """The actor's counters (atomic rewrite after every weight pull): env steps, wall seconds
  since its first step, seconds inside the observer (insert + rate-limiter waits)."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path + ".tmp", "w") as f:
    strict_json.dump({"env_steps": env_steps, "seconds": seconds, "insert_seconds": insert_seconds}, f)
  os.replace(path + ".tmp", path)


def read_stats(root_dir: str, num_actors: int) -> dict:
  """Sum of the local actors' counters (write_stats): env_steps, insert_seconds and
  actor_seconds (summed over actors), and env steps/s over all of them."""
  total = {"env_steps": 0.0, "actor_seconds": 0.0, "insert_seconds": 0.0}
  rates = []
  for i in range(num_actors):
    path = stats_path(root_dir, i)
    if not os.path.exists(path):
      continue
    with open(path) as f:
      st = json.load(f)
    total["env_steps"] += st["env_steps"]
    total["actor_seconds"] += st["seconds"]
    total["insert_seconds"] += st["insert_seconds"]
    rates.append(st["env_steps"] / max(st["seconds"], 1e-9))
  total["actor_env_steps_per_s"] = float(sum(rates))
  total["insert_share"] = total["insert_seconds"] / max(total["actor_seconds"], 1e-9)
  return total


def actor_env_seed(seed: int, actor_id: int) -> int:
  """The environment seed of actor `actor_id` (its process, or its in-process stand-in of the
  deterministic schedule)."""
  return seed + 1000 * (actor_id + 1)


def actor_main(config_path: str, actor_id: int, address: str, parent_pid: int) -> int:
  """One actor process (see module docstring). Exit codes: 0 finished (learner said so, or
  the learner is gone), 2 the configuration is not an asynchronous run's, 3 the Reverb server
  was lost (message names the address).

  parent_pid: the learner's pid when the learner started this actor (the actor exits when
  that process is gone); 0 for an actor started by hand on another machine
  (`python -m ccvl_tf.experiments.online actor ROOT/online_config.json ID HOST:PORT 0`).
  """
  # Here: reverb (~20-40 ms after TensorFlow, its native libraries) loads only in
  # processes that use a server.
  import reverb  # pylint: disable=g-import-not-at-top

  tag = f"actor {actor_id}"

  def fail(msg, code):
    print(f"{tag}: {msg}", file=sys.stderr, flush=True)
    os._exit(code)  # pylint: disable=protected-access  (blocked gRPC calls cannot be joined)

  try:
    cfg = online_config.OnlineConfig.read_record(config_path)
  except ValueError as e:
    fail(str(e), 2)

  if cfg.schedule != online_config.ASYNC:
    fail(f"{config_path} is a --schedule={cfg.schedule} run, whose actors run in the "
         f"learner's process; actor processes serve --schedule={online_config.ASYNC} runs", 2)

  stop = threading.Event()

  def watchdog():
    # A blocked insert (rate limiter) cannot notice a dead learner or server by itself.
    while not stop.wait(1.0):
      if parent_pid > 0 and os.getppid() != parent_pid:
        fail(f"the learner (pid {parent_pid}) is gone; stopping", 0)
      try:
        reverb_replay.check_server(address, cfg.server_timeout_s)
      except ConnectionError as e:
        fail(f"lost the Reverb server at {address}: {e}", 3)

  try:
    reverb_replay.check_server(address, cfg.server_timeout_s)
  except ConnectionError as e:
    fail(str(e), 3)
  threading.Thread(target=watchdog, daemon=True).start()
  tss, act = online_config.specs(cfg.game)
  agent = online_config.build_actor_agent(cfg, tss, act)
  control = online_config.control_variables()
  variables = online_config.pushed_variables(agent, control)
  container = reverb_variable_container.ReverbVariableContainer(
      address, table_names=[reverb_replay.VARIABLE_TABLE])
  container.update(variables)
  env = online_config.make_env(cfg.game, seed=actor_env_seed(cfg.seed, actor_id))
  observer = reverb_utils.ReverbAddTrajectoryObserver(
      reverb.Client(address), reverb_replay.REPLAY_TABLE, sequence_length=2, stride_length=1)
  timed = TimedObserver(observer)
  stats = stats_path(cfg.root_dir, actor_id)
  policy = py_tf_eager_policy.PyTFEagerPolicy(agent.exploration_policy, use_tf_function=True)
  time_step, policy_state = env.reset(), policy.get_initial_state(1)
  steps = 0
  print(f"{tag}: collecting into {address} (learner step {int(control['train_step'].numpy())})",
        flush=True)
  t_start = time.perf_counter()
  try:
    while True:
      time_step, policy_state = collect_steps(env, policy, timed, time_step, policy_state,
                                              cfg.actor_update_period)
      steps += cfg.actor_update_period
      container.update(variables)
      if parent_pid > 0:  # started by the learner (a remote actor may have no root_dir)
        write_stats(stats, steps, time.perf_counter() - t_start, timed.seconds)
      if int(control["finished"].numpy()):
        print(f"{tag}: learner finished; {steps} env steps collected", flush=True)
        break
  except (tf.errors.OpError, RuntimeError, ValueError) as e:
    try:
      reverb_replay.check_server(address, cfg.server_timeout_s)
    except ConnectionError as ce:
      fail(f"lost the Reverb server at {address}: {ce}", 3)
    raise
  finally:
    stop.set()
  try:
    observer.close()
  except Exception:  # pylint: disable=broad-except
    pass
  return 0


class ActorProcesses:
  """The actor subprocesses: start, watch, stop (every process in a finally)."""

  def __init__(self, cfg: online_config.OnlineConfig, address: str, log):
    self.cfg, self.address, self.log = cfg, address, log
    self.procs: List[subprocess.Popen] = []
    self.reported = set()
    self._files = []

  def start(self, config_path: str):
    os.makedirs(os.path.join(self.cfg.root_dir, "actors"), exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = _REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    for i in range(self.cfg.num_actors):
      out = open(os.path.join(self.cfg.root_dir, "actors", f"actor_{i}.log"), "a")
      self._files.append(out)
      self.procs.append(subprocess.Popen(
          [sys.executable, "-m", "ccvl_tf.experiments.online", "actor", config_path, str(i),
           self.address, str(os.getpid())], stdout=out, stderr=subprocess.STDOUT, env=env,
          cwd=_REPO_ROOT))
    if not self.procs:
      self.log("--num_actors=0: no local actors; waiting for remote actors to insert.")
      return
    self.log(f"Started {len(self.procs)} actor process(es): pids "
             f"{[p.pid for p in self.procs]} (logs in {self.cfg.root_dir}/actors/).")

  def alive(self) -> int:
    n = 0
    for i, p in enumerate(self.procs):
      code = p.poll()
      if code is None:
        n += 1
      elif i not in self.reported:
        self.reported.add(i)
        self.log(f"actor {i} (pid {p.pid}) exited with code {code}; "
                 f"{sum(q.poll() is None for q in self.procs)} actor(s) left "
                 f"(see {self.cfg.root_dir}/actors/actor_{i}.log)")
    return n

  def stop(self, grace_s: float = 10.0):
    deadline = time.time() + grace_s
    for p in self.procs:
      try:
        p.wait(timeout=max(0.1, deadline - time.time()))
      except subprocess.TimeoutExpired:
        p.terminate()
    for p in self.procs:
      try:
        p.wait(timeout=5)
      except subprocess.TimeoutExpired:
        p.kill()
        p.wait(timeout=5)
    for f in self._files:
      f.close()

