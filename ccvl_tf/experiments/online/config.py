"""Online fine-tuning's settings (`OnlineConfig`) and what is built from them, shared by the
learner (runner.py), the actors (actor.py) and
binaries/reverb_server.py: the game's environment and specs, the registry settings and learner
of --agent, the variables pushed to the actors and the Reverb tables.
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Dict, Mapping, Optional

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.agents import ccvl_bounds_agent
from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime import paths
from ccvl_tf.runtime.config_flags import setting
from ccvl_tf.algorithm import counts as counts_lib
from ccvl_tf.envs import factory
from ccvl_tf.envs import gymnasium_env
from ccvl_tf.tabular import gridworld
from ccvl_tf.experiments import agent_registry
from ccvl_tf.experiments.compare import suites as compare_suites
from ccvl_tf.experiments.online import own_data as own_data_lib
from ccvl_tf.algorithm import networks
from ccvl_tf.algorithm import readings
from ccvl_tf.data import reverb_replay
from ccvl_tf.runtime import run_settings
from ccvl_tf.tabular import dataset as tds
from ccvl_tf.runtime import training

GRIDWORLD = "gridworld"
GRIDWORLD_VALUE_MAX = 1.0  # every gridworld return is 0 or gamma^t (gridworld/bounds.py)
# The gridworld's bounds: both trained in the bonus form, Eq. (update) for Q_l and
# Eq. (upper update) for Q_u, with the exact state counts n(s) (GrowingExactCounts: the offline
# dataset's, plus the online data's during fine-tuning) -- the form Theorem 1 proves pointwise
# bounds for. Algorithm 1's regularized form overshoots Q* here (docs/online.md).
GRIDWORLD_LOWER_OBJECTIVE = "bonus"
# How actors and the learner take turns (--schedule of finetune_online.py and
# finetune_minatar.py; `schedule_setting` declares the flag for both).
ASYNC = "async"
DETERMINISTIC = "deterministic"
SCHEDULES = (ASYNC, DETERMINISTIC)


def schedule_setting(default: str):
  """The --schedule field of OnlineConfig and of the fine-tuning suite's config (one
  declaration: help and choices; each config its default)."""
  return setting(
      default, "How actors and learner take turns: 'async' (actor processes and the learner "
      "run concurrently through the Reverb server, whose rate limiter holds "
      "--samples_per_insert: the fastest, but the numbers differ between runs) or "
      "'deterministic' (the actors take env steps in turn in the learner's process, the "
      "replay is sampled by a seeded generator, the same numbers every run on one machine; "
      "no Reverb server, no resume; experiments/online/deterministic.py).",
      enum_values=SCHEDULES)


# The settings of the upper bound and the exploration policy, declared in
# ccvl_tf.agents.ccvl_bounds_agent.ExplorationConfig: embedded in OnlineConfig (`exploration_values`),
# flags of finetune_online.py through that declaration.
EXPLORATION_FIELDS = tuple(f.name for f in dataclasses.fields(ccvl_bounds_agent.ExplorationConfig))
# finetune_online.py's defaults of those flags where they are not ExplorationConfig's: the
# belief temperature T unset (None) is the offline run's (summary.json), else
# ExplorationConfig's 1.
EXPLORATION_FLAG_DEFAULTS = {"belief_temperature": None}

# --agent of the fine-tune -> the registered learner it builds (experiments/agent_registry.py).
REGISTERED = {"ccvl": "ccvl_bounds", "ccvl_lower": "ccvl_lower", "cql": "cql"}
AGENTS = tuple(REGISTERED)
# --agent of the fine-tune -> the offline agent whose checkpoint it starts from.
OFFLINE_AGENT = {"ccvl": "ccvl", "ccvl_lower": "ccvl", "cql": "cql"}
# The evaluation episodes' agent-step cap where --eval_max_steps is not given, on the
# gridworld, MinAtar and Atari (run_settings' declared default); a Gymnasium environment's is
# its own registered TimeLimit (OnlineConfig.eval_steps).
DEFAULT_EVAL_MAX_STEPS = run_settings.RunSettings.eval_max_steps


@config_flags.compared_settings(not_compared={
    "checkpoint_dir": "where the server keeps its checkpoints (the table's settings are "
                      "OnlineConfig's, compared by the learner's check of the server)"})
@dataclasses.dataclass(frozen=True)
class ServerConfig:
  """binaries/reverb_server.py's own path setting beside OnlineConfig's table flags: declared
  as an output, so `config_flags.from_flags` refuses a remote or unwritable one as it does
  every binary's."""
  checkpoint_dir: Optional[str] = setting(
      None, "Reverb checkpoint directory (local): the server restores its latest complete "
      "checkpoint at start, and the learner's checkpoints are written there.", output="dir")


