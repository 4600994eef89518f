"""Online fine-tuning after offline CCVL (paper Sec. "Online Fine-Tuning on Atari", Table 6).

Processes (docs/online.md has the picture and the multi-machine layout):

  Reverb server   'replay' table (2-step Trajectory items, SampleToInsertRatio rate limiter) and
                  'variables' table (the learner's weights). In the learner process unless
                  `reverb_address` is given (then binaries/reverb_server.py runs it).
  actors (K)      `python -m ccvl_tf.experiments.online actor ...` subprocesses started by the
                  learner. Each runs the exploration policy -- Eq. upper policy
                  (policies.BoundsPolicy: argmax of Q_u over {a : Q_l >= beta max Q_l}) at
                  `explore_delta`, epsilon-greedy -- in its own environment, writes through
                  TF-Agents' ReverbAddTrajectoryObserver, and pulls the weights every
                  `actor_update_period` env steps with TF-Agents' ReverbVariableContainer.
  learner         restores the offline checkpoint (lower bound Q_l from train_offline's
                  root_dir/checkpoints; Q_u from the same checkpoint when it holds one, else
                  Q_u <- Q_l), trains `agents.ccvl_bounds_agent.CCVLBoundsAgent` (built
                  through experiments/agent_registry.py, as 'ccvl_bounds') on batches
                  from the 'replay' table (optionally mixed with offline batches), pushes the
                  weights, checkpoints itself (ccvl_tf.training.restore_or_initialize layout)
                  and the Reverb server (its checkpointer), evaluates, and exports SavedModels.

Budget: `num_env_steps` env steps, i.e. num_env_steps * samples_per_insert / batch_size_online
learner steps (the rate limiter keeps the ratio), counted from the offline step.

Root dir layout: checkpoints/ (learner), reverb_checkpoints/ (in-process server), summaries/,
eval.csv, actors/actor_<i>.log, status.json (pids, address; rewritten at start), summary.json,
policy/ (CCVL confidence-adaptive with Eq. upper policy), policy_fixed/ (Q_l greedy at
policy_delta), policy_bounds/ (the exploration policy without epsilon).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, List, Optional

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np

from ccvl_tf.experiments import agent_registry

GRIDWORLD = "gridworld"
# --agent of the fine-tune -> the registered learner it builds (experiments/agent_registry.py).
REGISTERED = {"ccvl": "ccvl_bounds", "cql": "cql"}
AGENTS = tuple(REGISTERED)
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ServerLost(ConnectionError):
  """The Reverb server stopped answering (the message names its address)."""


class ActorsGone(RuntimeError):
  """Every actor process exited before the learner's budget was reached."""


