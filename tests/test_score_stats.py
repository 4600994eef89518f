"""score_stats' IQM and probability of improvement are rliable's metrics bit for bit (they only
skip scipy's per-call argument handling), checked against rliable itself and by hand; the CIs
built on them equal the CIs built on rliable's own functions with the same seed."""
import numpy as np
import pytest
from rliable import library, metrics

from ccvl_tf.evaluation import score_stats


def _cases():
  rng = np.random.default_rng(0)
  yield rng.normal(size=(1, 1))
  yield rng.normal(size=(3, 5))
  yield rng.normal(size=(10, 1)) * 1e6
  yield rng.integers(0, 4, size=(7, 3)).astype(np.float64)  # many ties
  yield rng.exponential(size=(5, 17))


@pytest.mark.parametrize("scores", list(_cases()))
def test_iqm_is_rliables_bit_for_bit(scores):
  assert score_stats.rliable_iqm(scores) == metrics.aggregate_iqm(scores)
  assert score_stats.rliable_iqm(scores.T) == metrics.aggregate_iqm(scores.T)


def test_iqm_by_hand():
  # 8 values: int(8 / 4) = 2 dropped at each end, the mean of 3, 4, 5, 6.
  assert score_stats.rliable_iqm(np.array([[8.0, 1.0], [3.0, 7.0], [2.0, 5.0], [6.0, 4.0]])) == 4.5
  # 3 values: int(0.75) = 0 dropped: the plain mean.
  assert score_stats.rliable_iqm(np.array([[1.0], [2.0], [6.0]])) == 3.0
  assert np.isnan(score_stats.rliable_iqm(np.array([[1.0], [np.nan]])))
  assert np.isnan(metrics.aggregate_iqm(np.array([[1.0], [np.nan]])))


def test_probability_of_improvement_by_hand():
  # x = 1, 3, 2 against y = 2, 0: the pairs (1,2) 0, (1,0) 1, (3,2) 1, (3,0) 1, (2,2) 1/2,
  # (2,0) 1: 4.5 of 6. A second game with equal columns counts 0.5: (0.75 + 0.5) / 2.
  x = np.array([[1.0, 5.0], [3.0, 5.0], [2.0, 5.0]])
  y = np.array([[2.0, 5.0], [0.0, 5.0]])
  assert score_stats.rliable_probability_of_improvement(x[:, :1], y[:, :1]) == 0.75
  x2 = np.array([[1.0, 5.0], [3.0, 6.0]])
  y2 = np.array([[2.0, 5.0], [0.0, 6.0]])
  assert score_stats.rliable_probability_of_improvement(x2, y2) == (0.75 + 0.5) / 2
  assert metrics.probability_of_improvement(x2, y2) == (0.75 + 0.5) / 2


def test_probability_of_improvement_is_rliables_bit_for_bit():
  rng = np.random.default_rng(1)
  for nx, ny, games in ((1, 1, 1), (3, 5, 2), (5, 5, 4), (10, 3, 17)):
    for draw in (lambda n: rng.normal(size=(n, games)),
                 lambda n: rng.integers(0, 3, size=(n, games)).astype(np.float64)):
      x, y = draw(nx), draw(ny)
      assert (score_stats.rliable_probability_of_improvement(x, y)
              == metrics.probability_of_improvement(x, y)), (x, y)
  same = rng.normal(size=(4, 3))
  assert score_stats.rliable_probability_of_improvement(same, same.copy()) == 0.5


def _rliable_interval(scores, func, reps, seed):
  state = np.random.get_state()
  np.random.seed(seed)
  try:
    points, intervals = library.get_interval_estimates({"m": scores}, func, reps=reps)
  finally:
    np.random.set_state(state)
  return points["m"], intervals["m"]


def test_the_cis_equal_those_of_rliables_own_functions():
  rng = np.random.default_rng(2)
  scores = rng.normal(size=(5, 3))
  agg = score_stats.aggregate_scores(scores, reps=300, seed=7)
  own = lambda s: np.array([metrics.aggregate_iqm(s), metrics.aggregate_mean(s),  # noqa: E731
                            metrics.aggregate_median(s)])
  point, interval = _rliable_interval(scores, own, 300, 7)
  for i, name in enumerate(("iqm", "mean", "median")):
    assert (agg[name].value, agg[name].ci_low, agg[name].ci_high) == (
        point[i], interval[0, i], interval[1, i]), name
  x, y = rng.normal(size=(4, 3)), rng.normal(size=(5, 3)) + 0.3
  p = score_stats.probability_of_improvement(x, y, reps=300, seed=3)
  point, interval = _rliable_interval((x, y), metrics.probability_of_improvement, 300, 3)
  assert (p.value, p.ci_low, p.ci_high) == (float(np.ravel(point)[0]),
                                            float(np.ravel(interval)[0]),
                                            float(np.ravel(interval)[1]))