# Each field compared when a run resumes its checkpoints or a finished run is rerun into its
# --root_dir (`fingerprint`: refused naming each change, or with --allow_config_change
# recorded at the train step it took effect), or not, and why.
@config_flags.compared_settings(
    compared=("offline_dir", "game", "num_actors", "batch_size", "offline_fraction",
              "samples_per_insert", "min_replay_size", "replay_capacity", "exploration_values",
              "policy_delta", "alpha", "learning_rate", "actor_update_period", "push_period",
              "eval_episodes", "eval_max_steps", "eval_epsilon", "online_counts", "agent",
              "seed", "schedule"),
    not_compared={
        "root_dir": "where the run writes",
        "num_env_steps": "the budget: a larger one continues the run where it stopped",
        "reverb_address": "where the replay server runs (its table is checked against the "
                          "compared settings at every start)",
        "offline_settings": "read from the offline run's summary.json (--offline_dir is "
                            "compared); a change there is noted at the resume "
                            "(start.changed_settings_note)",
        "own_data": "read from the offline run's summary.json (--offline_dir is compared): a "
                    "run on own data's network and reward handling, which its checkpoint must "
                    "fit anyway",
        "checkpoint_interval": "how often the checkpoints are written",
        "log_interval": "how often progress is printed",
        "eval_interval": "which steps are evaluated; each evaluation measures the same way",
        "export_policies": "whether the SavedModels are written at the end",
        "sample_timeout_s": "how long to wait before checking the server and actors",
        "server_timeout_s": "how long an unanswering server is waited for",
        "reverb_checkpoint_timeout_s": "how long a Reverb checkpoint is waited for",
        "reverb_port": "where the in-process server listens",
        "penalty_diagnostic": "adds diagnostics to the evaluations; trains and scores the same",
        "offline_states": "the states of the penalty diagnostic only",
        "allow_config_change": "the flag that allows a change"})