@dataclasses.dataclass
class OnlineConfig:
  """Settings of one fine-tuning run (the flags of binaries/finetune_online.py).

  Defaults are for Atari at the paper's rate (SPI 8 = batch 32, one update per 4 env steps);
  the gridworld tests shrink everything.
  """
  offline_dir: str = ""
  game: str = GRIDWORLD
  root_dir: str = ""
  num_env_steps: int = 100_000
  reverb_address: Optional[str] = None
  num_actors: int = 1
  batch_size: int = 32
  offline_fraction: float = 0.0   # share of each batch drawn from the offline data
  samples_per_insert: float = 8.0
  min_replay_size: int = 1_000
  replay_capacity: int = 1_000_000
  beta: float = 0.5
  explore_delta: Optional[float] = None  # None: delta ~ belief b(h), per episode (Eq. upper policy)
  explore_epsilon: float = 0.01
  belief_temperature: Optional[float] = None  # None: the offline run's (summary.json), else 1
  policy_delta: float = 0.5
  upper_alpha: Optional[float] = None
  upper_regularizer: str = "softmin"
  learning_rate: Optional[float] = None  # Adam lr of both bounds online (None: the offline one)
  actor_update_period: int = 100  # env steps between weight pulls (actor)
  push_period: int = 10           # learner steps between weight pushes
  checkpoint_interval: int = 1_000
  log_interval: int = 100
  eval_episodes: int = 5          # 0: no evaluation at the end
  export_policies: bool = True
  eval_max_steps: int = 2_000
  eval_epsilon: float = 0.001
  num_grid_deltas: int = 8
  sample_timeout_s: float = 30.0  # rate-limiter wait before checking server and actors
  server_timeout_s: float = 10.0
  reverb_port: int = 0
  agent: str = "ccvl"             # 'ccvl' (both bounds) or 'cql' (baseline, greedy + epsilon)
  seed: int = 0

  def validate(self):
    if self.agent not in AGENTS:
      raise ValueError(f"--agent must be one of {', '.join(AGENTS)}, got {self.agent!r}")
    if not self.offline_dir or not os.path.isdir(self.offline_dir):
      raise ValueError(f"--offline_dir {self.offline_dir!r} is not a directory (pass the "
                       f"--root_dir of train_offline.py)")
    if not self.root_dir:
      raise ValueError("--root_dir is required")
    for name in ("num_env_steps", "batch_size", "min_replay_size", "replay_capacity",
                 "actor_update_period", "push_period", "checkpoint_interval", "log_interval",
                 "eval_max_steps", "num_grid_deltas"):
      v = getattr(self, name)
      if int(v) != v or v < 1:
        raise ValueError(f"--{name} must be an integer >= 1, got {v!r}")
    if int(self.eval_episodes) != self.eval_episodes or self.eval_episodes < 0:
      raise ValueError(f"--eval_episodes must be an integer >= 0, got {self.eval_episodes!r}")
    if int(self.num_actors) != self.num_actors or self.num_actors < 0:
      raise ValueError(f"--num_actors must be an integer >= 0 (0: actors run elsewhere), got "
                       f"{self.num_actors!r}")
    if not 0.0 <= self.offline_fraction < 1.0:
      raise ValueError(f"--offline_fraction must be in [0, 1), got {self.offline_fraction!r}")
    if not self.samples_per_insert > 0:
      raise ValueError(f"--samples_per_insert must be > 0, got {self.samples_per_insert!r}")
    if self.replay_capacity < self.min_replay_size:
      raise ValueError(f"--replay_capacity ({self.replay_capacity}) must be >= "
                       f"--min_replay_size ({self.min_replay_size})")
    if self.reverb_address is not None and ":" not in self.reverb_address:
      raise ValueError(f"--reverb_address must be host:port, got {self.reverb_address!r}")
    if self.learning_rate is not None and not self.learning_rate > 0:
      raise ValueError(f"--learning_rate must be > 0, got {self.learning_rate!r}")
    if not self.sample_timeout_s > 0 or not self.server_timeout_s > 0:
      raise ValueError("--sample_timeout_s and --server_timeout_s must be > 0")
    self.bounds().validate()
    if not 0.0 < self.policy_delta < 1.0:
      raise ValueError(f"--policy_delta must be in (0, 1), got {self.policy_delta!r}")

  @property
  def online_batch_size(self) -> int:
    return self.batch_size - self.offline_batch_size

  @property
  def offline_batch_size(self) -> int:
    return int(round(self.batch_size * self.offline_fraction))

  @property
  def num_learner_steps(self) -> int:
    """Learner steps for `num_env_steps` env steps at `samples_per_insert`."""
    return max(1, int(math.ceil(self.num_env_steps * self.samples_per_insert
                                / self.online_batch_size)))

  def bounds(self):
    from agents import ccvl_bounds_agent
    return ccvl_bounds_agent.BoundsConfig(
        upper_alpha=self.upper_alpha, upper_regularizer=self.upper_regularizer, beta=self.beta,
        explore_delta=self.explore_delta, explore_epsilon=self.explore_epsilon,
        num_grid_deltas=self.num_grid_deltas,
        belief_temperature=1.0 if self.belief_temperature is None else self.belief_temperature,
        reward_clip=None if self.game.lower() == GRIDWORLD else 1.0)


# ---------------------------------------------------------------------------- games and specs
def make_env(game: str, seed: int, max_episode_steps: Optional[int] = None):
  """The game's PyEnvironment (ccvl_tf.envs.factory.make_env: the gridworld at its evaluation
  slip 0.15, a MinAtar or an Atari game)."""
  from ccvl_tf.envs import factory
  return factory.make_env(game, seed, max_episode_steps).env


