"""The paper's method comparison (Table 2) in one run: every method x dataset kind x game x seed.

`run(CompareConfig(...))` is what `binaries/compare.py` calls. For each (dataset kind, game,
seed, method) it
  1. builds the method's learner from the agent registry of `ccvl_tf.experiments.offline`
     (REM, CQL, AEVL, Fixed-CCVL, CCVL, DQN), on the suite's torso;
  2. trains it with `ccvl_tf.training.train` (checkpoints: an interrupted training resumes
     exactly; CCVL and Fixed-CCVL share one trained learner, `AgentSpec.train_key`);
  3. evaluates the method's policy (`AgentSpec.policies`; CCVL / AEVL adapt their belief over
     all evaluation episodes of the run, whose average is the score, as in the paper) with
     `ccvl_tf.evaluation.run_episodes` in the suite's environment (`ccvl_tf.envs.factory`),
     epsilon 0.001;
  4. writes `results/<method>/<dataset>/<game>/seed_<k>.json`. A result file that exists is
     skipped on a rerun (the resumable unit is method/dataset/game/seed).
Then it writes, from all result files:
  scores.csv    method,dataset,game,seed,score (raw, = reporting.RESULTS_COLUMNS),
                normalized_score, train_steps, train_seconds, eval_seconds
  table.md      Table 2: normalized IQM with 95% stratified bootstrap CIs (rliable, via
                ccvl_tf.evaluation.aggregate_scores) per method and dataset kind, and the
                per-game tables (mean +- std of raw scores over seeds, Tables 3-5)
  per_game_<dataset>.md  the per-game table of each dataset kind on its own
  iqm.png       IQM and CI per method, one panel per dataset kind

Suites:
  * gridworld: the paper's lava gridworld (ccvl_tf.envs.gridworld), one-hot states, MLP torso,
    exact tabular n(s)^-1 for CCVL; a fast CPU check. Dataset kinds (analogues of the paper's;
    the behaviour policy of ccvl_tf.tabular.dataset, optimal action w.p. 0.5, otherwise
    uniform, in the p = 0.3 data gridworld):
      "1%"          250 transitions of that policy (a small sample of good data),
      "5%"          1,250 transitions of that policy,
      "Initial 10%" 2,500 transitions of a uniformly random policy (the start of a run).
    Each seed draws its own dataset (seed k: dataset seed k). Score: discounted return at
    evaluation slip 0.15; normalized = 100 x score / optimal expected return.
  * minatar: the MinAtar datasets of ccvl_tf.data.minatar_datasets (binaries/
    make_minatar_datasets.py), subsets 1%, 5%, initial10% of DQN run `data_run`; MinAtar torso;
    normalized = 100 (score - random) / (DQN - random) with that run's reference scores
    (ccvl_tf.scores.normalized_score).
  * atari: DQN Replay directories <data_dir>/<Game>/<run>/replay_logs, Nature torso, subsets
    1%, 5%, initial10%; the paper's protocol by default (6.25M steps on 1%, 12.5M on 5% and
    initial 10%, 100 evaluation episodes of at most 27,000 steps, 5 seeds): GPU scale.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np

from ccvl_tf import evaluation
from ccvl_tf import reporting
from ccvl_tf import scores
from ccvl_tf.envs import factory
from ccvl_tf.envs import gridworld_env
from ccvl_tf.experiments import offline

# Display name (as in the paper's tables) -> agent registry name.
METHODS: Dict[str, str] = {
    "REM": "rem", "CQL": "cql", "AEVL": "aevl", "Fixed-CCVL": "fixed_ccvl", "CCVL": "ccvl",
    "DQN": "dqn", "AEVL-TD": "aevl_td",
}
SUITES = ("gridworld", "minatar", "atari")
DATASET_KINDS = scores.PAPER_DATASETS
# Dataset kind -> subset name of ccvl_tf.data.dqn_replay (minatar / atari).
SUBSET_OF_KIND = {"1%": "1%", "5%": "5%", "Initial 10%": "initial10%"}
SCORE_COLUMNS = ("method", "dataset", "game", "seed", "score", "normalized_score",
                 "train_steps", "train_seconds", "eval_seconds", "tf_threads", "deterministic")
EVAL_EPSILON = 0.001  # the paper's evaluation epsilon


def parse_methods(text: str) -> List[str]:
  """'REM,cql,fixed_ccvl' -> ['REM', 'CQL', 'Fixed-CCVL'] (display names; case, '-' and '_'
  insensitive). Raises ValueError listing the valid names for an unknown one."""
  canon = {k.lower().replace("-", "").replace("_", ""): k for k in METHODS}
  out = []
  for name in [t.strip() for t in text.split(",") if t.strip()]:
    key = name.lower().replace("-", "").replace("_", "")
    if key not in canon:
      raise ValueError(f"--methods: unknown method {name!r}; valid methods: "
                       f"{', '.join(METHODS)}")
    if canon[key] not in out:
      out.append(canon[key])
  if not out:
    raise ValueError(f"--methods is empty; valid methods: {', '.join(METHODS)}")
  return out


def parse_datasets(text: str) -> List[str]:
  """'1%,5%,initial10%' -> dataset kinds; ValueError listing the valid ones."""
  canon = {k.lower().replace(" ", ""): k for k in DATASET_KINDS}
  out = []
  for name in [t.strip() for t in text.split(",") if t.strip()]:
    key = name.lower().replace(" ", "").replace("_", "")
    if key not in canon:
      raise ValueError(f"--datasets: unknown dataset kind {name!r}; valid kinds: "
                       f"{', '.join(DATASET_KINDS)} (initial10% is accepted for Initial 10%)")
    out.append(canon[key])
  if not out:
    raise ValueError(f"--datasets is empty; valid kinds: {', '.join(DATASET_KINDS)}")
  return out


def slug(text: str) -> str:
  """A file-system name: 'Initial 10%' -> 'initial10pct', 'Fixed-CCVL' -> 'fixed-ccvl'."""
  return text.lower().replace(" ", "").replace("%", "pct")


@dataclasses.dataclass
class CompareConfig:
  """Settings of one comparison (the binary's flags). None = the suite's default.

  Attributes:
    suite: one of SUITES.
    output_dir: where runs/, results/, scores.csv, table.md, iqm.png go.
    methods: display names (METHODS keys).
    datasets: dataset kinds (DATASET_KINDS).
    games: None = the suite's games.
    seeds: number of seeds per (method, dataset, game): first_seed .. first_seed+seeds-1.
    first_seed: the first seed (0 for reported tables; >= 100 for a development split that
      chooses defaults, docs/agent.md).
    num_steps: gradient steps per training (None: suite default; atari: 6.25M / 12.5M).
    eval_episodes, eval_max_steps: evaluation episodes per run and their step cap.
    batch_size, alpha, learning_rate, target_update_period: shared training settings.
    num_heads (REM H), num_members (AEVL E), num_grid_deltas (CCVL K), num_deltas (CCVL N),
      num_pairs (CCVL M), belief_temperature (None: CCVL's from held-out data, AEVL's
      config default), dr3_coef: method settings.
    ccvl_options: CCVL's own options (objective, counts, belief_resample), declared once in
      agents.ccvl_agent.CCVLConfig (experiments/agent_options.py); unset = CCVLConfig's.
    data_dir: minatar / atari dataset root; data_run: which logged run of each game (None: the
      suite's first, minatar 0 = make_minatar_datasets.py's default seed, atari 1).
    bootstrap_reps: rliable bootstrap replications for the CIs.
    checkpoint_interval: training checkpoints (resume inside one training).
    workers: trainings run side by side, each in its own process (1: in this process). The
      small MinAtar / gridworld networks use ~1 core each, so workers = cores is ~cores x
      faster (docs/compare.md). Methods that share a trained learner (Fixed-CCVL and CCVL)
      always run in the same worker, one after the other.
    threads_per_worker: TensorFlow intra/inter-op threads of every unit, whatever `workers`
      is (default 1), so that a unit's numerics do not depend on the pool size: reductions
      are ordered differently with another thread count, and with near-tied Q-values the
      greedy action follows that float noise. Recorded in each result row (`tf_threads`).
    deterministic: tf.config.experimental.enable_op_determinism() in every unit's process
      (recorded as `deterministic`); off by default until its cost is measured.
  """
  suite: str = "gridworld"
  output_dir: str = "results/compare"
  methods: Sequence[str] = scores.PAPER_METHODS
  datasets: Sequence[str] = DATASET_KINDS
  games: Optional[Sequence[str]] = None
  seeds: int = 3
  first_seed: int = 0
  num_steps: Optional[int] = None
  eval_episodes: Optional[int] = None
  eval_max_steps: Optional[int] = None
  batch_size: Optional[int] = None
  alpha: Optional[float] = None
  learning_rate: Optional[float] = None
  target_update_period: Optional[int] = None
  num_heads: Optional[int] = None
  num_members: Optional[int] = None
  num_grid_deltas: int = 8
  num_deltas: Optional[int] = None
  num_pairs: Optional[int] = None
  belief_temperature: Optional[float] = None
  dr3_coef: Optional[float] = None
  ccvl_options: Dict[str, object] = dataclasses.field(default_factory=dict)
  data_dir: Optional[str] = None
  data_run: Optional[int] = None
  bootstrap_reps: int = 2000
  checkpoint_interval: Optional[int] = None
  workers: int = 1
  threads_per_worker: int = 1
  deterministic: bool = False

  def validate(self) -> None:
    if self.suite not in SUITES:
      raise ValueError(f"--suite must be one of {', '.join(SUITES)}, got {self.suite!r}")
    for m in self.methods:
      if m not in METHODS:
        raise ValueError(f"--methods: unknown method {m!r}; valid methods: "
                         f"{', '.join(METHODS)}")
    for d in self.datasets:
      if d not in DATASET_KINDS:
        raise ValueError(f"--datasets: unknown dataset kind {d!r}; valid kinds: "
                         f"{', '.join(DATASET_KINDS)}")
    for name in ("seeds", "num_steps", "eval_episodes", "eval_max_steps", "batch_size",
                 "num_heads", "num_members", "num_grid_deltas", "num_deltas", "num_pairs",
                 "bootstrap_reps", "checkpoint_interval", "target_update_period", "workers",
                 "threads_per_worker"):
      v = getattr(self, name)
      if v is not None and (isinstance(v, bool) or int(v) != v or v < 1):
        raise ValueError(f"--{name} must be an integer >= 1, got {v!r}")
    for name in ("alpha", "dr3_coef"):
      v = getattr(self, name)
      if v is not None and not (math.isfinite(v) and v >= 0):
        raise ValueError(f"--{name} must be a finite number >= 0, got {v!r}")
    if isinstance(self.first_seed, bool) or int(self.first_seed) != self.first_seed or \
        self.first_seed < 0:
      raise ValueError(f"--first_seed must be an integer >= 0, got {self.first_seed!r}")
    if self.learning_rate is not None and not self.learning_rate > 0:
      raise ValueError(f"--learning_rate must be > 0, got {self.learning_rate!r}")
    if self.belief_temperature is not None and not (
        math.isfinite(self.belief_temperature) and self.belief_temperature > 0):
      raise ValueError(f"--belief_temperature must be a finite number > 0 (or unset), got "
                       f"{self.belief_temperature!r}")
    from ccvl_tf.experiments import agent_options  # pylint: disable=g-import-not-at-top
    agent_options.validate(self.ccvl_options)
    if self.suite in ("minatar", "atari") and not self.data_dir:
      raise ValueError(f"--suite={self.suite} needs --data_dir (the dataset root; "
                       + ("make it with python binaries/make_minatar_datasets.py "
                          "--output_dir=DIR" if self.suite == "minatar" else
                          "DQN Replay layout <data_dir>/<Game>/<run>/replay_logs") + ")")


# ---------------------------------------------------------------------------------------- suites
@dataclasses.dataclass
class Data:
  """One training dataset: batches, its size, and the agent settings that depend on it."""
  make_dataset: Callable[[int], object]     # start batch -> iterable of transition batches
  held_out: Callable[[], object]            # -> finite iterable of batches (Fixed-CCVL)
  size: int
  inverse_count_fn: Optional[Callable] = None


class Suite:
  """What differs between gridworld / minatar / atari (override the methods)."""
  name = ""
  default_steps = 1000
  default_eval_episodes = 10
  default_eval_max_steps: Optional[int] = None
  default_batch_size = 32
  training_overrides: Dict[str, object] = {}
  reward_clip: Optional[float] = None

  def __init__(self, cfg: CompareConfig):
    self.cfg = cfg

  def games(self) -> List[str]:
    raise NotImplementedError

  def check(self, games: Sequence[str], datasets: Sequence[str]) -> None:
    """Fails fast (ValueError saying how to make it) when a dataset is missing."""

  def env_name(self, game: str) -> str:
    """The game's name for ccvl_tf.envs.factory.make_env."""
    return game

  def specs(self, game: str):
    """(time_step_spec, action_spec) of the game's environment."""
    return _specs_of(self.eval_env(game, 0, None).env)

  def network_config(self):
    raise NotImplementedError

  def data(self, game: str, dataset: str, seed: int, batch_size: int) -> Data:
    raise NotImplementedError

  def eval_env(self, game: str, seed: int, max_steps: Optional[int]) -> factory.GameEnv:
    """The evaluation environment and its scoring (max_steps None: the environment's cap)."""
    return factory.make_env(self.env_name(game), seed, max_steps)

  def references(self) -> Optional[scores.References]:
    """Reference scores of normalize (None: the Atari tables of ccvl_tf.scores)."""
    return None

  def normalize(self, game: str, score: float) -> float:
    """100 (score - random) / (DQN - random) with the suite's reference scores."""
    return float(scores.normalized_score(game, score, self.references()))

  def steps(self, dataset: str) -> int:
    return self.cfg.num_steps or self.default_steps


def _specs_of(env):
  from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top
  obs_spec = tensor_spec.from_spec(env.observation_spec())
  return ts.time_step_spec(obs_spec), tensor_spec.from_spec(env.action_spec())


class GridworldSuite(Suite):
  """The lava gridworld, one-hot states, MLP torso (see the module docstring)."""
  name = "gridworld"
  default_steps = 1500
  default_eval_episodes = 20
  default_batch_size = 64
  # Small data, small network: the settings of tests/test_ccvl_agent.py's gridworld check
  # (Adam 3e-3, eps 1e-7, target period 10, batch 64, 1500 steps), for every method; no DR3
  # (one-hot states: phi(s).phi(s') is not the feature co-adaptation DR3 targets).
  training_overrides = dict(learning_rate=3e-3, adam_epsilon=1e-7, target_update_period=10,
                            dr3_coef=0.0)
  # kind -> (transitions, probability of the optimal action in the behaviour policy)
  KINDS = {"1%": (250, 0.5), "5%": (1250, 0.5), "Initial 10%": (2500, 0.0)}

  def __init__(self, cfg):
    super().__init__(cfg)
    from ccvl_tf.envs import gridworld  # pylint: disable=g-import-not-at-top
    self.world = gridworld.GridWorld()
    self.training_overrides = dict(self.training_overrides, gamma=self.world.gamma)

  def games(self):
    return ["gridworld"]

  def check(self, games, datasets):
    bad = [g for g in games if g != "gridworld"]
    if bad:
      raise ValueError(f"--games: the gridworld suite has one game, 'gridworld'; got {bad}")

  def network_config(self):
    from ccvl_tf import networks  # pylint: disable=g-import-not-at-top
    return networks.QNetworkConfig(torso="mlp", mlp_units=(64,), n_cos=32, hidden_units=64)

  def transitions(self, dataset: str, seed: int):
    from ccvl_tf.tabular import dataset as tab  # pylint: disable=g-import-not-at-top
    n, p_opt = self.KINDS[dataset]
    policy = tab.behavior_policy(self.world, optimal_action_prob=p_opt)
    return tab.collect(self.world, policy, n, seed=seed)

  def data(self, game, dataset, seed, batch_size):
    from ccvl_tf import counts  # pylint: disable=g-import-not-at-top
    from ccvl_tf.tabular import dataset as tab  # pylint: disable=g-import-not-at-top
    tr = self.transitions(dataset, seed)
    n = len(tr)

    def batch_at(idx):
      return tab.one_hot_batch(self.world, tr, idx)

    def make_dataset(start):
      i = start
      while True:  # batch i is a function of (seed, i): exact resume
        yield batch_at(np.random.default_rng([seed, i]).integers(0, n, batch_size))
        i += 1

    def held_out():
      return [batch_at(np.arange(j, min(j + 256, n))) for j in range(0, n, 256)]

    exact = counts.ExactInverseCounts(tr.state, self.world.num_states)
    return Data(make_dataset, held_out, n, inverse_count_fn=exact.inverse_count_one_hot)

  def normalize(self, game, score):
    """100 x score / the optimal expected discounted return at evaluation slip 0.15 and the
    gridworld's own horizon (a fixed reference, whatever --eval_max_steps is)."""
    return float(gridworld_env.normalized_return(score, gridworld_env.eval_world()))


class _ReplaySuite(Suite):
  """Shared by minatar and atari: Dopamine-format replay directories + FrameStore."""
  reward_clip = 1.0
  default_run = 0

  @property
  def run(self) -> int:
    return self.default_run if self.cfg.data_run is None else int(self.cfg.data_run)

  def replay_dir(self, game: str) -> str:
    raise NotImplementedError

  def data(self, game, dataset, seed, batch_size):
    from ccvl_tf.data import frame_store, pipeline  # pylint: disable=g-import-not-at-top
    key = (game, dataset)
    cache = getattr(self, "_stores", None)
    if cache is None:
      cache = self._stores = {}
    if key not in cache:
      cache.clear()  # one store in memory at a time
      cache[key] = frame_store.FrameStore.from_replay(self.replay_dir(game),
                                                      SUBSET_OF_KIND[dataset])
    store = cache[key]
    return Data(
        lambda start: pipeline.transition_dataset(store, batch_size, seed=seed,
                                                  start_batch=start),
        lambda: pipeline.transition_dataset(store, batch_size, seed=seed + 777).take(8),
        int(store.num_transitions))


class MinAtarSuite(_ReplaySuite):
  name = "minatar"
  # Cost-driven (docs/compare.md): measured 90-230 steps/s per method on the shared CPU, so the
  # full suite (5 games x 3 kinds x 3 seeds x 4 trainings) at 5k steps is ~1-2 h of CPU.
  default_steps = 5_000
  # 20 episodes per run (issue 11: the belief needs episodes to adapt over; the paper averages
  # 100). Was 5 before the confidence work.
  default_eval_episodes = 20
  default_eval_max_steps = 10_000  # MinAtar env's cap (the reference DQN scores used it too)
  training_overrides = dict(learning_rate=2.5e-4, target_update_period=1000)

  def games(self):
    from ccvl_tf.envs import minatar  # pylint: disable=g-import-not-at-top
    return minatar.valid_game_names()

  def env_name(self, game):
    return f"minatar/{game}"

  def replay_dir(self, game):
    from ccvl_tf.data import minatar_datasets  # pylint: disable=g-import-not-at-top
    return minatar_datasets.replay_dir(self.cfg.data_dir, game, self.run)

  def check(self, games, datasets):
    from ccvl_tf.data import minatar_datasets  # pylint: disable=g-import-not-at-top
    from ccvl_tf.envs import minatar  # pylint: disable=g-import-not-at-top
    valid = minatar.valid_game_names()
    bad = [g for g in games if g not in valid]
    if bad:
      raise ValueError(f"--games: unknown MinAtar games {bad}; valid: {', '.join(valid)}")
    missing = [g for g in games
               if not minatar_datasets.is_complete(self.cfg.data_dir, g, self.run)]
    if missing:
      raise ValueError(
          f"no complete MinAtar dataset for {', '.join(missing)} (run {self.run}) "
          f"under {self.cfg.data_dir}; make it with: python binaries/make_minatar_datasets.py "
          f"--output_dir={self.cfg.data_dir} --games={','.join(missing)} "
          f"--seed={self.run}")
    self._scores = minatar_datasets.load_scores(self.cfg.data_dir)  # says how to make it
    for g in games:  # unusable reference scores fail here, before any training
      try:
        self.normalize(g, 0.0)
      except ValueError as e:
        raise ValueError(
            f"{e}; rebuild {g} into a fresh --output_dir with binaries/make_minatar_datasets.py "
            f"--games={g} (with more steps if its DQN did not learn: --game_steps={g}:300000)"
        ) from e

  def network_config(self):
    from ccvl_tf import networks  # pylint: disable=g-import-not-at-top
    return networks.QNetworkConfig(torso="minatar", torso_units=128, n_cos=64, hidden_units=128)

  def references(self):
    """The dataset root's minatar_scores.json (random and data-DQN scores per game)."""
    from ccvl_tf.data import minatar_datasets  # pylint: disable=g-import-not-at-top
    if getattr(self, "_scores", None) is None:
      self._scores = minatar_datasets.load_scores(self.cfg.data_dir)
    return self._scores


class AtariSuite(_ReplaySuite):
  """The paper's protocol on the DQN Replay Dataset (GPU scale)."""
  name = "atari"
  default_run = 1  # the DQN Replay Dataset's runs are 1..5
  default_eval_episodes = 100
  default_eval_max_steps = 27_000
  PAPER_STEPS = {"1%": 6_250_000, "5%": 12_500_000, "Initial 10%": 12_500_000}

  def games(self):
    return [g for g in scores.ATARI_GAMES if scores.has_reference(g)]

  def replay_dir(self, game):
    return os.path.join(self.cfg.data_dir, game, str(self.run), "replay_logs")

  def check(self, games, datasets):
    from ccvl_tf.envs import atari  # pylint: disable=g-import-not-at-top
    for g in games:
      atari.check_game(g)
    missing = [self.replay_dir(g) for g in games if not os.path.isdir(self.replay_dir(g))]
    if missing:
      raise ValueError(
          f"missing DQN Replay directories: {', '.join(missing)}. Download the DQN Replay "
          f"Dataset (gs://atari-replay-datasets/dqn/<Game>/<run>/replay_logs) into "
          f"--data_dir, or collect a small one with binaries/collect_dataset.py")

  def steps(self, dataset):
    return self.cfg.num_steps or self.PAPER_STEPS[dataset]

  def network_config(self):
    from ccvl_tf import networks  # pylint: disable=g-import-not-at-top
    return networks.QNetworkConfig(torso="nature")


SUITE_CLASSES = {"gridworld": GridworldSuite, "minatar": MinAtarSuite, "atari": AtariSuite}


# ------------------------------------------------------------------------------------- one unit
def result_path(output_dir: str, method: str, dataset: str, game: str, seed: int) -> str:
  return os.path.join(output_dir, "results", slug(method), slug(dataset), game,
                      f"seed_{seed}.json")


def train_dir(output_dir: str, method: str, dataset: str, game: str, seed: int) -> str:
  key = offline.get_agent_spec(METHODS[method]).train_key
  return os.path.join(output_dir, "runs", key, slug(dataset), game, f"seed_{seed}")


def run_unit(suite: Suite, method: str, dataset: str, game: str, seed: int,
             log: Callable[[str], None],
             tf_settings: Optional[Dict[str, object]] = None) -> dict:
  """Trains (or resumes / reuses) and evaluates one method/dataset/game/seed; returns the row."""
  import keras  # pylint: disable=g-import-not-at-top
  from ccvl_tf import training  # pylint: disable=g-import-not-at-top
  cfg = suite.cfg
  spec = offline.get_agent_spec(METHODS[method])
  batch_size = cfg.batch_size or suite.default_batch_size
  data = suite.data(game, dataset, seed, batch_size)
  time_step_spec, action_spec = suite.specs(game)
  over = dict(suite.training_overrides)
  for name in ("learning_rate", "target_update_period", "dr3_coef"):
    if getattr(cfg, name) is not None:
      over[name] = getattr(cfg, name)
  settings = offline.AgentSettings(
      network_config=suite.network_config(), dataset_size=float(data.size),
      inverse_count_fn=data.inverse_count_fn, alpha=cfg.alpha, num_deltas=cfg.num_deltas,
      num_pairs=cfg.num_pairs, num_heads=cfg.num_heads, num_members=cfg.num_members,
      num_grid_deltas=cfg.num_grid_deltas,
      belief_temperature=cfg.belief_temperature, ccvl_options=dict(cfg.ccvl_options),
      reward_clip=suite.reward_clip, seed=seed,
      **over)
  keras.utils.set_random_seed(seed)  # initial weights: a function of the seed
  learner = spec.build(time_step_spec, action_spec, settings)
  steps = suite.steps(dataset)
  root = train_dir(cfg.output_dir, method, dataset, game, seed)
  loop = training.LoopConfig(
      root_dir=root, num_steps=steps,
      checkpoint_interval=cfg.checkpoint_interval or max(1, steps // 4),
      log_interval=max(1, steps // 4), summary_interval=max(1, steps // 20))
  t0 = time.time()
  result = training.train(learner, data.make_dataset, loop, log=log)
  train_seconds = time.time() - t0
  meta_path = os.path.join(root, "train_seconds.json")
  if result["resumed_from"] < steps:  # this call trained (part of) it
    prev = json.load(open(meta_path))["seconds"] if os.path.exists(meta_path) else 0.0
    with open(meta_path, "w") as f:
      json.dump({"seconds": prev + train_seconds, "steps": steps}, f)
  train_seconds = json.load(open(meta_path))["seconds"] if os.path.exists(meta_path) else \
      train_seconds

  t1 = time.time()
  exports, extra = spec.policies(learner, time_step_spec, action_spec, data.held_out(),
                                 settings)
  policy = evaluation.CompiledPolicy(exports["policy"])
  episodes = cfg.eval_episodes or suite.default_eval_episodes
  max_steps = cfg.eval_max_steps or suite.default_eval_max_steps
  ev = suite.eval_env(game, 10_000 + seed, max_steps)
  records = evaluation.run_episodes(policy, ev.env, episodes, run=seed, epsilon=EVAL_EPSILON,
                                    seed=seed, raw_score_fn=ev.raw_score_fn)
  raw = np.array([r.raw_score for r in records], np.float64)
  score = float(raw.mean())
  if method == "CCVL":
    extra = dict(extra, diagnostics=_diagnostics(suite, learner, data, game, seed, records))
  row = dict(method=method, dataset=dataset, game=game, seed=seed, score=score,
             normalized_score=suite.normalize(game, score), train_steps=steps,
             train_seconds=round(train_seconds, 2), eval_seconds=round(time.time() - t1, 2),
             episode_scores=raw.tolist(),
             mean_delta=[float(np.mean(r.deltas)) if r.deltas else None for r in records],
             **dict(tf_settings or {}),
             **{k: v for k, v in extra.items()})
  path = result_path(cfg.output_dir, method, dataset, game, seed)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path + ".tmp", "w") as f:
    json.dump(row, f, indent=1)
  os.replace(path + ".tmp", path)  # atomic: a result file is always complete
  return row


def _diagnostics(suite, learner, data, game, seed, records) -> dict:
  """The confidence diagnostics of a CCVL unit (experiments/confidence_report.py), flat."""
  from ccvl_tf import belief  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments import confidence_report  # pylint: disable=g-import-not-at-top
  grid = belief.delta_grid(suite.cfg.num_grid_deltas)

  def env_factory():
    return suite.eval_env(game, 20_000 + seed, suite.default_eval_max_steps).env
  out = confidence_report.report(learner, data.held_out, grid, None,
                                 env_factory=env_factory, records=records, seed=seed)
  return out["summary"]


# ------------------------------------------------------------------------------------- outputs
def read_results(output_dir: str) -> List[dict]:
  """All result rows under output_dir/results."""
  rows = []
  base = os.path.join(output_dir, "results")
  for dirpath, _, files in os.walk(base):
    for f in sorted(files):
      if f.endswith(".json"):
        with open(os.path.join(dirpath, f)) as fh:
          rows.append(json.load(fh))
  return rows


def write_scores_csv(path: str, rows: Sequence[dict]) -> None:
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(SCORE_COLUMNS)
    for r in sorted(rows, key=lambda r: (r["method"], r["dataset"], r["game"], r["seed"])):
      w.writerow([r["method"], r["dataset"], r["game"], r["seed"], f"{r['score']:.6g}",
                  f"{r['normalized_score']:.6g}", r["train_steps"], r["train_seconds"],
                  r["eval_seconds"], r.get("tf_threads", ""), r.get("deterministic", "")])


_ordered = reporting.ordered


def aggregate(rows: Sequence[dict], reps: int = 2000) -> Dict[tuple, object]:
  """(method, dataset) -> evaluation.Aggregate of the normalized IQM over seeds x games.

  The score matrix is [seeds, games] of normalized scores (rliable's stratified bootstrap
  resamples seeds within each game). Only seeds present for every game are used.
  """
  out = {}
  for method in _ordered([r["method"] for r in rows], list(METHODS)):
    for dataset in _ordered([r["dataset"] for r in rows], DATASET_KINDS):
      sel = [r for r in rows if r["method"] == method and r["dataset"] == dataset]
      if not sel:
        continue
      games = sorted({r["game"] for r in sel})
      seeds = sorted(set.intersection(*[{r["seed"] for r in sel if r["game"] == g}
                                        for g in games]))
      if not seeds:
        continue
      table = {(r["game"], r["seed"]): r["normalized_score"] for r in sel}
      matrix = np.array([[table[(g, s)] for g in games] for s in seeds])  # [seeds, games]
      out[(method, dataset)] = evaluation.aggregate_scores(matrix, reps=reps, seed=0)["iqm"]
  return out


# Suites whose raw scores are small numbers (a discounted return < 1, MinAtar points): their
# per-game tables show normalized scores; Atari's show raw game scores as the paper's Tables 3-5.
PER_GAME_NORMALIZED = {"gridworld": True, "minatar": True, "atari": False}


def per_game_table(rows: Sequence[dict], dataset: str, suite: str) -> str:
  """Game x method, mean ± std over seeds (reporting.render_per_game_table) of the raw score,
  or of the normalized score for the suites in PER_GAME_NORMALIZED."""
  methods = _ordered([r["method"] for r in rows if r["dataset"] == dataset], list(METHODS))
  if PER_GAME_NORMALIZED.get(suite, False):
    rows = [dict(r, score=r["normalized_score"]) for r in rows]
  return reporting.render_per_game_table(rows, dataset, methods)


def per_game_title(dataset: str, suite: str) -> str:
  what = "normalized score" if PER_GAME_NORMALIZED.get(suite, False) else "raw score"
  return f"Per game, {dataset} ({what}, mean ± std over seeds)"


def render_table(rows: Sequence[dict], suite: str, reps: int = 2000,
                 wall_seconds: Optional[float] = None) -> str:
  """table.md: Table 2 (dataset x method, normalized IQM (95% CI)), then per-game tables."""
  methods = _ordered([r["method"] for r in rows], list(METHODS))
  datasets = _ordered([r["dataset"] for r in rows], DATASET_KINDS)
  agg = aggregate(rows, reps)
  games = sorted({r["game"] for r in rows})
  seeds = sorted({r["seed"] for r in rows})
  lines = [f"# Method comparison, suite `{suite}`", "",
           "Normalized IQM over seeds x games with 95% stratified bootstrap CIs "
           f"(rliable, {reps} reps); best per row in bold. Games: {', '.join(games)}; "
           f"seeds: {', '.join(str(s) for s in seeds)}.", "",
           ] + reporting.iqm_table_lines(datasets, methods, agg)
  if wall_seconds is not None:
    lines += ["", f"Wall time of the last `compare.py` invocation: {wall_seconds:.0f} s."]
  for dataset in datasets:
    lines += ["", f"## {per_game_title(dataset, suite)}", "",
              per_game_table(rows, dataset, suite).rstrip()]
  return "\n".join(lines) + "\n"


def plot_iqm(path: str, rows: Sequence[dict], reps: int = 2000) -> None:
  """iqm.png: one panel per dataset kind, IQM point and 95% CI bar per method."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  agg = aggregate(rows, reps)
  methods = _ordered([r["method"] for r in rows], list(METHODS))
  datasets = _ordered([r["dataset"] for r in rows], DATASET_KINDS)
  fig, axes = plt.subplots(1, len(datasets), figsize=(3.2 * len(datasets), 0.5 * len(methods)
                                                      + 1.2), squeeze=False, sharey=True)
  for ax, dataset in zip(axes[0], datasets):
    for i, m in enumerate(methods):
      if (m, dataset) not in agg:
        continue
      a = agg[(m, dataset)]
      ax.plot([a.ci_low, a.ci_high], [i, i], color="C0", lw=6, alpha=0.4,
              solid_capstyle="butt")
      ax.plot([a.value], [i], "o", color="C0")
    ax.set_title(dataset)
    ax.set_xlabel("normalized IQM")
    ax.grid(axis="x", alpha=0.3)
  axes[0][0].set_yticks(range(len(methods)))
  axes[0][0].set_yticklabels(methods)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def write_outputs(output_dir: str, suite: str, reps: int,
                  wall_seconds: Optional[float] = None) -> Dict[str, str]:
  """scores.csv, table.md, per_game_<dataset>.md, iqm.png from all result files."""
  rows = read_results(output_dir)
  if not rows:
    raise ValueError(f"no results under {os.path.join(output_dir, 'results')}")
  paths = {"scores": os.path.join(output_dir, "scores.csv"),
           "table": os.path.join(output_dir, "table.md"),
           "iqm": os.path.join(output_dir, "iqm.png")}
  write_scores_csv(paths["scores"], rows)
  with open(paths["table"], "w") as f:
    f.write(render_table(rows, suite, reps, wall_seconds))
  for dataset in _ordered([r["dataset"] for r in rows], DATASET_KINDS):
    p = os.path.join(output_dir, f"per_game_{slug(dataset)}.md")
    with open(p, "w") as f:
      f.write(f"# {suite}: {per_game_title(dataset, suite)}\n\n")
      f.write(per_game_table(rows, dataset, suite))
    paths[f"per_game_{slug(dataset)}"] = p
  plot_iqm(paths["iqm"], rows, reps)
  confidence = confidence_table(rows)
  if confidence:
    paths["confidence"] = os.path.join(output_dir, "confidence.md")
    with open(paths["confidence"], "w") as f:
      f.write(confidence)
  return paths


CONFIDENCE_COLUMNS = (
    ("family_spread", "delta-family spread / mean abs TD target"),
    ("lemma1_fraction", "Lemma-1 fraction (V nondecreasing in delta)"),
    ("count_auc_random_policy", "AUC of n(s)^-1, random-policy vs dataset states"),
    ("count_auc_shuffled_pixels", "AUC of n(s)^-1, shuffled-pixel vs dataset states"),
    ("belief_max_shift", "belief: max shift of E[delta] from the prior"),
    ("belief_final_entropy", "belief: final entropy (nats)"),
)


def confidence_table(rows: Sequence[dict]) -> str:
  """Markdown: the confidence diagnostics of the CCVL runs (experiments/confidence_report.py),
  mean [min, max] over games and seeds per dataset kind; '' when no row has them."""
  rows = [r for r in rows if isinstance(r.get("diagnostics"), dict)]
  if not rows:
    return ""
  lines = ["| Data | runs | " + " | ".join(label for _, label in CONFIDENCE_COLUMNS) + " |",
           "| --- | --- |" + " --- |" * len(CONFIDENCE_COLUMNS)]
  for dataset in _ordered([r["dataset"] for r in rows], DATASET_KINDS):
    sel = [r["diagnostics"] for r in rows if r["dataset"] == dataset]
    cells = []
    for key, _ in CONFIDENCE_COLUMNS:
      v = np.array([d[key] for d in sel if key in d], np.float64)
      cells.append("n/a" if v.size == 0 else
                   f"{v.mean():.3g} [{v.min():.3g}, {v.max():.3g}]")
    lines.append(f"| {dataset} | {len(sel)} | " + " | ".join(cells) + " |")
  k = len(rows[0].get("bellman_errors", [])) or 8
  return ("# CCVL confidence diagnostics (mean [min, max] over games and seeds)\n\n"
          + "\n".join(lines) + f"\n\nPrior entropy of the belief: log K = {np.log(k):.3f}.\n")


# ------------------------------------------------------------------------------------- driver
Unit = tuple  # (dataset, game, seed, method)


def _unit_log_path(output_dir: str, unit: Unit) -> str:
  dataset, game, seed, method = unit
  return os.path.join(output_dir, "logs",
                      f"{slug(method)}_{slug(dataset)}_{game}_seed{seed}.log")


def _run_logged(suite: Suite, unit: Unit, tf_settings: Optional[Dict[str, object]] = None
                ) -> dict:
  """run_unit with its training log in logs/<method>_<dataset>_<game>_seed<k>.log; the
  process's TensorFlow settings (threads, determinism) are recorded in the row."""
  dataset, game, seed, method = unit
  with open(_unit_log_path(suite.cfg.output_dir, unit), "a") as lf:
    def unit_log(s, lf=lf):
      lf.write(s + "\n")
      lf.flush()
    return run_unit(suite, method, dataset, game, seed, unit_log,
                    tf_settings=tf_settings)


def training_groups(units: Sequence[Unit]) -> List[List[Unit]]:
  """Units grouped by the learner they train (dataset, game, seed, AgentSpec.train_key), in
  order: Fixed-CCVL and CCVL share one trained learner (one checkpoint directory), so they
  must never train at the same time in two processes."""
  groups: Dict[tuple, List[Unit]] = {}
  for u in units:
    key = (u[0], u[1], u[2], offline.get_agent_spec(METHODS[u[3]]).train_key)
    groups.setdefault(key, []).append(u)
  return list(groups.values())


_WORKER_SUITE: Optional[Suite] = None


def configure_tensorflow(threads: int, deterministic: bool, log=None) -> Dict[str, object]:
  """Sets TensorFlow's intra/inter-op threads (and op determinism) for this process's units,
  if TensorFlow's runtime has not started yet; returns what is in force (for the rows)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
  except RuntimeError:
    if log is not None and tf.config.threading.get_intra_op_parallelism_threads() != threads:
      log(f"compare: TensorFlow was already running in this process; its thread count "
          f"({tf.config.threading.get_intra_op_parallelism_threads() or 'default'}) stays, "
          f"so scores may differ from a run with {threads} thread(s) per unit")
  if deterministic:
    tf.config.experimental.enable_op_determinism()
  return {"tf_threads": int(tf.config.threading.get_intra_op_parallelism_threads()),
          "deterministic": bool(deterministic)}


_WORKER_TF: Dict[str, object] = {}


def _worker_init(cfg: CompareConfig, threads: int) -> None:
  """Runs once in each worker process, before TensorFlow executes anything."""
  global _WORKER_SUITE
  _WORKER_TF.update(configure_tensorflow(threads, cfg.deterministic))
  from absl import logging  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.ERROR)
  _WORKER_SUITE = SUITE_CLASSES[cfg.suite](cfg)


def _failure_message(unit: Unit, cause: str, output_dir: str) -> str:
  dataset, game, seed, method = unit
  return (f"{method} on {dataset} {game} seed {seed} failed in a worker: {cause}; log: "
          f"{_unit_log_path(output_dir, unit)}. Finished units are kept: rerun the same "
          "command to resume.")


def _worker_run(group: List[Unit]) -> List[Tuple[Unit, dict, float]]:
  out = []
  for unit in group:
    t = time.time()
    try:
      row = _run_logged(_WORKER_SUITE, unit, _WORKER_TF)
    except Exception as e:  # pylint: disable=broad-except
      # Re-raised as a plain-message exception: the pool pickles it back to the parent, and
      # exceptions with their own __init__ (TrainingStopped, NonFiniteLossError) do not unpickle.
      raise UnitFailed(_failure_message(unit, f"{type(e).__name__}: {e}",
                                        _WORKER_SUITE.cfg.output_dir)) from None
    out.append((unit, row, time.time() - t))
  return out


class UnitFailed(RuntimeError):
  """A unit (method/dataset/game/seed) raised in a worker process; names it and its log."""


def _run_parallel(cfg: CompareConfig, todo: Sequence[Unit], report) -> None:
  import concurrent.futures  # pylint: disable=g-import-not-at-top
  import multiprocessing  # pylint: disable=g-import-not-at-top
  threads = cfg.threads_per_worker
  groups = training_groups(todo)
  ctx = multiprocessing.get_context("spawn")  # a fresh TensorFlow per worker (no fork of TF)
  with concurrent.futures.ProcessPoolExecutor(
      max_workers=min(cfg.workers, len(groups)), mp_context=ctx, initializer=_worker_init,
      initargs=(cfg, threads)) as pool:
    futures = {pool.submit(_worker_run, g): g for g in groups}
    try:
      for fut in concurrent.futures.as_completed(futures):
        try:
          results = fut.result()
        except UnitFailed:
          raise
        except Exception as e:  # pylint: disable=broad-except
          # e.g. BrokenProcessPool: the worker died (killed, out of memory) inside this group.
          raise UnitFailed(_failure_message(futures[fut][0], f"{type(e).__name__}: {e}",
                                            cfg.output_dir)) from e
        for unit, row, seconds in results:
          report(unit, row, seconds)
    except BaseException:
      for f in futures:
        f.cancel()
      raise


def run(cfg: CompareConfig, log: Callable[[str], None] = print) -> dict:
  """Runs every missing unit, then writes the outputs; returns dict(done, skipped, paths, ...)."""
  cfg.validate()
  suite = SUITE_CLASSES[cfg.suite](cfg)
  games = list(cfg.games) if cfg.games else suite.games()
  suite.check(games, cfg.datasets)
  os.makedirs(cfg.output_dir, exist_ok=True)
  seeds = range(cfg.first_seed, cfg.first_seed + cfg.seeds)
  units = [(d, g, s, m) for d in cfg.datasets for g in games for s in seeds
           for m in cfg.methods]
  todo = [u for u in units if not os.path.exists(result_path(cfg.output_dir, u[3], u[0], u[1],
                                                             u[2]))]
  workers = min(cfg.workers, max(1, len(training_groups(todo))))
  log(f"compare: suite {cfg.suite}, {len(cfg.methods)} methods x {len(cfg.datasets)} dataset "
      f"kinds x {len(games)} games x {cfg.seeds} seeds = {len(units)} runs; "
      f"{len(units) - len(todo)} already done (skipped), {len(todo)} to run"
      + (f" in {workers} worker processes." if workers > 1 else "."))
  os.makedirs(os.path.join(cfg.output_dir, "logs"), exist_ok=True)
  t0 = time.time()
  finished = [0]

  def report(unit, row, seconds):
    dataset, game, seed, method = unit
    finished[0] += 1
    i = finished[0]
    elapsed = time.time() - t0
    eta = elapsed / i * (len(todo) - i)
    log(f"[{i}/{len(todo)}] {method} {dataset} {game} seed {seed}: score "
        f"{row['score']:.4g} (normalized {row['normalized_score']:.1f}) in "
        f"{seconds:.1f}s; elapsed {elapsed:.0f}s, ETA {eta:.0f}s")

  if workers > 1:
    _run_parallel(cfg, todo, report)
  else:
    tf_settings = configure_tensorflow(cfg.threads_per_worker, cfg.deterministic, log)
    for unit in todo:
      t = time.time()
      report(unit, _run_logged(suite, unit, tf_settings), time.time() - t)
  wall = time.time() - t0
  paths = write_outputs(cfg.output_dir, cfg.suite, cfg.bootstrap_reps,
                        wall_seconds=wall if todo else None)
  log(f"compare: wrote {', '.join(paths.values())} ({wall:.0f}s).")
  return dict(done=len(todo), skipped=len(units) - len(todo), paths=paths, seconds=wall,
              workers=workers)