@dataclasses.dataclass(frozen=True)
class OnlineConfig:
  """Settings of one fine-tuning run; its `setting` fields and ExplorationConfig's are the
  flags of binaries/finetune_online.py (ccvl_tf/runtime/config_flags.py).

  The upper bound's and the exploration policy's settings (alpha_u, Q_u's objective and
  regularizer, beta of the safe set A_l, the fixed delta, epsilon, the belief's K and T) are
  ccvl_tf.agents.ccvl_bounds_agent.ExplorationConfig's, embedded as the values set
  (`exploration_values`; in force: `exploration`; `bounds()` makes the BoundsConfig). The
  belief temperature T unset is the offline run's (summary.json), else ExplorationConfig's 1.
  On disk (online_config.json, summary.json's 'config') the config is one flat record, the
  exploration settings beside the run's (`record`, `from_record`).
  Defaults are for Atari at the paper's rate (SPI 8 = batch 32, one update per 4 env steps);
  the gridworld tests shrink everything.
  """
  offline_dir: str = run_settings.borrow("offline_dir")
  game: str = setting(GRIDWORLD, "'gridworld', a MinAtar game ('minatar/Breakout'), an "
                      "Atari game (ALE name) or, for a run of ccvl_tf.fit on own data "
                      "(train_offline.py --dataset), a Gymnasium environment "
                      "('gymnasium:CartPole-v1') of the data's observations and actions.")
  root_dir: str = setting("", "Run directory (checkpoints, logs, policies).", flag_default=None,
                          output="dir")
  num_env_steps: int = run_settings.borrow("num_env_steps")
  reverb_address: Optional[str] = setting(
      None, "host:port of a running Reverb server (binaries/reverb_server.py)"
      "; default: start one in this process.")
  num_actors: int = setting(1, "Actor processes to start.", lower_bound=0, upper_bound=1024,
                            parse_bounds=False)
  batch_size: int = run_settings.borrow("batch_size")
  offline_fraction: float = setting(  # share of each batch drawn from the offline data
      0.0, "Share F of each batch drawn from the offline data: round(F x --batch_size) "
      "transitions of the dataset the offline run trained on (its summary.json 'dataset_dir' "
      "and 'subset', checked against its checkpoints' record; gridworld: the paper's "
      "dataset), the rest from the online replay.", lower_bound=0.0, upper_bound=1.0,
      below=1.0)
  samples_per_insert: float = run_settings.borrow("samples_per_insert")
  min_replay_size: int = run_settings.borrow("min_replay_size")
  replay_capacity: int = setting(1_000_000, "Replay table size.", lower_bound=1)
  # ExplorationConfig's settings that are set (field -> value; one left out, or None, is
  # unset): the others are ExplorationConfig's defaults, T unset the offline run's. Left out
  # of the hash (a dict has none), so that the config stays hashable.
  exploration_values: Dict[str, object] = dataclasses.field(default_factory=dict, hash=False)
  # The offline learner's settings that make its network and loss (start.OFFLINE_SETTINGS: the
  # reading and its options, delta_head, the TD loss, the count estimate), as its summary.json
  # records them: resolved once by start.resolve_config, so that the learner, the actors
  # (online_config.json) and the server's tables build the same network. Empty: the game's and
  # the agent config's defaults. Not a flag; left out of the hash like exploration_values.
  offline_settings: Dict[str, object] = dataclasses.field(default_factory=dict, hash=False)
  # A run of ccvl_tf.fit on own data (experiments/online/own_data.py): its network ('network',
  # QNetworkConfig's fields) and reward handling ('reward_clip'), as its summary.json records
  # them, resolved once by start.resolve_config like offline_settings, so that the learner, the
  # actors and the server's tables build the run's network. Empty: a gridworld, MinAtar or
  # Atari run (the game's network). Not a flag; left out of the hash.
  own_data: Dict[str, object] = dataclasses.field(default_factory=dict, hash=False)
  policy_delta: float = setting(0.5, "delta of the exported Fixed-CCVL policy (Q_l greedy).",
                                above=0.0, below=1.0)
  # The online learner's alpha and step size (both bounds); None: the offline run's.
  alpha: Optional[float] = config_flags.borrow(ccvl_agent.CCVLConfig, "alpha",
                                               "the offline run's")
  learning_rate: Optional[float] = config_flags.borrow(ccvl_agent.CCVLConfig, "learning_rate",
                                                       "the offline run's")
  actor_update_period: int = setting(100, "Env steps between an actor's weight pulls.",
                                     lower_bound=1, parse_bounds=False)
  push_period: int = setting(10, "Learner steps between weight pushes.", lower_bound=1,
                             parse_bounds=False)
  # Learner (and Reverb) checkpoints, every N learner steps.
  checkpoint_interval: int = run_settings.borrow("checkpoint_interval", 1_000)
  log_interval: int = run_settings.borrow("log_interval", 100)
  # Evaluations at the offline start and at the end (0 episodes: none), and every
  # eval_interval learner steps between them (eval.csv: score vs online steps).
  eval_episodes: int = run_settings.borrow("eval_episodes", 5, lower_bound=0)
  eval_interval: int = run_settings.borrow("eval_interval", 0)
  export_policies: bool = setting(True, "Write the SavedModels at the end.")
  # None: DEFAULT_EVAL_MAX_STEPS, or a Gymnasium environment's own TimeLimit (`eval_steps`);
  # start.resolve_config records the value in force.
  eval_max_steps: Optional[int] = run_settings.borrow(
      "eval_max_steps", None, "2000 on the gridworld, MinAtar and Atari; a Gymnasium "
      "environment's own TimeLimit")
  eval_epsilon: float = 0.001
  sample_timeout_s: float = setting(  # rate-limiter wait before checking server and actors
      30.0, "Seconds without a sample before checking server and actors.", lower_bound=1e-3,
      upper_bound=86400.0)
  server_timeout_s: float = setting(
      10.0, "Seconds before an unanswering Reverb server is lost.", lower_bound=1e-3,
      upper_bound=86400.0)
  reverb_checkpoint_timeout_s: float = setting(
      600.0, "Seconds the learner waits for a Reverb checkpoint before the server counts as "
      "lost (a large replay table takes a while to write).", lower_bound=1e-3,
      upper_bound=86400.0)
  reverb_port: int = setting(0, "Port of the in-process server (0: free port).", lower_bound=0,
                             upper_bound=65535)
  online_counts: str = setting(  # penalty.py
      "grow", "CCVL's n(s)^-1 online: 'grow' (|D| counts the online transitions too, C "
      "accumulates their features, the normalization is frozen at its offline value, so the "
      "weight falls where data arrives; gridworld: the exact counts grow) or 'offline' (the "
      "offline rule: |D| of the offline data, C and the normalization over the training "
      "batches; gridworld: the offline counts).", enum_values=("grow", "offline"))
  penalty_diagnostic: bool = setting(
      True, "At every evaluation also: the regularizer weight of the CCVL bounds on the online "
      "states trained on since the last evaluation and on offline states (penalty/*), and "
      "the bounds against Monte-Carlo returns (tight/*; otherwise only at the end).")
  offline_states: Optional[str] = setting(
      None, "An .npz with 'observation' [K, ...]: offline states for the penalty diagnostic "
      "(finetune_minatar.py writes one per run; gridworld: its dataset; else none).")
  agent: str = setting(  # 'ccvl' (both bounds), 'ccvl_lower' (Q_l only) or 'cql'
      "ccvl", "'ccvl' (lower + upper bounds, Eq. upper policy exploration), 'ccvl_lower' "
      "(Q_l only, explores with the confidence-adaptive policy + epsilon) or 'cql' "
      "(baseline: greedy + epsilon exploration).", enum_values=AGENTS)
  seed: int = run_settings.borrow("seed")
  schedule: str = schedule_setting(ASYNC)
  allow_config_change: bool = setting(
      False, "Resume the checkpoints in --root_dir (or reuse its finished run) although they "
      "were trained with other settings (by default refused, naming each change; with this "
      "flag each change is recorded in checkpoints/config_changes.json at the train step it "
      "took effect). --num_env_steps, the intervals and the timeouts may always change.")

  def validate(self):
    """ValueError naming the flag: the run's paths, then its settings (`validate_settings`)."""
    training.check_input_dir(self.offline_dir, "--offline_dir",
                             "the --root_dir of a train_offline.py or compare.py run")
    if not self.root_dir:
      raise ValueError("--root_dir is required")
    if os.path.realpath(self.root_dir) == os.path.realpath(self.offline_dir):
      raise ValueError(f"--root_dir {self.root_dir} is --offline_dir: the fine-tuning run would "
                       f"write its checkpoints among the offline run's and resume from them as "
                       f"its own; give another --root_dir (the offline run is only read)")
    self.validate_settings()
    if self.offline_states and not paths.isfile(self.offline_states):
      raise ValueError(f"--offline_states {self.offline_states!r} is not a file")

  def validate_settings(self):
    """ValueError naming the flag: the game, the run's settings and the exploration settings
    against their declarations (config_flags.check), then what no single declaration says;
    nothing about paths (an actor on another machine checks its record with this)."""
    check_game(self.game)
    # Before the declarations: this message, not theirs ("a finite number >= 0"), for --alpha.
    if self.alpha is not None and not self.alpha >= 0:
      raise ValueError(f"--alpha must be >= 0, got {self.alpha!r}")
    config_flags.check(self, prefix="--")
    unknown = sorted(set(self.exploration_values) - set(EXPLORATION_FIELDS))
    if unknown:
      raise ValueError(f"not settings of ExplorationConfig: {unknown}")
    config_flags.check(self.exploration, prefix="--")
    if not 0.0 <= self.eval_epsilon <= 1.0:  # not a flag: only a record can set it
      raise ValueError(f"eval_epsilon must be in [0, 1], got {self.eval_epsilon!r}")
    if self.offline_fraction > 0 and not 0 < self.offline_batch_size < self.batch_size:
      raise ValueError(
          f"--offline_fraction={self.offline_fraction:g} gives round({self.batch_size} x "
          f"{self.offline_fraction:g}) = {self.offline_batch_size} offline transitions per batch "
          f"of --batch_size={self.batch_size}: a mixed batch needs at least one offline and one "
          f"online transition (0 for no offline data)")
    if self.replay_capacity < self.min_replay_size:
      raise ValueError(f"--replay_capacity ({self.replay_capacity}) must be >= "
                       f"--min_replay_size ({self.min_replay_size})")
    if self.schedule == DETERMINISTIC and self.reverb_address is not None:
      raise ValueError("--reverb_address is for --schedule=async: --schedule=deterministic runs "
                       "its actors in the learner's process, without a Reverb server")
    if self.schedule == DETERMINISTIC and self.num_actors < 1:
      raise ValueError(f"--schedule=deterministic steps its actors in the learner's process: "
                       f"--num_actors must be >= 1, got {self.num_actors!r}")
    if self.reverb_address is not None and ":" not in self.reverb_address:
      raise ValueError(f"--reverb_address must be host:port, got {self.reverb_address!r}")
    own_data_lib.check_own_data(self.own_data)
    self.eval_steps  # pylint: disable=pointless-statement  (a Gymnasium id without a cap)

  @property
  def eval_steps(self) -> int:
    """The agent-step cap of an evaluation episode: --eval_max_steps when given, else a
    Gymnasium environment's registered TimeLimit (CartPole-v1: 500) or, on the gridworld,
    MinAtar and Atari, DEFAULT_EVAL_MAX_STEPS. ValueError naming --eval_max_steps for a
    Gymnasium environment that registers no TimeLimit."""
    if self.eval_max_steps is not None:
      return int(self.eval_max_steps)
    if factory.is_gymnasium(self.game):
      limit = gymnasium_env.registered_max_episode_steps(factory.gymnasium_id(self.game))
      if limit is None:
        raise ValueError(f"--eval_max_steps is needed with --game={self.game}, which registers "
                         f"no TimeLimit (its evaluation episodes have no cap of their own)")
      return limit
    return DEFAULT_EVAL_MAX_STEPS

  @property
  def exploration(self) -> ccvl_bounds_agent.ExplorationConfig:
    """The upper bound's and the exploration policy's settings in force: those set
    (`exploration_values`), else ExplorationConfig's defaults (T unset: 1)."""
    return ccvl_bounds_agent.ExplorationConfig(
        **{k: v for k, v in self.exploration_values.items() if v is not None})

  def record(self) -> Dict[str, object]:
    """The config as online_config.json and summary.json's 'config' keep it (`from_record`
    reads it back): one flat dict, ExplorationConfig's settings in force (the belief
    temperature None while unset), then the run's fields, the offline learner's settings
    (`offline_settings`) as one dict entry."""
    out = dataclasses.asdict(self.exploration)
    out["belief_temperature"] = self.exploration_values.get("belief_temperature")
    run = dataclasses.asdict(self)
    del run["exploration_values"]
    out.update(run)
    return out

  @classmethod
  def from_record(cls, saved: Mapping[str, object]) -> "OnlineConfig":
    """The OnlineConfig of a `record`: its ExplorationConfig settings that are set (not None)
    as `exploration_values`, the rest as the run's fields. A record written before the
    offline settings were kept has no 'offline_settings': the defaults, as that run used."""
    return cls(exploration_values={k: v for k, v in saved.items()
                                   if k in EXPLORATION_FIELDS and v is not None},
               **{k: v for k, v in saved.items() if k not in EXPLORATION_FIELDS})

  @classmethod
  def read_record(cls, path: str) -> "OnlineConfig":
    """The OnlineConfig of the online_config.json at `path` (the learner's `record`, what its
    actors and a resumed run read), checked before it is used: a JSON object with exactly the
    record's keys (a missing one would take a default the learner did not use), each of its
    declared type (None only where the default is None) and within its declared bounds. A
    ValueError naming `path` and the key otherwise."""
    import json  # pylint: disable=g-import-not-at-top
    try:
      saved = json.loads(paths.read_text(path))
    except (OSError, UnicodeDecodeError, ValueError) as e:
      raise ValueError(f"{path} cannot be read as JSON ({e}); the learner writes it whole at "
                       f"start: restart the run to write it again") from None
    if not isinstance(saved, dict):
      raise ValueError(f"{path} must hold a JSON object (the run's configuration), got "
                       f"{type(saved).__name__}")
    default = cls().record()
    missing = sorted(set(default) - set(saved))
    unknown = sorted(set(saved) - set(default))
    if missing or unknown:
      raise ValueError(f"{path} is not this version's record of a run: "
                       + "; ".join(p for p in (
                           f"missing {', '.join(repr(k) for k in missing)}" if missing else "",
                           f"unknown {', '.join(repr(k) for k in unknown)}" if unknown else "")
                                   if p)
                       + " (the learner writes every key at start; fill in nothing by hand)")
    for key, value in saved.items():
      owner = (ccvl_bounds_agent.ExplorationConfig if key in EXPLORATION_FIELDS else cls)
      kind = config_flags.declared_type(owner, key)
      if value is None:
        if default[key] is not None:
          raise ValueError(f"{path} records {key!r} = null, which the run does not allow "
                           f"(its default is {default[key]!r})")
        continue
      if kind in (bool, int, float, str):
        problem = config_flags.type_problem(owner, key, value)
        if problem or (kind is float and not math.isfinite(value)):
          raise ValueError(f"{path} records {key!r} = {value!r}, which "
                           f"{problem or 'must be a finite number'}")
      elif isinstance(default[key], dict) and not isinstance(value, dict):
        raise ValueError(f"{path} records {key!r} = {value!r}, which must be a JSON object")
    cfg = cls.from_record(saved)
    try:
      cfg.validate_settings()
    except (ValueError, TypeError) as e:
      raise ValueError(f"{path} records a setting the run does not allow: {e}") from None
    return cfg

  def fingerprint(self) -> Dict[str, object]:
    """What the run's checkpoints and recorded evaluations depend on: the compared settings of
    the record (the class's classification; the exploration settings in force one by one),
    with --offline_dir by its resolved path."""
    comparison = config_flags.comparison(type(self))
    saved = self.record()
    out = {k: saved[k] for k in comparison.compared if k != "exploration_values"}
    out.update({k: saved[k] for k in EXPLORATION_FIELDS})
    out["offline_dir"] = os.path.realpath(self.offline_dir) if self.offline_dir else ""
    return out

  @property
  def online_batch_size(self) -> int:
    return self.batch_size - self.offline_batch_size

  @property
  def offline_batch_size(self) -> int:
    return int(round(self.batch_size * self.offline_fraction))

  @property
  def num_learner_steps(self) -> int:
    """About the learner steps of `num_env_steps` env steps: the rate limiter lets the first
    sample through after `min_replay_size` items, then samples_per_insert / online batch
    learner steps per env step (an estimate: the run ends when the actors' env steps, counted
    at the server, reach the budget)."""
    return max(1, int(math.ceil(max(self.num_env_steps - self.min_replay_size, 0)
                                * self.samples_per_insert / self.online_batch_size)))

  @property
  def offline_agent(self) -> str:
    """The offline agent (train_offline / compare --agent) this fine-tune starts from."""
    return OFFLINE_AGENT[self.agent]

  def bounds(self) -> ccvl_bounds_agent.BoundsConfig:
    """The BoundsConfig of the fine-tune: the exploration settings in force (`exploration`:
    belief temperature 1 when unset), rewards clipped to [-1, 1] except on the gridworld and
    for a run on own data (its record's reward handling, `own_data`: not clipped unless the
    run clipped them), and on the gridworld the upper bound capped at its largest return (1:
    one +1 reward, then the episode ends)."""
    gridworld = self.game.lower() == GRIDWORLD
    if self.own_data:
      clip = self.own_data["reward_clip"]
    else:
      clip = None if gridworld else 1.0
    return ccvl_bounds_agent.BoundsConfig(
        reward_clip=clip,
        value_max=GRIDWORLD_VALUE_MAX if gridworld else None,
        **dataclasses.asdict(self.exploration))