def agent_settings(game: str, bounds, alpha: Optional[float] = None, seed: int = 0,
                   dataset_size: float = 2500.0, agent: str = "ccvl",
                   **more) -> agent_registry.AgentSettings:
  """The registry settings of the fine-tune's learner: the gridworld's small MLP (one-hot
  states; N = 4, M = 2, squared TD, no DR3, lr 3e-3, target period 10) or the Atari defaults
  (Nature torso), with `bounds` (BoundsConfig). CQL explores with its collect policy, so its
  collect epsilon is bounds.explore_epsilon. `more`: further AgentSettings fields (export:
  policy_delta, num_grid_deltas)."""
  from ccvl_tf import networks
  from ccvl_tf.envs import gridworld
  extra = dict(bounds=bounds, seed=seed, dataset_size=dataset_size, **more)
  if agent == "cql":
    extra["collect_epsilon"] = bounds.explore_epsilon
  if game.lower() == GRIDWORLD:
    extra = dict(dict(num_deltas=4, num_pairs=2, td_loss="squared", dr3_coef=0.0,
                      learning_rate=3e-3, adam_epsilon=1e-7, target_update_period=10,
                      collect_epsilon=0.0), **extra)
    return agent_registry.AgentSettings(
        network_config=networks.QNetworkConfig(torso="mlp", mlp_units=(64,), n_cos=16,
                                               hidden_units=64),
        alpha=0.2 if alpha is None else alpha, gamma=gridworld.GAMMA, **extra)
  return agent_registry.AgentSettings(network_config=networks.QNetworkConfig(torso="nature"),
                                      alpha=0.1 if alpha is None else alpha, reward_clip=1.0,
                                      **extra)


def agent_spec(agent: str) -> agent_registry.AgentSpec:
  """The registered learner of --agent ('ccvl': 'ccvl_bounds', 'cql': 'cql')."""
  return agent_registry.get_agent_spec(REGISTERED[agent], offline=False)


def build_agent(game: str, time_step_spec, action_spec, bounds, alpha=None, seed=0,
                dataset_size: float = 2500.0, agent: str = "ccvl"):
  """The learner of --agent through the registry: CCVLBoundsAgent ('ccvl') or CQLAgent."""
  settings = agent_settings(game, bounds, alpha, seed, dataset_size, agent)
  return agent_spec(agent).build(time_step_spec, action_spec, settings)


def specs(game: str, seed: int = 0):
  """(time_step_spec, action_spec) of the game's environment."""
  from tf_agents.specs import tensor_spec
  from tf_agents.trajectories import time_step as ts
  env = make_env(game, seed)
  obs = tensor_spec.from_spec(env.observation_spec())
  act = tensor_spec.from_spec(env.action_spec())
  return ts.time_step_spec(obs), act


def server_signatures(game: str, bounds=None, agent_name: str = "ccvl"):
  """(replay item signature, variables signature) for the game and agent (both tables)."""
  from tf_agents.specs import tensor_spec
  from ccvl_tf import replay
  tss, act = specs(game)
  cfg = OnlineConfig(game=game)
  agent = build_agent(game, tss, act, bounds or cfg.bounds(), agent=agent_name)
  replay_sig = tensor_spec.add_outer_dim(agent.exploration_policy.trajectory_spec)
  return replay_sig, replay.variable_signature(_pushed_variables(agent, _control_variables()))


def _control_variables():
  import tensorflow as tf
  return {"train_step": tf.Variable(0, dtype=tf.int64, trainable=False),
          "finished": tf.Variable(0, dtype=tf.int64, trainable=False)}


def _pushed_variables(agent, control):
  """The nest in the 'variables' table: both bounds' online weights, step, finished flag."""
  return dict(agent.policy_variables(), **control)


def make_server_tables(cfg: OnlineConfig):
  from ccvl_tf import replay
  replay_sig, var_sig = server_signatures(cfg.game, cfg.bounds(), cfg.agent)
  return replay.make_tables(replay_sig, var_sig, max_size=cfg.replay_capacity,
                            min_size=cfg.min_replay_size,
                            samples_per_insert=cfg.samples_per_insert,
                            batch_size=cfg.online_batch_size)


