"""Evaluation: running policies for episodes, normalized scores, IQM with stratified bootstrap CIs,
and the paper's result tables (Table 2 and the per-game Tables 3-5) as markdown.

Protocol (paper Sec. "Offline Training on Atari", following Agarwal et al. 2021, "Deep RL at the
Edge of the Statistical Precipice"):
  * normalized score = 100 * (score - random) / (DQN - random): 0 is a uniformly random policy,
    100 is Nature DQN (Mnih et al. 2015);
  * each run's score is the average return over its evaluation episodes (100 in the paper);
  * aggregate over runs x games with the interquartile mean (IQM), with 95% stratified bootstrap
    confidence intervals, computed with rliable (not re-implemented here).
CCVL adapts delta during evaluation; as in the paper, the average over *all* episodes of a run
is reported, including those before the belief has converged.

Also here: `run_episodes`, the environment-independent evaluation loop for an exported (or
in-process) policy on any unbatched TF-Agents PyEnvironment, and `GridWorldEnvironment`, the
tabular gridworld of ccvl_tf/envs/gridworld.py as a PyEnvironment.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
import sys
from collections.abc import Mapping
from typing import Callable, Dict, Iterable, List, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np

# ------------------------------------------------------------------------------ reference scores
# The 17 games of the paper (Tables 3-5, in the paper's row order; Kumar et al. 2022, DR3).
ATARI_GAMES = (
    "Asterix", "Breakout", "Pong", "Seaquest", "Qbert", "SpaceInvaders", "Zaxxon", "YarsRevenge",
    "RoadRunner", "MsPacman", "BeamRider", "Jamesbond", "Enduro", "WizardOfWor", "IceHockey",
    "DoubleDunk", "DemonAttack",
)

# Uniformly random policy. Source: google-research/reincarnating_rl, file
# reincarnating_rl/atari_scores.py (`RANDOM_SCORES`), the standard Atari-57 random scores also in
# DeepMind's dqn_zoo atari_data.py; for the 49 Nature-DQN games these are the "Random" column of
# Mnih et al. 2015, Extended Data Table 2.
RANDOM_SCORES: Dict[str, float] = {
    "Asterix": 210.0, "Breakout": 1.7, "Pong": -20.7, "Seaquest": 68.4, "Qbert": 163.9,
    "SpaceInvaders": 148.0, "Zaxxon": 32.5, "YarsRevenge": 3092.9, "RoadRunner": 11.5,
    "MsPacman": 307.3, "BeamRider": 363.9, "Jamesbond": 29.0, "Enduro": 0.0,
    "WizardOfWor": 563.5, "IceHockey": -11.2, "DoubleDunk": -18.6, "DemonAttack": 152.1,
}

# Nature DQN (Mnih et al. 2015, "Human-level control through deep reinforcement learning",
# Extended Data Table 2, DQN column). Source file: seungjaeryanlee/rldb,
# rldb/db/paper__dqn2015/algo__dqn2015/entries.py (transcription of that table); the values for
# the Atari-100k games among them match the `DQN_SCORES` dict circulating with rliable's
# precipice colab. YarsRevenge is NOT one of the 49 Nature-DQN games, so it has no Nature-DQN
# score: it is left out here (normalized_score raises for it) rather than filled with a number
# from another agent. See docs/policies.md.
DQN_SCORES: Dict[str, float] = {
    "Asterix": 6012.0, "Breakout": 401.2, "Pong": 18.9, "Seaquest": 5286.0, "Qbert": 10596.0,
    "SpaceInvaders": 1976.0, "Zaxxon": 4977.0, "RoadRunner": 18257.0, "MsPacman": 2311.0,
    "BeamRider": 6846.0, "Jamesbond": 576.7, "Enduro": 301.8, "WizardOfWor": 3393.0,
    "IceHockey": -1.6, "DoubleDunk": -18.1, "DemonAttack": 9711.0,
}

GRIDWORLD = "gridworld"


def _canonical_game(game: str) -> str:
  """'space_invaders' / 'SpaceInvaders' / 'spaceinvaders' -> 'SpaceInvaders' when known."""
  key = game.replace("_", "").replace("-", "").lower()
  for name in set(RANDOM_SCORES) | set(DQN_SCORES):
    if name.lower() == key:
      return name
  return game


def normalized_score(game: str, score):
  """100 * (score - random) / (DQN - random) (0 = random policy, 100 = Nature DQN).

  Args:
    game: Atari game name (CamelCase or snake_case).
    score: raw game score(s) (undiscounted, unclipped episode return), scalar or array.

  Raises:
    ValueError: for a game without both reference scores (e.g. YarsRevenge: no Nature DQN).
  """
  name = _canonical_game(game)
  if name not in RANDOM_SCORES or name not in DQN_SCORES:
    missing = [w for w, table in (("random", RANDOM_SCORES), ("Nature-DQN", DQN_SCORES))
               if name not in table]
    raise ValueError(
        f"no {' and '.join(missing)} reference score for game {game!r}; normalized scores are "
        f"available for: {', '.join(sorted(set(RANDOM_SCORES) & set(DQN_SCORES)))}")
  random, dqn = RANDOM_SCORES[name], DQN_SCORES[name]
  return 100.0 * (np.asarray(score, np.float64) - random) / (dqn - random)


# ------------------------------------------------------------------------------ rliable
def _import_rliable():
  """Imports rliable's `library` and `metrics` (IQM, stratified bootstrap CIs).

  rliable imports `arch`, whose 7.x releases fail to import with pandas 3 (a `deprecate_kwarg`
  TypeError); requirements.txt pins pandas < 3 for that reason (BUILD.md, troubleshooting).
  """
  try:
    from rliable import library, metrics  # pylint: disable=g-import-not-at-top
  except TypeError as e:
    raise ImportError(
        f"rliable failed to import ({e}); with arch 7.x this means pandas >= 3 is installed. "
        f"Install the pinned versions: pip install -r requirements.txt (pandas==2.3.3).") from e
  return library, metrics


@dataclasses.dataclass(frozen=True)
class Aggregate:
  """Point estimate and 95% stratified bootstrap CI of one aggregate metric."""
  value: float
  ci_low: float
  ci_high: float

  def as_dict(self):
    return {"value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high}


def aggregate_scores(score_matrix, reps: int = 2000, seed: int = 0,
                     confidence: float = 0.95) -> Dict[str, Aggregate]:
  """IQM, mean and median over runs x games with stratified bootstrap CIs (rliable).

  Args:
    score_matrix: normalized scores [num_runs, num_games] (one score per run and game, e.g. the
      average normalized return of a run's evaluation episodes).
    reps: bootstrap replications (rliable's default is 50,000; 2,000 gives CI ends within about
      a percent of that for tables).
    seed: makes the CIs reproducible. rliable draws its resampling indices from numpy's *global*
      RNG (`np.random.choice`), not from `random_state`, so the global state is seeded for the
      call and restored afterwards.
    confidence: CI coverage.

  Returns:
    {'iqm': Aggregate, 'mean': Aggregate, 'median': Aggregate}; 'mean'/'median' are rliable's
    mean/median of per-game means.
  """
  scores = np.asarray(score_matrix, np.float64)
  if scores.ndim != 2 or scores.size == 0:
    raise ValueError(f"score_matrix must be [num_runs, num_games], got shape {scores.shape}")
  library, metrics = _import_rliable()
  funcs = {"iqm": metrics.aggregate_iqm, "mean": metrics.aggregate_mean,
           "median": metrics.aggregate_median}
  aggregate_func = lambda x: np.array([f(x) for f in funcs.values()])  # noqa: E731
  saved = np.random.get_state()
  try:
    np.random.seed(seed)
    # random_state is left None: rliable's StratifiedBootstrap ignores it for resampling, and
    # passing it only triggers arch's deprecation warning.
    points, intervals = library.get_interval_estimates(
        {"m": scores}, aggregate_func, reps=reps, confidence_interval_size=confidence)
  finally:
    np.random.set_state(saved)
  point, interval = points["m"], intervals["m"]  # [3], [2, 3]
  return {name: Aggregate(float(point[i]), float(interval[0, i]), float(interval[1, i]))
          for i, name in enumerate(funcs)}


# ------------------------------------------------------------------------------ results tables
# A results CSV has one row per (method, dataset, game, seed) with the raw game score of that run
# (the average return of its evaluation episodes): columns method,dataset,game,seed,score.
RESULTS_COLUMNS = ("method", "dataset", "game", "seed", "score")
PAPER_METHODS = ("REM", "CQL", "AEVL", "Fixed-CCVL", "CCVL")
PAPER_DATASETS = ("1%", "5%", "Initial 10%")


def read_results_csv(path_or_file) -> List[dict]:
  """Rows of a results CSV (columns RESULTS_COLUMNS; score parsed as float)."""
  if hasattr(path_or_file, "read"):
    text = path_or_file.read()
  else:
    with open(path_or_file, newline="") as f:
      text = f.read()
  reader = csv.DictReader(io.StringIO(text))
  missing = set(RESULTS_COLUMNS) - set(reader.fieldnames or ())
  if missing:
    raise ValueError(f"results CSV lacks columns {sorted(missing)}; expected {RESULTS_COLUMNS}")
  rows = []
  for row in reader:
    row = dict(row)
    row["score"] = float(row["score"])
    rows.append(row)
  return rows


def _ordered(values: Iterable[str], preferred: Sequence[str]) -> List[str]:
  values = list(dict.fromkeys(values))
  return [v for v in preferred if v in values] + sorted(v for v in values if v not in preferred)


def score_matrix_from_rows(rows: Sequence[dict], method: str, dataset: str,
                           games: Optional[Sequence[str]] = None) -> np.ndarray:
  """Normalized scores [num_seeds, num_games] of one method on one dataset.

  Seeds are matched by the 'seed' column; every game must have the same seeds.
  """
  sel = [r for r in rows if r["method"] == method and r["dataset"] == dataset]
  if not sel:
    raise ValueError(f"no rows for method={method!r} dataset={dataset!r}")
  games = list(games) if games is not None else _ordered([r["game"] for r in sel], ATARI_GAMES)
  seeds = sorted({r["seed"] for r in sel}, key=lambda s: (len(s), s))
  table = {(r["game"], r["seed"]): r["score"] for r in sel}
  out = np.empty([len(seeds), len(games)])
  for j, game in enumerate(games):
    for i, seed in enumerate(seeds):
      if (game, seed) not in table:
        raise ValueError(f"{method}/{dataset}: no score for game {game!r} seed {seed!r}")
      out[i, j] = normalized_score(game, table[(game, seed)])
  return out


def _fmt(x: float, digits: int = 1) -> str:
  return f"{x:.{digits}f}"


def iqm_table_lines(datasets: Sequence[str], methods: Sequence[str], cells) -> List[str]:
  """Markdown lines of a Table-2 style table: header, then one row per dataset with
  "IQM (CI low, CI high)" per method ("-" where `cells` has no (method, dataset) entry),
  the best IQM of each row in bold. `cells`: {(method, dataset): aggregate with value,
  ci_low, ci_high}."""
  lines = ["| Data | " + " | ".join(methods) + " |",
           "| --- | " + " | ".join("---" for _ in methods) + " |"]
  for dataset in datasets:
    row = {m: cells[(m, dataset)] for m in methods if (m, dataset) in cells}
    best = max((a.value for a in row.values()), default=None)
    out = []
    for m in methods:
      if m not in row:
        out.append("-")
        continue
      a = row[m]
      text = f"{_fmt(a.value)} ({_fmt(a.ci_low)}, {_fmt(a.ci_high)})"
      out.append(f"**{text}**" if a.value == best else text)
    lines.append(f"| {dataset} | " + " | ".join(out) + " |")
  return lines


def render_aggregate_table(rows: Sequence[dict], reps: int = 2000, seed: int = 0,
                           methods: Optional[Sequence[str]] = None,
                           datasets: Optional[Sequence[str]] = None) -> str:
  """The paper's Table 2 as markdown: dataset x method, normalized IQM and 95% CI.

  Games without both reference scores (YarsRevenge) are excluded and named in a footnote.
  The best IQM of each dataset row is bold.
  """
  methods = list(methods) if methods else _ordered([r["method"] for r in rows], PAPER_METHODS)
  datasets = list(datasets) if datasets else _ordered([r["dataset"] for r in rows],
                                                      PAPER_DATASETS)
  all_games = _ordered([r["game"] for r in rows], ATARI_GAMES)
  games = [g for g in all_games
           if _canonical_game(g) in RANDOM_SCORES and _canonical_game(g) in DQN_SCORES]
  skipped = [g for g in all_games if g not in games]
  cells = {}
  for dataset in datasets:
    for method in methods:
      if any(r["method"] == method and r["dataset"] == dataset for r in rows):
        cells[(method, dataset)] = aggregate_scores(
            score_matrix_from_rows(rows, method, dataset, games), reps=reps, seed=seed)["iqm"]
  lines = iqm_table_lines(datasets, methods, cells)
  note = (f"\nNormalized IQM over {len(games)} games x seeds, 95% stratified bootstrap CIs "
          f"(rliable, {reps} reps).")
  if skipped:
    note += f" Excluded (no reference score): {', '.join(skipped)}."
  return "\n".join(lines) + "\n" + note + "\n"


def render_per_game_table(rows: Sequence[dict], dataset: str,
                          methods: Optional[Sequence[str]] = None) -> str:
  """The paper's per-game Tables 3-5 as markdown: game x method, mean +- std of raw returns
  across seeds (sample std, ddof=1; 0 for a single seed)."""
  sel = [r for r in rows if r["dataset"] == dataset]
  if not sel:
    raise ValueError(f"no rows for dataset {dataset!r}")
  methods = list(methods) if methods else _ordered([r["method"] for r in sel], PAPER_METHODS)
  games = _ordered([r["game"] for r in sel], ATARI_GAMES)
  lines = ["| Game | " + " | ".join(methods) + " |",
           "| --- | " + " | ".join("---" for _ in methods) + " |"]
  for game in games:
    cells = []
    for method in methods:
      vals = np.array([r["score"] for r in sel if r["game"] == game and r["method"] == method])
      if vals.size == 0:
        cells.append("-")
        continue
      std = float(np.std(vals, ddof=1)) if vals.size > 1 else 0.0
      cells.append(f"{_fmt(float(np.mean(vals)))} ± {_fmt(std)}")
    lines.append(f"| {game} | " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ evaluation loop
@dataclasses.dataclass
class EpisodeRecord:
  """One evaluation episode."""
  run: int               # run (seed) index
  episode: int           # episode index within the run
  return_: float         # sum of the rewards the environment emitted (clipped on Atari)
  raw_score: float       # the game score (unclipped; = return_ when the env has no raw score)
  length: int            # agent steps
  deltas: List[float]    # delta acted under at each step (empty if the policy emits none)
  map_delta: float       # argmax of the policy's belief at the episode's end (nan if none)
  log_belief: Optional[np.ndarray] = None  # the policy's log-belief [K] at the episode's end


def _belief_of(state) -> Optional[np.ndarray]:
  if isinstance(state, Mapping) and "log_belief" in state:
    return np.asarray(state["log_belief"])[0]
  return None


def run_episodes(policy, env, num_episodes: int, *, run: int = 0, epsilon: float = 0.0,
                 seed: int = 0, delta_grid: Optional[np.ndarray] = None,
                 raw_score_fn: Optional[Callable[[object], Optional[float]]] = None,
                 on_episode: Optional[Callable[[EpisodeRecord], None]] = None,
                 on_step: Optional[Callable[[int, int], None]] = None,
                 max_total_steps: Optional[int] = None) -> List[EpisodeRecord]:
  """Runs `policy` for `num_episodes` episodes of `env`, carrying the policy state throughout.

  The policy state is created once (get_initial_state(1)) and carried across episode
  boundaries, so a confidence-adaptive belief adapts over the whole run; the policy is called on
  every time step including LAST (its transition, with the final reward, is scored) and the
  environment is then reset. The action chosen at a LAST step is not executed.

  Args:
    policy: a TF-Agents TFPolicy or a SavedModel loaded with tf.saved_model.load (anything with
      `get_initial_state(batch_size)` and `action(time_step, state)`), batch size 1.
    env: an unbatched TF-Agents PyEnvironment.
    num_episodes: >= 1.
    run: index stored in the records.
    epsilon: evaluation epsilon-greedy applied here (with a numpy RNG seeded by `seed`); when the
      random action replaces the greedy one, the state's 'prev_action' is overwritten with the
      executed action so that a belief scores what really happened. Use 0 when the exported
      policy already is epsilon-greedy.
    seed: seeds the epsilon RNG, and the 'rng' entry of a ConfidenceAdaptivePolicy state (so
      runs with different seeds draw different deltas).
    delta_grid: the policy's delta grid, for `map_delta` (default: infer K from the state and use
      ccvl_tf.belief.delta_grid(K)).
    raw_score_fn: env -> game score of the episode just ended (None: the sum of rewards). Atari:
      `lambda env: env.get_info()['episode_raw_return']`.
    on_episode: called with each finished EpisodeRecord (progress display).
    on_step: called as on_step(steps_in_episode, total_steps) after every env step.
    max_total_steps: optional safety cap on the total number of steps.

  Returns:
    A list of EpisodeRecord, one per episode.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top
  from ccvl_tf import belief  # pylint: disable=g-import-not-at-top

  if int(num_episodes) != num_episodes or num_episodes < 1:
    raise ValueError(f"num_episodes must be an integer >= 1, got {num_episodes!r}")
  if not 0.0 <= epsilon <= 1.0:
    raise ValueError(f"epsilon must be in [0, 1], got {epsilon!r}")
  if getattr(env, "batched", False):
    raise ValueError("run_episodes needs an unbatched PyEnvironment")
  rng = np.random.default_rng(seed)
  action_spec = env.action_spec()
  num_actions = int(action_spec.maximum) - int(action_spec.minimum) + 1

  state = policy.get_initial_state(batch_size=1)
  if isinstance(state, Mapping):
    state = dict(state)
    if "rng" in state:  # per-run seed of the delta sampler
      r = np.asarray(state["rng"]).copy()
      r[:, 0] = seed
      state["rng"] = tf.constant(r, tf.int64)
  log_b = _belief_of(state)
  if delta_grid is None and log_b is not None:
    delta_grid = belief.delta_grid(log_b.shape[-1])

  def batch1(x):
    return tf.constant(np.asarray(x)[np.newaxis])

  records: List[EpisodeRecord] = []
  time_step = env.reset()
  ep_return, ep_len, ep_deltas, total = 0.0, 0, [], 0
  while len(records) < num_episodes:
    t = ts.TimeStep(batch1(time_step.step_type), batch1(np.float32(time_step.reward)),
                    batch1(np.float32(time_step.discount)), batch1(time_step.observation))
    step = policy.action(t, state)
    state = step.state
    if not time_step.is_first():
      ep_return += float(time_step.reward)
    if time_step.is_last():
      log_b = _belief_of(state)
      map_delta = (float(delta_grid[int(np.argmax(log_b))])
                   if log_b is not None and delta_grid is not None else math.nan)
      raw = raw_score_fn(env) if raw_score_fn is not None else None
      rec = EpisodeRecord(run=run, episode=len(records), return_=ep_return,
                          raw_score=float(ep_return if raw is None else raw), length=ep_len,
                          deltas=ep_deltas, map_delta=map_delta,
                          log_belief=None if log_b is None else np.array(log_b))
      records.append(rec)
      if on_episode is not None:
        on_episode(rec)
      ep_return, ep_len, ep_deltas = 0.0, 0, []
      if len(records) >= num_episodes:
        break
      time_step = env.reset()
      continue
    action = int(np.asarray(step.action).reshape(-1)[0])
    info = getattr(step, "info", None)
    delta = getattr(info, "delta", None)
    if delta is None and isinstance(info, Mapping):
      delta = info.get("delta")
    if delta is not None:
      ep_deltas.append(float(np.asarray(delta).reshape(-1)[0]))
    if epsilon > 0.0 and rng.random() < epsilon:
      action = int(action_spec.minimum) + int(rng.integers(num_actions))
      if isinstance(state, Mapping) and "prev_action" in state:
        state = dict(state)
        state["prev_action"] = tf.constant([action], tf.as_dtype(state["prev_action"].dtype))
    time_step = env.step(np.asarray(action, dtype=action_spec.dtype))
    ep_len += 1
    total += 1
    if on_step is not None:
      on_step(ep_len, total)
    if max_total_steps is not None and total >= max_total_steps:
      raise RuntimeError(f"run_episodes: exceeded max_total_steps={max_total_steps}")
  return records