def check_game(game: str) -> None:
  """ValueError unless online fine-tuning takes `game` (ccvl_tf.envs.factory.check_game): the
  gridworld, a MinAtar or an Atari game, or a Gymnasium environment with a Discrete action
  space (named with --game; it fine-tunes a run on own data, start.resolve_config)."""
  if factory.is_gymnasium(game):
    try:
      factory.check_game(game)
    except ValueError as e:
      raise ValueError(f"--game: {e}") from None
    return
  factory.check_game(game)


def make_env(game: str, seed: int, max_episode_steps: Optional[int] = None):
  """The game's PyEnvironment (ccvl_tf.envs.factory.make_env: the gridworld at its evaluation
  slip 0.15, a MinAtar or an Atari game)."""
  return factory.make_env(game, seed, max_episode_steps).env


def gridworld_counts():
  """n(s) of the gridworld's bounds: the offline dataset's exact state counts
  (tabular.dataset.make_gridworld_dataset(seed=0)), growing with the online data
  (counts.GrowingExactCounts)."""
  return counts_lib.GrowingExactCounts(tds.make_gridworld_dataset(seed=0).state,
                                       gridworld.GridWorld().num_states)


def agent_settings(game: str, bounds, alpha: Optional[float] = None, seed: int = 0,
                   dataset_size: float = 2500.0, agent: str = "ccvl", counts=None,
                   offline_settings: Optional[Mapping[str, object]] = None,
                   own_data: Optional[Mapping[str, object]] = None,
                   **more) -> agent_registry.AgentSettings:
  """The registry settings of the fine-tune's learner: the gridworld's small MLP (one-hot
  states; N = 4, M = 2, squared TD, no DR3, lr 3e-3, target period 10; CCVL's Q_l in the bonus
  form with the exact n(s) of `counts`, default `gridworld_counts()`), MinAtar's network and
  training settings (those of the MinAtar comparison, experiments/compare/suites.py, whose
  checkpoints it fine-tunes), or the Atari defaults (Nature torso), with `bounds`
  (BoundsConfig); then `offline_settings` on top (OnlineConfig.offline_settings: the offline
  learner's reading, delta head, TD loss, count estimate; a reading given there replaces the
  game's). CQL explores with its collect policy, so its collect epsilon is
  bounds.explore_epsilon. `dataset_size`: |D| of the offline data (CCVL's linear n(s)^-1).
  `own_data` (OnlineConfig.own_data, a run of ccvl_tf.fit on own data): its recorded network
  and reward clip, and the agent config's defaults under `offline_settings` (the run's
  learner settings), with no game's settings; required for a Gymnasium environment.
  `more`: further AgentSettings fields (export: policy_delta, num_grid_deltas)."""
  extra = dict(bounds=bounds, seed=seed, dataset_size=dataset_size, **more)
  if agent == "cql":
    extra["collect_epsilon"] = bounds.explore_epsilon
  if own_data:
    return _with_offline(dict(
        network_config=own_data_lib.network_config(own_data["network"], "own_data 'network'"),
        alpha=alpha, reward_clip=own_data["reward_clip"], **extra), offline_settings)
  if factory.is_gymnasium(game):
    raise ValueError(f"--game={game}: online fine-tuning in a Gymnasium environment starts "
                     f"from a run of ccvl_tf.fit on own data, whose summary.json gives the "
                     f"network (--offline_dir names it)")
  if factory.is_minatar(game):
    extra = dict(dict(compare_suites.MinAtarSuite.training_overrides), **extra)
    return _with_offline(dict(network_config=networks.minatar_network_config(), alpha=alpha,
                              reward_clip=1.0, **extra), offline_settings)
  if game.lower() == GRIDWORLD:
    if agent != "cql":
      counts = gridworld_counts() if counts is None else counts
      extra = dict(extra, inverse_count_fn=counts.inverse_count_one_hot,
                   ccvl_options={"objective": GRIDWORLD_LOWER_OBJECTIVE})
    extra = dict(dict(num_deltas=4, num_pairs=2, td_loss="squared", dr3_coef=0.0,
                      learning_rate=3e-3, adam_epsilon=1e-7, target_update_period=10,
                      collect_epsilon=0.0), **extra)
    return _with_offline(dict(
        network_config=networks.QNetworkConfig(torso="mlp", mlp_units=(64,), n_cos=16,
                                               hidden_units=64),
        alpha=0.2 if alpha is None else alpha, gamma=gridworld.GAMMA, **extra),
                         offline_settings)
  return _with_offline(dict(network_config=networks.QNetworkConfig(torso="nature"),
                            alpha=0.1 if alpha is None else alpha, reward_clip=1.0, **extra),
                       offline_settings)


