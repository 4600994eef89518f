"""Evaluation: running policies for episodes, the statistics of their scores (IQM with
stratified bootstrap CIs, rliable) and loading exported policies.

Protocol (paper Sec. "Offline Training on Atari", following Agarwal et al. 2021, "Deep RL at the
Edge of the Statistical Precipice"):
  * normalized score = 100 * (score - random) / (DQN - random) (ccvl_tf.scores);
  * each run's score is the average return over its evaluation episodes (100 in the paper);
  * aggregate over runs x games with the interquartile mean (IQM), with 95% stratified bootstrap
    confidence intervals, computed with rliable (not re-implemented here).
CCVL adapts delta during evaluation; as in the paper, the average over *all* episodes of a run
is reported, including those before the belief has converged.

Here: `run_episodes`, the environment-independent evaluation loop for an exported (or
in-process) policy on any unbatched TF-Agents PyEnvironment (environments:
ccvl_tf.envs.factory.make_env), and `CompiledPolicy`, a policy whose action runs as one
tf.function; `aggregate_scores`, `iqm`, `summarize`; `load_saved_policy`. Elsewhere: reference
scores in ccvl_tf/scores.py, tables / CSV / plots in ccvl_tf/reporting.py, the body of
binaries/evaluate.py in ccvl_tf/experiments/evaluate.py.
"""
from __future__ import annotations

import dataclasses
import math
import os
import warnings
from collections.abc import Mapping
from typing import Callable, Dict, List, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np


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


def _seeded_interval_estimates(scores, func, reps: int, seed: int, confidence: float):
  """rliable's get_interval_estimates for one entry (a score matrix, or an (x, y) pair for
  pairwise metrics): (point, interval). rliable draws its resampling indices from numpy's
  *global* RNG (`np.random.choice`), not from `random_state`, so the global state is seeded
  for the call and restored afterwards; random_state is left None (StratifiedBootstrap ignores
  it for resampling, and passing it only triggers arch's deprecation warning)."""
  library, _ = _import_rliable()
  saved = np.random.get_state()
  try:
    np.random.seed(seed)
    points, intervals = library.get_interval_estimates(
        {"m": scores}, func, reps=reps, confidence_interval_size=confidence)
  finally:
    np.random.set_state(saved)
  return points["m"], intervals["m"]


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
  _, metrics = _import_rliable()
  funcs = {"iqm": metrics.aggregate_iqm, "mean": metrics.aggregate_mean,
           "median": metrics.aggregate_median}
  aggregate_func = lambda x: np.array([f(x) for f in funcs.values()])  # noqa: E731
  point, interval = _seeded_interval_estimates(scores, aggregate_func, reps, seed,
                                               confidence)  # [3], [2, 3]
  return {name: Aggregate(float(point[i]), float(interval[0, i]), float(interval[1, i]))
          for i, name in enumerate(funcs)}


def probability_of_improvement(scores_x, scores_y, reps: int = 2000, seed: int = 0,
                               confidence: float = 0.95) -> Aggregate:
  """P(X > Y): rliable's probability of improvement of method X over method Y (per game the
  Mann-Whitney statistic, the share of run pairs with x > y, ties counting 1/2; averaged over
  games), with a stratified bootstrap CI. 0.5: neither is better.

  Args:
    scores_x, scores_y: normalized scores [num_runs, num_games] of the two methods (same games,
      in the same column order).
    reps, seed, confidence: as aggregate_scores (the global numpy RNG is seeded for the call
      and restored).
  """
  x, y = np.asarray(scores_x, np.float64), np.asarray(scores_y, np.float64)
  if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1] or x.size == 0 or y.size == 0:
    raise ValueError(f"scores_x and scores_y must be [num_runs, num_games] with the same "
                     f"games, got shapes {x.shape} and {y.shape}")
  _, metrics = _import_rliable()
  point, interval = _seeded_interval_estimates((x, y), metrics.probability_of_improvement,
                                               reps, seed, confidence)
  point, interval = np.ravel(point), np.reshape(interval, (2, -1))
  return Aggregate(float(point[0]), float(interval[0, 0]), float(interval[1, 0]))


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
  """The log-belief [K] in a batch-1 policy state (None for a policy without one)."""
  if isinstance(state, Mapping) and "log_belief" in state:
    return np.asarray(state["log_belief"])[0]
  return None


def _initial_state(policy, seed: int):
  """The policy's batch-1 initial state, its delta sampler ('rng' entry) seeded with `seed`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  state = policy.get_initial_state(batch_size=1)
  if isinstance(state, Mapping):
    state = dict(state)
    if "rng" in state:  # per-run seed of the delta sampler
      r = np.asarray(state["rng"]).copy()
      r[:, 0] = seed
      state["rng"] = tf.constant(r, tf.int64)
  return state


def _delta_of(step) -> Optional[float]:
  """The delta a PolicyStep acted under (its info's 'delta'), None if it reports none."""
  info = getattr(step, "info", None)
  delta = getattr(info, "delta", None)
  if delta is None and isinstance(info, Mapping):
    delta = info.get("delta")
  return None if delta is None else float(np.asarray(delta).reshape(-1)[0])


def run_episodes(policy, env, num_episodes: int, *, run: int = 0, epsilon: float = 0.0,
                 seed: int = 0, delta_grid: Optional[np.ndarray] = None,
                 raw_score_fn: Optional[Callable[[object], Optional[float]]] = None,
                 on_episode: Optional[Callable[[EpisodeRecord], None]] = None,
                 on_step: Optional[Callable[[int, int], None]] = None,
                 max_total_steps: Optional[int] = None) -> List[EpisodeRecord]:
  # Over 80 lines with its docstring: the loop is one state machine over the TimeSteps (score
  # the step, close the episode at LAST, act, explore), clearer read in one piece.
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

  state = _initial_state(policy, seed)
  log_b = _belief_of(state)
  if delta_grid is None and log_b is not None:
    delta_grid = belief.delta_grid(log_b.shape[-1])

  def batch1(x):
    return tf.constant(np.asarray(x)[np.newaxis])  # [...] -> [1, ...]

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
    delta = _delta_of(step)
    if delta is not None:
      ep_deltas.append(delta)
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


class CompiledPolicy:
  """A TF-Agents policy (or loaded SavedModel) whose `action` runs as one tf.function: what
  run_episodes calls once per step (traced once instead of running eagerly, ~5x faster)."""

  def __init__(self, policy):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    # AutoGraph's rewrite of TF-Agents' `state is not ()` checks triggers a harmless
    # SyntaxWarning when the generated code is compiled.
    warnings.filterwarnings("ignore", message=r'"is not" with a literal', category=SyntaxWarning)
    self.policy = policy
    self.action = tf.function(policy.action)
    self.get_initial_state = policy.get_initial_state


# ------------------------------------------------------------------------------ loading policies
def check_saved_model_dir(policy_dir: str) -> None:
  """Raises ValueError unless `policy_dir` is a directory holding a SavedModel (no TF import)."""
  from ccvl_tf import training  # pylint: disable=g-import-not-at-top
  training.check_input_dir(policy_dir, "--policy_dir", "an exported policy's SavedModel "
                           "directory")
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


