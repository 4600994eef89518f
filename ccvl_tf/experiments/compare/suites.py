"""The comparison's suites: what differs between gridworld, MinAtar and Atari.

A `Suite` gives a game's environment and specs, its network, its training data (`Data`), the
evaluation environment and the score normalization; `SUITE_CLASSES` maps --suite to its class
(runner.py's docstring describes each suite's datasets and protocol).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, List, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.algorithm import counts
from ccvl_tf.data import frame_store, pipeline, replay_files
from ccvl_tf.data import minatar_datasets
from ccvl_tf.envs import atari
from ccvl_tf.envs import factory
from ccvl_tf.tabular import gridworld
from ccvl_tf.envs import gridworld_env
from ccvl_tf.envs import minatar
from ccvl_tf.experiments.compare import config as compare_config
from ccvl_tf.experiments.offline import presets
from ccvl_tf.algorithm import networks
from ccvl_tf.envs import scores
from ccvl_tf.tabular import dataset as tab


@dataclasses.dataclass
class Data:
  """One training dataset: batches, its size, and the agent settings that depend on it."""
  make_dataset: Callable[[int], object]     # start batch -> iterable of transition batches
  held_out: Callable[[], object]            # -> finite iterable of batches (Fixed-CCVL)
  size: int
  inverse_count_fn: Optional[Callable] = None


# The run settings a suite gives when the flag is left out: each suite (a class with a `name`)
# declares every one as an integer >= 1, checked when the class is made (`__init_subclass__`),
# so a command that leaves the flag out runs with a value, not None.
DEFAULTS = ("default_steps", "default_eval_episodes", "default_eval_max_steps",
            "default_batch_size")


class Suite:
  """What differs between gridworld / minatar / atari (override the methods)."""
  name = ""
  default_steps = 1000
  default_eval_episodes = 10
  default_eval_max_steps: Optional[int] = None  # each suite declares its own (DEFAULTS)
  default_batch_size = 32
  training_overrides: Dict[str, object] = {}
  reward_clip: Optional[float] = None

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    if not cls.name:
      return  # a shared base (_ReplaySuite), not a suite of its own
    for attr in DEFAULTS:
      value = getattr(cls, attr)
      if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TypeError(f"suite {cls.name!r} ({cls.__name__}) must declare {attr} as an "
                        f"integer >= 1 (what applies when its flag is left out), got {value!r}")

  def __init__(self, cfg: compare_config.CompareConfig):
    self.cfg = cfg

  # The settings in force: the flag given, else the suite's default (one place for the
  # training, the evaluation and the unit's record, so they cannot disagree).
  def batch_size(self) -> int:
    return int(self.cfg.batch_size or self.default_batch_size)

  def eval_episodes(self) -> int:
    return int(self.cfg.eval_episodes or self.default_eval_episodes)

  def eval_max_steps(self) -> int:
    return int(self.cfg.eval_max_steps or self.default_eval_max_steps)

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

  def dataset_record(self, game: str, dataset: str) -> Dict[str, str]:
    """Where the game's data of dataset kind `dataset` is read from, as a training's
    summary.json records it for online fine-tuning's offline share ('dataset_dir', 'subset';
    experiments/online/offline_share.py); {} for data made in code (the gridworld's)."""
    return {}

  def eval_env(self, game: str, seed: int, max_steps: Optional[int]) -> factory.GameEnv:
    """The evaluation environment and its scoring (max_steps None: the environment's cap)."""
    return factory.make_env(self.env_name(game), seed, max_steps)

  def references(self) -> Optional[scores.References]:
    """Reference scores of normalize (None: the Atari tables of ccvl_tf.envs.scores)."""
    return None

  def normalize(self, game: str, score: float) -> float:
    """100 (score - random) / (DQN - random) with the suite's reference scores."""
    return float(scores.normalized_score(game, score, self.references()))

  def steps(self, dataset: str) -> int:
    return self.cfg.num_steps or self.default_steps


def _specs_of(env):
  obs_spec = tensor_spec.from_spec(env.observation_spec())
  return ts.time_step_spec(obs_spec), tensor_spec.from_spec(env.action_spec())


class GridworldSuite(Suite):
  """The lava gridworld, one-hot states, MLP torso (see the module docstring)."""
  name = "gridworld"
  default_steps = 1500
  default_eval_episodes = 20
  default_eval_max_steps = gridworld.HORIZON  # the environment's own cap (eval_env's None)
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
    self.world = gridworld.GridWorld()
    self.training_overrides = dict(self.training_overrides, gamma=self.world.gamma)

  def games(self):
    return ["gridworld"]

  def check(self, games, datasets):
    bad = [g for g in games if g != "gridworld"]
    if bad:
      raise ValueError(f"--games: the gridworld suite has one game, 'gridworld'; got {bad}")

  def network_config(self):
    return networks.QNetworkConfig(torso="mlp", mlp_units=(64,), n_cos=32, hidden_units=64)

  def transitions(self, dataset: str, seed: int):
    n, p_opt = self.KINDS[dataset]
    policy = tab.behavior_policy(self.world, optimal_action_prob=p_opt)
    return tab.collect(self.world, policy, n, seed=seed)

  def data(self, game, dataset, seed, batch_size):
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

  def dataset_record(self, game, dataset):
    replay_dir = self.replay_dir(game)
    if not replay_files.is_remote(replay_dir):
      replay_dir = os.path.abspath(replay_dir)  # read back from any working directory
    return {"dataset_dir": replay_dir, "subset": compare_config.SUBSET_OF_KIND[dataset]}

  def data(self, game, dataset, seed, batch_size):
    key = (game, dataset)
    cache = getattr(self, "_stores", None)
    if cache is None:
      cache = self._stores = {}
    if key not in cache:
      cache.clear()  # one store in memory at a time
      cache[key] = frame_store.FrameStore.from_replay(self.replay_dir(game),
                                                      compare_config.SUBSET_OF_KIND[dataset])
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
  # 20 episodes per run: the belief needs episodes to adapt over (the paper averages 100).
  default_eval_episodes = 20
  default_eval_max_steps = 10_000  # MinAtar env's cap (the reference DQN scores used it too)
  # DR3 off for every method: the development split's rule (docs/alpha_sweep.md, "The DR3
  # question": with DR3 0.03, CCVL at alpha 0.1 played one action everywhere on a development
  # seed of SpaceInvaders, not with 0); the alpha sweep and docs/confidence.md's family table
  # use it.
  training_overrides = dict(learning_rate=2.5e-4, target_update_period=1000, dr3_coef=0.0)

  def games(self):
    return minatar.valid_game_names()

  def env_name(self, game):
    return f"minatar/{game}"

  def replay_dir(self, game):
    return minatar_datasets.replay_dir(self.cfg.data_dir, game, self.run)

  def check(self, games, datasets):
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
        if g not in self._scores:  # complete, but the build stopped before scoring it
          raise ValueError(
              f"{e}: {g}'s dataset is complete but {minatar_datasets.SCORES_FILENAME} has no "
              f"entry for it (a build interrupted before it rewrote the scores); rerun "
              f"python binaries/make_minatar_datasets.py --output_dir={self.cfg.data_dir} "
              f"(finished games are cached, not rebuilt)") from e
        raise ValueError(
            f"{e}; rebuild {g} into a fresh --output_dir with binaries/make_minatar_datasets.py "
            f"--games={g} (with more steps if its DQN did not learn: --game_steps={g}:300000)"
        ) from e

  def network_config(self):
    return networks.minatar_network_config()

  def references(self):
    """The dataset root's minatar_scores.json (random and data-DQN scores per game)."""
    if getattr(self, "_scores", None) is None:
      self._scores = minatar_datasets.load_scores(self.cfg.data_dir)
    return self._scores


class AtariSuite(_ReplaySuite):
  """The paper's protocol on the DQN Replay Dataset (GPU scale)."""
  name = "atari"
  default_run = 1  # the DQN Replay Dataset's runs are 1..5
  # The paper's protocol, as train_offline.py's --preset=paper sets it.
  default_eval_episodes = presets.RUN["paper"]["eval_episodes"]
  default_eval_max_steps = presets.RUN["paper"]["eval_max_steps"]

  def games(self):
    return [g for g in scores.ATARI_GAMES if scores.has_reference(g)]

  def replay_dir(self, game):
    return os.path.join(self.cfg.data_dir, game, str(self.run), "replay_logs")

  def check(self, games, datasets):
    for g in games:
      atari.check_game(g)
    # Local paths: os.path.isdir; gs://, ram://: tf.io.gfile (replay_files.path_isdir).
    missing = [self.replay_dir(g) for g in games
               if not replay_files.path_isdir(self.replay_dir(g))]
    if missing:
      raise ValueError(
          f"missing DQN Replay directories: {', '.join(missing)}. Download the DQN Replay "
          f"Dataset (gs://atari-replay-datasets/dqn/<Game>/<run>/replay_logs) into "
          f"--data_dir, or collect a small one with binaries/collect_dataset.py")

  def steps(self, dataset):
    return self.cfg.num_steps or presets.PAPER_STEPS[compare_config.SUBSET_OF_KIND[dataset]]

  def network_config(self):
    return networks.QNetworkConfig(torso="nature")


SUITE_CLASSES = {"gridworld": GridworldSuite, "minatar": MinAtarSuite, "atari": AtariSuite}