def _with_offline(values: Dict[str, object], offline_settings: Optional[Mapping[str, object]]
                  ) -> agent_registry.AgentSettings:
  """make_settings of the game's `values` with the offline learner's settings on top: its
  reading (when it records one) replaces the game's whole, so the two never mix."""
  offline = dict(offline_settings or {})
  options = dict(values.pop("ccvl_options", None) or {})
  if set(offline) & set(readings.FLAGS):
    options = {k: v for k, v in options.items() if k not in readings.FLAGS}
    values = {k: v for k, v in values.items() if k not in readings.FLAGS}
  return agent_registry.make_settings(ccvl_options=dict(options, **offline), **values)


def agent_spec(agent: str) -> agent_registry.AgentSpec:
  """The registered learner of --agent ('ccvl': 'ccvl_bounds', 'ccvl_lower', 'cql')."""
  return agent_registry.get_agent_spec(REGISTERED[agent], offline=False)


def build_agent(game: str, time_step_spec, action_spec, bounds, alpha=None, seed=0,
                dataset_size: float = 2500.0, agent: str = "ccvl",
                offline_settings: Optional[Mapping[str, object]] = None,
                own_data: Optional[Mapping[str, object]] = None):
  """The learner of --agent through the registry: CCVLBoundsAgent ('ccvl'),
  LowerCCVLAgent ('ccvl_lower') or CQLAgent (`offline_settings`, `own_data`:
  agent_settings)."""
  settings = agent_settings(game, bounds, alpha, seed, dataset_size, agent,
                            offline_settings=offline_settings, own_data=own_data)
  return agent_spec(agent).build(time_step_spec, action_spec, settings)