# ------------------------------------------------------------------------------ gridworld env
def gridworld_environment(slip_prob: Optional[float] = None, seed: int = 0):
  """The paper's gridworld (evaluation slip probability 0.15 by default) as a PyEnvironment."""
  from ccvl_tf.envs import gridworld  # pylint: disable=g-import-not-at-top
  world = gridworld.GridWorld(
      slip_prob=gridworld.EVAL_SLIP_PROB if slip_prob is None else slip_prob)
  return GridWorldEnvironment(world, seed=seed)


def _gridworld_env_class():
  from tf_agents.environments import py_environment  # pylint: disable=g-import-not-at-top
  from tf_agents.specs import array_spec  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top

  class _GridWorldEnvironment(py_environment.PyEnvironment):
    """A ccvl_tf.envs.gridworld.GridWorld as an unbatched TF-Agents PyEnvironment.

    observation: one-hot float32 [S]; action: int32 in [0, 4). Entering the goal or lava ends
    the episode (termination, discount 0); `horizon` steps end it by truncation (discount 1).
    get_info() has 'episode_discounted_return' (gamma^t-discounted, as the tabular evaluation and
    the paper's gridworld normalization use).
    """

    def __init__(self, world, seed: int = 0):
      super().__init__(handle_auto_reset=True)
      self.world = world
      self._rng = np.random.default_rng(seed)
      self._obs_spec = array_spec.BoundedArraySpec((world.num_states,), np.float32, 0.0, 1.0,
                                                   name="observation")
      self._act_spec = array_spec.BoundedArraySpec((), np.int32, 0, world.num_actions - 1,
                                                   name="action")
      self._s, self._t, self._disc_return = world.start_state, 0, 0.0

    def observation_spec(self):
      return self._obs_spec

    def action_spec(self):
      return self._act_spec

    def get_info(self):
      return {"episode_discounted_return": self._disc_return, "state": self._s, "t": self._t}

    def _reset(self):
      self._s, self._t, self._disc_return = self.world.start_state, 0, 0.0
      return ts.restart(self.world.one_hot(self._s))

    def _step(self, action):
      a = int(np.asarray(action).reshape(()))
      if not 0 <= a < self.world.num_actions:
        raise ValueError(f"action {a} outside [0, {self.world.num_actions})")
      s2 = int(self.world.sample_next_states(np.array([self._s]), np.array([a]), self._rng)[0])
      r = float(self.world.R[self._s, a, s2])
      self._disc_return += self.world.gamma ** self._t * r
      self._s, self._t = s2, self._t + 1
      obs = self.world.one_hot(s2)
      if bool(self.world.terminal_mask[s2]):
        return ts.termination(obs, np.float32(r))
      if self._t >= self.world.horizon:
        return ts.truncation(obs, np.float32(r))
      return ts.transition(obs, np.float32(r))

  return _GridWorldEnvironment