# ---------------------------------------------------------------------------- offline side
def offline_gridworld_batches(seed: int, batch_size: int, data_seed: int = 0):
  """An infinite iterator of uniformly sampled batches of the paper's gridworld dataset."""
  from ccvl_tf.envs import gridworld
  from ccvl_tf.tabular import dataset as tds
  env = gridworld.GridWorld()
  data = tds.make_gridworld_dataset(seed=data_seed)
  rng = np.random.default_rng(seed)
  while True:
    yield tds.one_hot_batch(env, data, rng.integers(0, len(data), batch_size))


def train_offline_gridworld(root_dir: str, num_steps: int = 1500, seed: int = 0,
                            alpha: float = 0.2, log=print, agent: str = "ccvl") -> Dict:
  """Offline CCVL (lower AND upper bound) on the paper's gridworld dataset (2.5k transitions
  of the p=0.3 world), in train_offline's layout (root_dir/checkpoints, summary.json), as the
  starting point of gridworld fine-tuning (train_offline.py itself is Atari-only)."""
  import keras
  from ccvl_tf import training
  keras.utils.set_random_seed(seed)
  tss, act = specs(GRIDWORLD)
  agent_name = agent
  agent = build_agent(GRIDWORLD, tss, act, OnlineConfig().bounds(), alpha=alpha, seed=seed,
                      agent=agent_name)
  result = training.train(
      agent, lambda start: offline_gridworld_batches(seed + start, 64),
      training.LoopConfig(root_dir=root_dir, num_steps=num_steps,
                          checkpoint_interval=num_steps, log_interval=max(1, num_steps // 3)),
      log=log)
  summary = dict(game=GRIDWORLD, agent="cql" if agent_name == "cql" else "ccvl_bounds",
                 step=result["step"], alpha=alpha,
                 dataset="tabular.dataset.make_gridworld_dataset(seed=0)", seed=seed)
  with open(os.path.join(root_dir, "summary.json"), "w") as f:
    json.dump(summary, f, indent=2)
  return summary


def restore_offline(agent, offline_dir: str, log=print) -> int:
  """Loads the offline checkpoint into `agent` (`agent.restore_offline`); returns its train
  step. CCVLBoundsAgent: a bounds checkpoint restores both bounds; a plain CCVLAgent checkpoint
  (what train_offline.py writes) restores Q_l and starts Q_u as a copy of Q_l.
  """
  import tensorflow as tf
  ckpt_dir = os.path.join(offline_dir, "checkpoints")
  path = tf.train.latest_checkpoint(ckpt_dir)
  if path is None:
    raise ValueError(f"--offline_dir {offline_dir}: no checkpoint in {ckpt_dir} (run "
                     f"train_offline.py with --root_dir={offline_dir} first)")
  try:
    restored = agent.restore_offline(path)
  except (AssertionError, ValueError, tf.errors.OpError) as e:
    raise ValueError(f"the offline checkpoint {path} does not fit this agent/game/network ({e});"
                     f" is --game the game it was trained on?") from e
  step = int(agent.train_step_counter.numpy())
  log(f"Restored the offline checkpoint {path} (train step {step}; {restored}).")
  return step


# ---------------------------------------------------------------------------- actor
def collect_steps(env, policy, observer, time_step, policy_state, num_steps: int):
  """Runs `policy` for `num_steps` env steps, passing each transition to `observer`; returns
  the last (time_step, policy_state).

  PyDriver's loop, except that the policy state is carried across episode boundaries: on an
  unbatched environment PyDriver calls `get_initial_state` at every FIRST step, which would
  reset the exploration policy's belief each episode (ccvl_tf/policies.py,
  ConfidenceAdaptivePolicy)."""
  from tf_agents.trajectories import trajectory  # pylint: disable=g-import-not-at-top
  for _ in range(num_steps):
    action_step = policy.action(time_step, policy_state)
    next_time_step = env.step(action_step.action)
    observer(trajectory.from_transition(time_step, action_step, next_time_step))
    time_step, policy_state = next_time_step, action_step.state
  return time_step, policy_state


def actor_main(config_path: str, actor_id: int, address: str, parent_pid: int) -> int:
  """One actor process (see module docstring). Exit codes: 0 finished (learner said so, or
  the learner is gone), 3 the Reverb server was lost (message names the address).

  parent_pid: the learner's pid when the learner started this actor (the actor exits when
  that process is gone); 0 for an actor started by hand on another machine
  (`python -m ccvl_tf.experiments.online actor ROOT/online_config.json ID HOST:PORT 0`).
  """
  import reverb
  import tensorflow as tf
  from tf_agents.experimental.distributed import reverb_variable_container
  from tf_agents.policies import py_tf_eager_policy
  from tf_agents.replay_buffers import reverb_utils
  from ccvl_tf import replay

  with open(config_path) as f:
    cfg = OnlineConfig(**json.load(f))
  tag = f"actor {actor_id}"

  def fail(msg, code):
    print(f"{tag}: {msg}", file=sys.stderr, flush=True)
    os._exit(code)  # pylint: disable=protected-access  (blocked gRPC calls cannot be joined)

  stop = threading.Event()

  def watchdog():
    # A blocked insert (rate limiter) cannot notice a dead learner or server by itself.
    while not stop.wait(1.0):
      if parent_pid > 0 and os.getppid() != parent_pid:
        fail(f"the learner (pid {parent_pid}) is gone; stopping", 0)
      try:
        replay.check_server(address, cfg.server_timeout_s)
      except ConnectionError as e:
        fail(f"lost the Reverb server at {address}: {e}", 3)

  try:
    replay.check_server(address, cfg.server_timeout_s)
  except ConnectionError as e:
    fail(str(e), 3)
  threading.Thread(target=watchdog, daemon=True).start()
  tss, act = specs(cfg.game)
  agent = build_agent(cfg.game, tss, act, cfg.bounds(), seed=cfg.seed, agent=cfg.agent)
  control = _control_variables()
  variables = _pushed_variables(agent, control)
  container = reverb_variable_container.ReverbVariableContainer(
      address, table_names=[replay.VARIABLE_TABLE])
  container.update(variables)
  env = make_env(cfg.game, seed=cfg.seed + 1000 * (actor_id + 1))
  observer = reverb_utils.ReverbAddTrajectoryObserver(
      reverb.Client(address), replay.REPLAY_TABLE, sequence_length=2, stride_length=1)
  policy = py_tf_eager_policy.PyTFEagerPolicy(agent.exploration_policy, use_tf_function=True)
  time_step, policy_state = env.reset(), policy.get_initial_state(1)
  steps = 0
  print(f"{tag}: collecting into {address} (learner step {int(control['train_step'].numpy())})",
        flush=True)
  try:
    while True:
      time_step, policy_state = collect_steps(env, policy, observer, time_step, policy_state,
                                              cfg.actor_update_period)
      steps += cfg.actor_update_period
      container.update(variables)
      if int(control["finished"].numpy()):
        print(f"{tag}: learner finished; {steps} env steps collected", flush=True)
        break
  except (tf.errors.OpError, RuntimeError, ValueError) as e:
    try:
      replay.check_server(address, cfg.server_timeout_s)
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


# ---------------------------------------------------------------------------- learner
class _Actors:
  """The actor subprocesses: start, watch, stop (every process in a finally)."""

  def __init__(self, cfg: OnlineConfig, address: str, log):
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


def _write_status(cfg, **status):
  path = os.path.join(cfg.root_dir, "status.json")
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(status, f, indent=2)
  os.replace(tmp, path)


def _evaluate(cfg: OnlineConfig, agent, step: int) -> Dict[str, float]:
  """Mean return of the safe policy (Q_l greedy at policy_delta) and of the bounds policy."""
  from ccvl_tf import evaluation, policies
  from ccvl_tf.envs import factory
  out = {}
  tss, act = agent.time_step_spec, agent.action_spec
  named = {"lower": policies.FixedDeltaPolicy(tss, act, agent.q_network, cfg.policy_delta)}
  if agent.bounds_policy is not None:  # CQL: none, 'lower' is its greedy policy
    named["bounds"] = agent.bounds_policy
  for name, policy in named.items():
    ev = factory.make_env(cfg.game, cfg.seed + 10_000 + step, cfg.eval_max_steps)
    records = evaluation.run_episodes(
        evaluation.CompiledPolicy(policy), ev.env, cfg.eval_episodes,
        epsilon=cfg.eval_epsilon, seed=cfg.seed + step, raw_score_fn=ev.raw_score_fn,
        max_total_steps=cfg.eval_episodes * (cfg.eval_max_steps + 2))
    scores = np.array([r.raw_score for r in records])
    out[f"{name}_mean_score"] = float(scores.mean())
    if ev.normalize is not None:
      out[f"{name}_normalized_score"] = float(np.mean(ev.normalize(scores)))
  return out


def run(cfg: OnlineConfig, log: Callable[[str], None] = print, strategy=None) -> Dict:
  """The learner (and, unless cfg.reverb_address, the Reverb server); see module docstring.

  Args:
    cfg: OnlineConfig.
    log: progress lines.
    strategy: a tf.distribute.Strategy (default: tf.distribute.get_strategy(), i.e. the
      default strategy; pass MirroredStrategy() on a multi-GPU machine). The agent's variables
      are created under its scope; steps as in `make_learner_step`.

  Raises:
    ServerLost: the Reverb server stopped answering (message names the address).
    ActorsGone (a RuntimeError): every local actor exited before the budget was reached.
    ValueError: bad flags or an offline checkpoint that does not fit.
  """
  import tensorflow as tf
  from tf_agents.experimental.distributed import reverb_variable_container
  from ccvl_tf import policies, replay, training

  cfg.validate()
  os.makedirs(cfg.root_dir, exist_ok=True)
  strategy = strategy or tf.distribute.get_strategy()
  offline_summary = {}
  summary_path = os.path.join(cfg.offline_dir, "summary.json")
  if os.path.exists(summary_path):
    with open(summary_path) as f:
      offline_summary = json.load(f)
    game = str(offline_summary.get("game", cfg.game))
    offline_agent = "cql" if str(offline_summary.get("agent", "ccvl")).lower() == "cql" else "ccvl"
    if offline_agent != cfg.agent:
      raise ValueError(f"--offline_dir {cfg.offline_dir} holds a {offline_agent} run, not "
                       f"--agent={cfg.agent}")
    if game.lower() != cfg.game.lower():
      raise ValueError(f"--offline_dir {cfg.offline_dir} was trained on {game!r}, not "
                       f"--game={cfg.game!r}")
  if cfg.belief_temperature is None and offline_summary.get("belief_temperature"):
    # The exploration belief updates at the offline run's temperature (set from its data);
    # resolved before online_config.json is written, so actors use the same one.
    cfg = dataclasses.replace(cfg, belief_temperature=float(
        offline_summary["belief_temperature"]))
    log(f"Exploration belief temperature {cfg.belief_temperature:.4g} (the offline run's).")
  tss, act = specs(cfg.game, cfg.seed)
  with strategy.scope():
    # alpha of the offline run: top level (gridworld) or in train_offline's 'config'.
    alpha = offline_summary.get("alpha", offline_summary.get("config", {}).get("alpha"))
    settings = agent_settings(cfg.game, cfg.bounds(), alpha, cfg.seed, agent=cfg.agent,
                              policy_delta=cfg.policy_delta, num_grid_deltas=cfg.num_grid_deltas)
    agent = agent_spec(cfg.agent).build(tss, act, settings)
    control = _control_variables()
    offline_step = tf.Variable(-1, dtype=tf.int64, trainable=False, name="offline_step")
  learner_step = make_learner_step(strategy, agent)
  ckpt = agent.make_checkpoint(offline_step=offline_step)
  manager = tf.train.CheckpointManager(ckpt, os.path.join(cfg.root_dir, "checkpoints"),
                                       max_to_keep=3)
  if manager.latest_checkpoint:
    try:
      ckpt.restore(manager.latest_checkpoint).assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as e:
      raise ValueError(f"checkpoint {manager.latest_checkpoint} does not match this run ({e});"
                       f" use a fresh --root_dir") from e
    log(f"Resumed from {manager.latest_checkpoint} "
        f"(train step {int(agent.train_step_counter.numpy())}).")
  else:
    offline_step.assign(restore_offline(agent, cfg.offline_dir, log))
  if cfg.learning_rate is not None:
    agent.set_learning_rate(cfg.learning_rate)
  start_step = int(agent.train_step_counter.numpy())
  final_step = int(offline_step.numpy()) + cfg.num_learner_steps
  control["train_step"].assign(start_step)

  server = None
  address = cfg.reverb_address
  reverb_ckpt_dir = os.path.join(cfg.root_dir, "reverb_checkpoints")
  if address is None:
    server, address = replay.start_server(make_server_tables(cfg), cfg.reverb_port,
                                          reverb_ckpt_dir)
    log(f"Reverb server in this process at {address} (checkpoints in {reverb_ckpt_dir}).")
  info = replay.check_server(address, cfg.server_timeout_s)
  log(f"Reverb replay table at {address}: {info[replay.REPLAY_TABLE].current_size} items; "
      f"samples per insert {cfg.samples_per_insert}, min size {cfg.min_replay_size}.")
  import reverb
  client = reverb.Client(address)
  variables = _pushed_variables(agent, control)
  container = reverb_variable_container.ReverbVariableContainer(
      address, table_names=[replay.VARIABLE_TABLE])
  container.push(variables)

  config_path = os.path.join(cfg.root_dir, "online_config.json")
  with open(config_path, "w") as f:
    json.dump(dataclasses.asdict(cfg), f, indent=2)
  actors = _Actors(cfg, address, log)
  train_writer = tf.summary.create_file_writer(os.path.join(cfg.root_dir, "summaries", "train"))
  result: Dict = {}
  try:
    actors.start(config_path)
    _write_status(cfg, learner_pid=os.getpid(), address=address,
                  actor_pids=[p.pid for p in actors.procs], start_step=start_step,
                  final_step=final_step)
    online = replay.replay_dataset(agent.exploration_policy.trajectory_spec, address,
                                   cfg.online_batch_size,
                                   rate_limiter_timeout_ms=int(cfg.sample_timeout_s * 1000))
    offline_it = None
    if cfg.offline_batch_size:
      if cfg.game.lower() != GRIDWORLD:
        raise ValueError("--offline_fraction > 0 is implemented for --game=gridworld only")
      offline_it = offline_gridworld_batches(cfg.seed + start_step, cfg.offline_batch_size)

    def save(step):
      manager.save(checkpoint_number=step)
      if server is not None or cfg.reverb_address:
        client.checkpoint()  # the server's own checkpointer (its machine, its directory)

    it = iter(online)
    step = start_step
    t0, last_t, last_step = time.time(), time.time(), step
    log(f"Fine-tuning from learner step {start_step} to {final_step} "
        f"({cfg.num_env_steps} env steps x SPI {cfg.samples_per_insert} / batch "
        f"{cfg.online_batch_size}).")
    metrics = {}
    try:
      while step < final_step:
        try:
          batch = next(it)
        except (StopIteration, tf.errors.OutOfRangeError, tf.errors.UnavailableError,
                tf.errors.DeadlineExceededError, tf.errors.CancelledError) as e:
          try:
            replay.check_server(address, cfg.server_timeout_s)
          except ConnectionError as ce:
            raise ServerLost(f"learner: lost the Reverb server at {address} at train step "
                             f"{step}: {ce}") from ce
          if cfg.num_actors and actors.alive() == 0:
            raise ActorsGone(f"learner: all {cfg.num_actors} actor(s) exited at train step "
                               f"{step}, before the budget ({final_step}); see "
                               f"{cfg.root_dir}/actors/") from None
          log(f"no sample for {cfg.sample_timeout_s:.0f}s at step {step} "
              f"({type(e).__name__}); server and {actors.alive()} actor(s) alive, waiting")
          it = iter(online)
          continue
        if offline_it is not None:
          off = next(offline_it)
          batch = {k: tf.concat([batch[k], tf.cast(off[k], batch[k].dtype)], 0) for k in batch}
        metrics = learner_step(batch)
        step = int(agent.train_step_counter.numpy())
        if step % cfg.push_period == 0 or step == final_step:
          control["train_step"].assign(step)
          container.push(variables)
        if step % cfg.log_interval == 0 or step == final_step:
          now = time.time()
          rate = (step - last_step) / max(now - last_t, 1e-9)
          shown = {k: float(v) for k, v in metrics.items() if k in (
              "loss", "upper/loss", "q_data", "upper/q_data")}
          with train_writer.as_default():
            for k, v in shown.items():
              tf.summary.scalar(k, v, step=step)
          log(f"step {step}/{final_step}  {rate:.1f} steps/s  "
              + "  ".join(f"{k}={v:.4g}" for k, v in shown.items())
              + f"  actors alive {actors.alive()}/{cfg.num_actors}")
          last_t, last_step = now, step
        if step % cfg.checkpoint_interval == 0 or step == final_step:
          save(step)
    except (ServerLost, ActorsGone, FloatingPointError, KeyboardInterrupt):
      raise
    except Exception as e:  # pylint: disable=broad-except
      # A push, a checkpoint or a sample failed: name the server if it is the cause.
      try:
        replay.check_server(address, cfg.server_timeout_s)
      except ConnectionError as ce:
        raise ServerLost(f"learner: lost the Reverb server at {address} at train step "
                         f"{step} ({type(e).__name__}: {e}); {ce}") from e
      raise
    control["finished"].assign(1)
    control["train_step"].assign(step)
    container.push(variables)
    # Actors see `finished` at their next pull, but one blocked on an insert (the rate limiter
    # waits for samples that will not come) never pulls: a short grace, then SIGTERM.
    actors.stop(grace_s=3.0)
    log(f"Trained to step {step} in {time.time() - t0:.1f}s.")
    last_eval = {}
    if cfg.eval_episodes:
      last_eval = _evaluate(cfg, agent, step)
      log("[eval] " + ", ".join(f"{k}={v:.4g}" for k, v in sorted(last_eval.items())))
      training._append_eval_csv(os.path.join(cfg.root_dir, "eval.csv"), step, last_eval)  # pylint: disable=protected-access
    exports, _ = agent_spec(cfg.agent).policies(agent, tss, act, None, settings)
    dirs = {name: os.path.join(cfg.root_dir, name) for name in exports}
    if cfg.export_policies:
      for name, pol in exports.items():
        policies.export_policy(pol, dirs[name], train_step=agent.train_step_counter)
      log(f"Exported SavedModels: {', '.join(dirs.values())}.")
    result = dict(game=cfg.game, step=step, start_step=start_step,
                  offline_step=int(offline_step.numpy()), final_step=final_step,
                  address=address, last_eval=last_eval, checkpoint=manager.latest_checkpoint,
                  replay_items=int(client.server_info()[replay.REPLAY_TABLE].current_size),
                  config=dataclasses.asdict(cfg), policy_dirs=dirs)
    with open(os.path.join(cfg.root_dir, "summary.json"), "w") as f:
      json.dump(result, f, indent=2, default=float)
    return result
  finally:
    actors.stop(grace_s=5.0)
    if server is not None:
      server.stop()


def make_learner_step(strategy, agent) -> Callable[[Dict], Dict]:
  """batch -> metrics: one step of both bounds (Q_u metrics prefixed 'upper/').

  Default strategy: the agents' own guarded step (`CCVLBoundsAgent.train_on_batch`).
  Otherwise (e.g. MirroredStrategy; the agent must have been built under its scope)
  `ccvl_tf.distributed.make_train_step` per bound: the batch is split across replicas, the
  gradients averaged, the NaN guard and Adam run in cross-replica context.
  """
  import tensorflow as tf
  if strategy is tf.distribute.get_strategy():
    return agent.train_on_batch
  from ccvl_tf import distributed
  steps = {prefix: distributed.make_train_step(strategy, learner)  # ValueError for CQL
           for prefix, learner in agent.guarded_learners().items()}

  def step(batch):
    metrics = {}
    for prefix, learner_step in steps.items():
      metrics.update({prefix + k: v for k, v in learner_step(batch).items()})
    return metrics
  return step


# ---------------------------------------------------------------------------- entry point
def _main(argv):
  if len(argv) >= 2 and argv[1] == "actor":
    config_path, actor_id, address, parent = argv[2], int(argv[3]), argv[4], int(argv[5])
    from absl import logging
    logging.set_verbosity(logging.ERROR)
    return actor_main(config_path, actor_id, address, parent)
  print("usage: python -m ccvl_tf.experiments.online actor CONFIG_JSON ID ADDRESS PARENT_PID "
        "(started by binaries/finetune_online.py)", file=sys.stderr)
  return 2


if __name__ == "__main__":
  sys.exit(_main(sys.argv))