def build_actor_agent(cfg: OnlineConfig, time_step_spec, action_spec):
  """The agent an actor acts with (actor.py, deterministic.py; the weights are the learner's,
  pulled): --agent's learner with the run's bounds, seed and the offline learner's settings,
  so that its network is the learner's."""
  return build_agent(cfg.game, time_step_spec, action_spec, cfg.bounds(), seed=cfg.seed,
                     agent=cfg.agent, offline_settings=cfg.offline_settings,
                     own_data=cfg.own_data)


def specs(game: str, seed: int = 0):
  """(time_step_spec, action_spec) of the game's environment."""
  env = make_env(game, seed)
  obs = tensor_spec.from_spec(env.observation_spec())
  act = tensor_spec.from_spec(env.action_spec())
  return ts.time_step_spec(obs), act


def server_signatures(game: str, bounds=None, agent_name: str = "ccvl",
                      offline_settings: Optional[Mapping[str, object]] = None,
                      own_data: Optional[Mapping[str, object]] = None):
  """(replay item signature, variables signature) for the game and agent (both tables;
  `offline_settings`, `own_data`: agent_settings, the delta head and a run on own data's
  network make the variables')."""
  tss, act = specs(game)
  cfg = OnlineConfig(game=game, own_data=dict(own_data or {}))
  agent = build_agent(game, tss, act, bounds or cfg.bounds(), agent=agent_name,
                      offline_settings=offline_settings, own_data=own_data)
  replay_sig = tensor_spec.add_outer_dim(agent.exploration_policy.trajectory_spec)
  return replay_sig, reverb_replay.variable_signature(pushed_variables(agent, control_variables()))


def control_variables():
  return {"train_step": tf.Variable(0, dtype=tf.int64, trainable=False),
          "finished": tf.Variable(0, dtype=tf.int64, trainable=False)}


def pushed_variables(agent, control):
  """The nest in the 'variables' table: both bounds' online weights, step, finished flag."""
  return dict(agent.policy_variables(), **control)


def make_server_tables(cfg: OnlineConfig):
  """The Reverb tables of the fine-tune `cfg` (its game checked first: `check_game`)."""
  check_game(cfg.game)
  replay_sig, var_sig = server_signatures(cfg.game, cfg.bounds(), cfg.agent,
                                          cfg.offline_settings, cfg.own_data)
  return reverb_replay.make_tables(replay_sig, var_sig, max_size=cfg.replay_capacity,
                            min_size=cfg.min_replay_size,
                            samples_per_insert=cfg.samples_per_insert,
                            batch_size=cfg.online_batch_size)