def GridWorldEnvironment(world, seed: int = 0):  # pylint: disable=invalid-name
  """Constructs the gridworld PyEnvironment (class built lazily to keep TF-Agents imports out of
  module import time)."""
  return _gridworld_env_class()(world, seed=seed)


# ------------------------------------------------------------------------------ loading policies
def check_saved_model_dir(policy_dir: str) -> None:
  """Raises ValueError unless `policy_dir` is a directory holding a SavedModel (no TF import)."""
  if not os.path.isdir(policy_dir):
    raise ValueError(f"--policy_dir {policy_dir!r} is not a directory")
  if not (os.path.exists(os.path.join(policy_dir, "saved_model.pb"))
          or os.path.exists(os.path.join(policy_dir, "saved_model.pbtxt"))):
    raise ValueError(
        f"{policy_dir!r} is not a SavedModel directory (no saved_model.pb); export a policy with "
        "ccvl_tf.policies.export_policy (TF-Agents PolicySaver) first")


def load_saved_policy(policy_dir: str, num_actions: Optional[int] = None,
                      observation_shape: Optional[Sequence[int]] = None):
  """Loads an exported policy (ccvl_tf.policies.export_policy / PolicySaver) with clear errors.

  Args:
    policy_dir: directory holding saved_model.pb (and policy_specs.pbtxt).
    num_actions: if given, must equal the policy's action count (from policy_specs.pbtxt).
    observation_shape: if given, must equal the policy's observation shape.

  Returns:
    (loaded SavedModel, dict(num_actions=..., observation_shape=...) or {} without specs file).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  check_saved_model_dir(policy_dir)
  meta = {}
  specs_path = os.path.join(policy_dir, "policy_specs.pbtxt")
  if os.path.exists(specs_path):
    from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top
    specs = tensor_spec.from_pbtxt_file(specs_path)
    data_spec = specs["collect_data_spec"] if isinstance(specs, Mapping) else specs
    action_spec = data_spec.action
    meta["num_actions"] = int(np.asarray(action_spec.maximum) - np.asarray(action_spec.minimum)
                              + 1)
    meta["observation_shape"] = tuple(data_spec.observation.shape.as_list())
  elif num_actions is not None or observation_shape is not None:
    raise ValueError(
        f"{specs_path} is missing, so the policy in {policy_dir!r} cannot be checked against "
        f"this game's actions and observations (a policy of another game would run and report a "
        f"meaningless score); re-export it with ccvl_tf.policies.export_policy, which writes "
        f"the spec file")
  if num_actions is not None and "num_actions" in meta and meta["num_actions"] != num_actions:
    raise ValueError(
        f"the policy in {policy_dir!r} has {meta['num_actions']} actions but the game has "
        f"{num_actions}: it was exported for another game")
  if (observation_shape is not None and "observation_shape" in meta
      and tuple(meta["observation_shape"]) != tuple(observation_shape)):
    raise ValueError(
        f"the policy in {policy_dir!r} expects observations of shape "
        f"{meta['observation_shape']} but the environment gives {tuple(observation_shape)}")
  # A plain PolicySaver export also serializes distribution(), whose TFP type specs must be
  # registered before loading: importing TFP does that.
  import tensorflow_probability  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  try:
    saved = tf.saved_model.load(policy_dir)
  except Exception as e:  # pylint: disable=broad-except
    raise ValueError(f"could not load the SavedModel in {policy_dir!r}: {e}") from e
  for attr in ("action", "get_initial_state"):
    if not hasattr(saved, attr):
      raise ValueError(f"the SavedModel in {policy_dir!r} has no '{attr}' function: not a "
                       "TF-Agents policy export")
  return saved, meta


# ------------------------------------------------------------------------------ outputs
def iqm(values) -> float:
  """Interquartile mean of a flat sample (rliable's aggregate_iqm: 25% trimmed mean)."""
  _, metrics = _import_rliable()
  return float(metrics.aggregate_iqm(np.asarray(values, np.float64).reshape(-1, 1)))


def summarize(records: Sequence[EpisodeRecord], normalize: Callable[[np.ndarray], np.ndarray],
              reps: int = 2000, seed: int = 0) -> dict:
  """summary.json content: raw/normalized mean, per-run means, IQM over runs with 95% CI."""
  runs = sorted({r.run for r in records})
  raw = np.array([r.raw_score for r in records])
  norm = np.asarray(normalize(raw), np.float64)
  per_run = np.array([[norm[[i for i, r in enumerate(records) if r.run == run]].mean()]
                      for run in runs])  # [num_runs, 1]
  agg = aggregate_scores(per_run, reps=reps, seed=seed)
  return {
      "num_runs": len(runs),
      "num_episodes": len(records),
      "raw_return_mean": float(raw.mean()),
      "normalized_mean": float(norm.mean()),
      "normalized_per_run_mean": per_run[:, 0].tolist(),
      "normalized_iqm": agg["iqm"].value,
      "normalized_iqm_ci95": [agg["iqm"].ci_low, agg["iqm"].ci_high],
      "normalized_mean_ci95": [agg["mean"].ci_low, agg["mean"].ci_high],
      "normalized_episode_iqm": iqm(norm),
      "note": ("IQM and stratified bootstrap CI (rliable) over runs of the per-run mean "
               "normalized score; with one run the CI is the point estimate."),
  }


def write_returns_csv(path: str, records: Sequence[EpisodeRecord], normalized) -> None:
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["run", "episode", "length", "return", "raw_score", "normalized_score"])
    for rec, n in zip(records, normalized):
      w.writerow([rec.run, rec.episode, rec.length, f"{rec.return_:.6g}",
                  f"{rec.raw_score:.6g}", f"{float(n):.6g}"])


