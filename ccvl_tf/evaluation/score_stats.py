"""Statistics of evaluation scores with rliable: IQM, mean and median with stratified
bootstrap CIs, the probability of improvement, and a run's summary.json numbers.

The evaluation protocol (paper Sec. "Offline Training on Atari", Agarwal et al. 2021):
docs/policies.md "Evaluation".
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Sequence

import numpy as np


# ------------------------------------------------------------------------------ rliable
def _import_rliable():
  """Imports rliable's `library` and `metrics` (IQM, stratified bootstrap CIs).

  rliable imports `arch`, whose 7.x releases fail to import with pandas 3 (a `deprecate_kwarg`
  TypeError); requirements.txt pins pandas < 3 for that reason (BUILD.md, troubleshooting).
  """
  try:
    # Here: rliable (~1.2 s to import) only for the bootstrap CIs.
    from rliable import library, metrics  # pylint: disable=g-import-not-at-top
  except TypeError as e:
    raise ImportError(
        f"rliable failed to import ({e}); with arch 7.x this means pandas >= 3 is installed. "
        f"Install the pinned versions: pip install -r requirements.txt (pandas==2.3.3).") from e
  return library, metrics


# ------------------------------------------- rliable's metrics, without scipy's per-call cost
# The bootstrap calls its statistic once per resample (reps x, e.g. 2,000), and rliable's IQM
# and probability of improvement go through scipy functions whose argument handling costs
# 0.2-0.9 ms per call, most of a results table's time. The two below compute the same numbers
# with the same numpy operations (tests/test_score_stats.py checks them equal to rliable's, bit
# for bit); the resampling and the intervals stay rliable's.

def rliable_iqm(scores) -> float:
  """rliable's metrics.aggregate_iqm: scipy.stats.trim_mean(scores, 0.25, axis=None), the mean
  of the flattened scores without the lowest and highest int(n/4) (the same np.partition and
  np.mean scipy runs). NaN if any score is NaN (scipy's default 'propagate')."""
  flat = np.ravel(np.asarray(scores))                             # [runs * games]
  if flat.size == 0 or np.isnan(flat).any():
    return np.float64(np.nan)
  low = int(0.25 * flat.size)
  high = flat.size - low
  return np.mean(np.partition(flat, (low, high - 1))[low:high])


def rliable_probability_of_improvement(scores_x, scores_y) -> float:
  """rliable's metrics.probability_of_improvement: per game (column) the Mann-Whitney U of x
  over y divided by nx * ny, i.e. the share of (x run, y run) pairs with x > y, a tie counting
  1/2 (0.5 where both columns are equal), averaged over games. The pair count is the U
  statistic scipy.stats.mannwhitneyu returns (exactly: both are multiples of 1/2)."""
  x, y = np.asarray(scores_x), np.asarray(scores_y)               # [nx, G], [ny, G]
  nx, ny = x.shape[0], y.shape[0]
  greater = (x[:, None, :] > y[None, :, :]).sum(axis=(0, 1))      # [nx, ny, G] -> [G]
  ties = (x[:, None, :] == y[None, :, :]).sum(axis=(0, 1))        # [G]
  probabilities = []
  for g in range(x.shape[1]):
    if np.array_equal(x[:, g], y[:, g]):
      probabilities.append(0.5)
    else:
      probabilities.append((greater[g] + 0.5 * ties[g]) / (nx * ny))
  return np.mean(probabilities)


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
  funcs = {"iqm": rliable_iqm, "mean": metrics.aggregate_mean,
           "median": metrics.aggregate_median}
  aggregate_func = lambda x: np.array([f(x) for f in funcs.values()])  # noqa: E731
  if np.all(scores == scores[0]):
    # Every run equal within each game: a stratified resample (runs drawn within each game)
    # is the matrix itself, so every bootstrap statistic is the point estimate and rliable's
    # percentile interval is [point, point]. The same numbers without the reps x 3 metric
    # calls (about 0.6 s at 2,000 reps; a short run's table of one episode per policy).
    point = aggregate_func(scores)  # [3]
    interval = np.stack([point, point])  # [2, 3]
  else:
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
  point, interval = _seeded_interval_estimates((x, y), rliable_probability_of_improvement,
                                               reps, seed, confidence)
  point, interval = np.ravel(point), np.reshape(interval, (2, -1))
  return Aggregate(float(point[0]), float(interval[0, 0]), float(interval[1, 0]))


def iqm(values) -> float:
  """Interquartile mean of a flat sample (rliable's aggregate_iqm: 25% trimmed mean)."""
  return float(rliable_iqm(np.asarray(values, np.float64).reshape(-1, 1)))


def summarize(records: Sequence, normalize: Callable[[np.ndarray], np.ndarray],
              reps: int = 2000, seed: int = 0) -> dict:
  """summary.json content of ccvl_tf.evaluation.rollouts.EpisodeRecords: raw/normalized mean,
  per-run means, IQM over runs with 95% CI."""
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