def write_delta_csv(path: str, records: Sequence[EpisodeRecord]) -> None:
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["run", "episode", "delta_mean", "delta_first", "delta_last", "map_delta"])
    for rec in records:
      d = rec.deltas
      vals = (np.mean(d), d[0], d[-1]) if d else (math.nan,) * 3
      w.writerow([rec.run, rec.episode] + [f"{v:.6g}" for v in (*vals, rec.map_delta)])


def plot_runs(path: str, records: Sequence[EpisodeRecord], values, ylabel: str,
              title: str) -> None:
  """One line per run: `values` (aligned with records) against the episode index."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(6, 3.5))
  values = np.asarray(values, np.float64)
  for run in sorted({r.run for r in records}):
    idx = [i for i, r in enumerate(records) if r.run == run]
    ax.plot([records[i].episode for i in idx], values[idx], marker=".", label=f"seed {run}")
  ax.set_xlabel("episode")
  ax.set_ylabel(ylabel)
  ax.set_title(title)
  ax.grid(alpha=0.3)
  if len({r.run for r in records}) <= 10:
    ax.legend(fontsize="small")
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


# ------------------------------------------------------------------------------ evaluate a policy
@dataclasses.dataclass
class EvalEnv:
  """An evaluation environment and how to score and normalize its episodes."""
  env: object
  raw_score_fn: Optional[Callable[[object], Optional[float]]]
  normalize: Optional[Callable[[np.ndarray], np.ndarray]]  # None: no reference scores
  score_name: str


def make_eval_env(game: str, seed: int, max_episode_steps: Optional[int] = None) -> EvalEnv:
  """'gridworld' (evaluation slip 0.15) or an Atari game (ccvl_tf.envs.atari).

  Gridworld episodes are scored by their discounted return and normalized by the optimal
  policy's expected discounted return (x100), as the paper's gridworld figure. Atari episodes
  are scored by the raw (unclipped) game score, normalized against random and Nature DQN.
  """
  if game.lower() == GRIDWORLD:
    from ccvl_tf.tabular import evaluation as tabular_eval  # pylint: disable=g-import-not-at-top
    env = gridworld_environment(seed=seed)
    if max_episode_steps is not None:
      env.world = dataclasses.replace(env.world, horizon=int(max_episode_steps))
    optimum = tabular_eval.optimal_return(env.world)
    return EvalEnv(env, lambda e: e.get_info()["episode_discounted_return"],
                   lambda x: 100.0 * np.asarray(x, np.float64) / optimum,
                   "discounted return")
  from ccvl_tf.envs import atari  # pylint: disable=g-import-not-at-top
  atari.check_game(game)  # ValueError listing the valid names
  kwargs = {} if max_episode_steps is None else {"max_episode_steps": int(max_episode_steps)}
  env = atari.make_env(game, seed=seed, **kwargs)
  try:
    normalized_score(env.game, 0.0)
    normalize = lambda x: normalized_score(env.game, x)  # noqa: E731
  except ValueError:
    normalize = None
  return EvalEnv(env, lambda e: e.get_info()["episode_raw_return"], normalize, "game score")


def evaluate(policy_dir: str, game: str, episodes: int, seeds: int, output_dir: str, *,
             epsilon: float = 0.001, first_seed: int = 0, max_episode_steps: Optional[int] = None,
             bootstrap_reps: int = 2000, method: str = "policy", dataset: str = "",
             progress: bool = True) -> dict:
  """Runs an exported policy for `seeds` runs x `episodes` episodes and writes the outputs.

  Each run r uses seed first_seed + r for the environment, the epsilon RNG and the policy's delta
  sampler, and one policy state carried across all its episodes.

  Writes to output_dir: returns.csv (per episode: raw and normalized), delta.csv (per episode:
  mean/first/last delta acted under and the belief's argmax at the episode's end), summary.json
  (mean, IQM over runs and 95% stratified bootstrap CI), results.csv (one row per run in the
  format of `read_results_csv`), returns.png and delta.png. Returns the summary dict.
  """
  import json  # pylint: disable=g-import-not-at-top
  if int(episodes) != episodes or episodes < 1:
    raise ValueError(f"--episodes must be an integer >= 1, got {episodes!r}")
  if int(seeds) != seeds or seeds < 1:
    raise ValueError(f"--seeds must be an integer >= 1, got {seeds!r}")
  if not 0.0 <= epsilon <= 1.0:
    raise ValueError(f"--epsilon must be in [0, 1], got {epsilon!r}")
  check_saved_model_dir(policy_dir)  # before anything slow
  probe = make_eval_env(game, first_seed, max_episode_steps)
  action_spec = probe.env.action_spec()
  saved, meta = load_saved_policy(
      policy_dir, num_actions=int(action_spec.maximum) - int(action_spec.minimum) + 1,
      observation_shape=probe.env.observation_spec().shape)
  os.makedirs(output_dir, exist_ok=True)

  bar = None
  if progress:
    from tqdm import tqdm  # pylint: disable=g-import-not-at-top
    bar = tqdm(total=episodes * seeds, desc=f"evaluate {game}", unit="episode",
               file=sys.stderr, dynamic_ncols=True)
  records: List[EpisodeRecord] = []
  try:
    for run in range(seeds):
      seed = first_seed + run
      ev = probe if run == 0 else make_eval_env(game, seed, max_episode_steps)

      def on_episode(rec, run=run):
        if bar is not None:
          d = f"{np.mean(rec.deltas):.3f}" if rec.deltas else "-"
          bar.set_postfix_str(f"seed {run} ep {rec.episode} return {rec.raw_score:.4g} "
                              f"delta {d}")
          bar.update(1)

      def on_step(ep_steps, total, run=run):
        if bar is not None and ep_steps % 1000 == 0:  # long Atari episodes
          bar.set_postfix_str(f"seed {run} episode step {ep_steps}")

      records += run_episodes(saved, ev.env, episodes, run=run, epsilon=epsilon, seed=seed,
                              raw_score_fn=ev.raw_score_fn, on_episode=on_episode,
                              on_step=on_step)
  finally:
    if bar is not None:
      bar.close()

  raw = np.array([r.raw_score for r in records])
  normalized = (probe.normalize(raw) if probe.normalize is not None
                else np.full(raw.shape, np.nan))
  write_returns_csv(os.path.join(output_dir, "returns.csv"), records, normalized)
  write_delta_csv(os.path.join(output_dir, "delta.csv"), records)
  with open(os.path.join(output_dir, "results.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(RESULTS_COLUMNS)
    for run in range(seeds):
      w.writerow([method, dataset, getattr(probe.env, "game", game), first_seed + run,
                  f"{raw[[i for i, r in enumerate(records) if r.run == run]].mean():.6g}"])
  if probe.normalize is not None:
    summary = summarize(records, probe.normalize, reps=bootstrap_reps, seed=first_seed)
  else:
    summary = {"num_runs": seeds, "num_episodes": len(records),
               "raw_return_mean": float(raw.mean()),
               "note": f"no reference scores for {game!r}: normalized scores not computed"}
  summary.update({
      "game": getattr(probe.env, "game", game), "policy_dir": os.path.abspath(policy_dir),
      "episodes_per_run": episodes, "seeds": [first_seed + r for r in range(seeds)],
      "epsilon": epsilon, "score": probe.score_name, "policy_specs": {
          k: list(v) if isinstance(v, tuple) else v for k, v in meta.items()},
      "raw_iqm_over_episodes": iqm(raw),
  })
  deltas = [np.mean(r.deltas) if r.deltas else np.nan for r in records]
  if any(np.isfinite(deltas)):
    summary["delta_mean"] = float(np.nanmean(deltas))
  with open(os.path.join(output_dir, "summary.json"), "w") as f:
    json.dump(summary, f, indent=2, sort_keys=True)
  plot_runs(os.path.join(output_dir, "returns.png"), records,
            normalized if probe.normalize is not None else raw,
            "normalized score" if probe.normalize is not None else probe.score_name,
            f"{summary['game']}: per-episode score")
  plot_runs(os.path.join(output_dir, "delta.png"), records, deltas,
            "mean delta acted under", f"{summary['game']}: delta per episode")
  return summary
