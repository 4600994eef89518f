"""The exact references of the gridworld bounds: growing tabular counts, the tabular
bonus bounds (Eq. update / Eq. upper update with state counts) on a chain solved by hand, and
the coverage report (ccvl_tf/experiments/gridworld_bounds.py) on hand-made tables."""
import math

import ccvl_tf  # noqa: F401

import numpy as np
import pytest

from ccvl_tf.algorithm import belief
from ccvl_tf.algorithm import counts as counts_lib
from ccvl_tf.tabular import gridworld
from ccvl_tf.experiments.gridworld import bounds as gb
from ccvl_tf.tabular import dataset as tds
from ccvl_tf.tabular import learners


def test_growing_exact_counts_by_hand():
  """States [0, 0, 1] of S = 3: n = [2, 1, 0], n^-1 = 1 / max(n, 1) = [0.5, 1, 1]; adding
  one-hot states [1, 2, 2] with weight 0.5 (1 / SPI): n = [2, 1.5, 1], n^-1 = [0.5, 2/3, 1]."""
  c = counts_lib.GrowingExactCounts(np.array([0, 0, 1]), 3)
  eye = np.eye(3, dtype=np.float32)
  np.testing.assert_allclose(c.inverse_count_one_hot(eye).numpy(), [0.5, 1.0, 1.0])
  c.add_one_hot(eye[[1, 2, 2]], 0.5)
  np.testing.assert_allclose(c.counts.numpy(), [2.0, 1.5, 1.0])
  np.testing.assert_allclose(c.inverse_count(np.array([0, 1, 2])).numpy(), [0.5, 2 / 3, 1.0],
                             rtol=1e-6)
  with pytest.raises(ValueError, match="states must lie in"):
    counts_lib.GrowingExactCounts(np.array([3]), 3)


def _chain_data(pairs, n):
  """The chain of tests/test_bounds_fixed_points.py as tabular transitions (state 2 = the end,
  after s1 --go-->, terminal): s0 stay -> s0, s0 go -> s1, s1 stay -> s1, s1 go -> end (r 1);
  each (s, a) of `pairs` n times."""
  nxt = {(0, 0): (0, 0.0, 0.0), (0, 1): (1, 0.0, 0.0), (1, 0): (1, 0.0, 0.0),
         (1, 1): (2, 1.0, 1.0)}
  rows = [(s, a) + nxt[(s, a)] for s, a in pairs for _ in range(n)]
  s, a, s2, r, t = (np.array(x) for x in zip(*rows))
  return tds.Transitions(s, a, r.astype(np.float32), s2, t.astype(np.float32))


def test_tabular_bonus_bounds_with_state_counts_on_the_chain():
  """n(s0) = n(s1) = 2 * 100 (both actions 100 times), alpha 0.5, gamma 0.9, delta 0.3:
  w = 0.5 sqrt(log(1/0.3) / 200) = 0.0388 at both states, and (w <= 1 - gamma)
    Q_l = [[g(g(1-w)-w)-w, g(1-w)-w], [g(1-w)-w, 1-w]],  Q_u the same with +w;
  with value_max = 1, Q_u(s1, go) = 1, Q_u(s1, stay) = Q_u(s0, go) = g + w,
  Q_u(s0, stay) = g (g + w) + w. The state-count option uses n(s) (200), not n(s, a) (100)."""
  g, delta, alpha = 0.9, 0.3, 0.5
  data = _chain_data([(0, 0), (0, 1), (1, 0), (1, 1)], 100)
  model = learners.empirical_model(data, 3, 2)
  n_s = model.n_s[:, None]
  w = alpha * math.sqrt(math.log(1 / delta) / 200)
  lower = learners.ccvl_bonus_q(model, g, alpha, [delta], counts=n_s)[0]
  np.testing.assert_allclose(lower[:2], [[g * (g * (1 - w) - w) - w, g * (1 - w) - w],
                                         [g * (1 - w) - w, 1 - w]], atol=1e-7)
  upper = learners.ccvl_upper_bonus_q(model, g, alpha, [delta], 10.0, counts=n_s)[0]
  np.testing.assert_allclose(upper[:2], [[g * (g * (1 + w) + w) + w, g * (1 + w) + w],
                                         [g * (1 + w) + w, 1 + w]], atol=1e-7)
  capped = learners.ccvl_upper_bonus_q(model, g, alpha, [delta], 1.0, counts=n_s)[0]
  np.testing.assert_allclose(capped[:2], [[g * (g + w) + w, g + w], [g + w, 1.0]], atol=1e-7)
  # The default bonus counts are n(s, a) = 100: a larger bonus.
  w_sa = alpha * math.sqrt(math.log(1 / delta) / 100)
  np.testing.assert_allclose(learners.ccvl_bonus_q(model, g, alpha, [delta])[0][1, 1],
                             1 - w_sa, atol=1e-7)


def test_tabular_upper_bound_gives_unseen_pairs_the_largest_return():
  """(s0, stay) never in the data: Q_u = value_max there (the optimistic prior; Q_l gets the
  pessimistic prior 0 minus the bonus), and the deltas' order is Lemma 1's, mirrored: Q_u
  nonincreasing and Q_l nondecreasing in delta."""
  data = _chain_data([(0, 1), (1, 0), (1, 1)], 50)
  model = learners.empirical_model(data, 3, 2)
  grid = [0.1, 0.5, 0.9]
  upper = learners.ccvl_upper_bonus_q(model, 0.9, 0.5, grid, 2.0, counts=model.n_s[:, None])
  lower = learners.ccvl_bonus_q(model, 0.9, 0.5, grid, counts=model.n_s[:, None])
  np.testing.assert_allclose(upper[:, 0, 0], 2.0)
  w0 = 0.5 * np.sqrt(np.log(1 / np.array(grid)) / 50)
  np.testing.assert_allclose(lower[:, 0, 0], -w0, atol=1e-9)
  assert np.all(np.diff(upper, axis=0) <= 1e-12) and np.all(np.diff(lower, axis=0) >= -1e-12)
  with pytest.raises(ValueError, match="value_max must be finite"):
    learners.ccvl_upper_bonus_q(model, 0.9, 0.5, grid, np.inf)


def test_coverage_rows_by_hand():
  """S = 2, A = 2, pairs visited: (0, 0), (0, 1), (1, 0). Q* = [[0.5, 1.0], [0.2, 0.0]].
  delta 0.25: Q_l = [[0.4, 1.1], [0.1, 9]] -> Q_l <= Q* at 2 of 3 pairs, mean gap
  (-0.1 + 0.1 - 0.1) / 3; Q_u = [[0.6, 0.9], [0.3, -9]] -> 2 of 3, mean (0.1 - 0.1 + 0.1) / 3.
  V_l = [1.1, 9] vs V* = [1, 0.2]: 0 of 2 states; V_u = [0.9, 0.3]: 1 of 2.
  Tabular bounds Q_l^tab = Q* - 0.2, Q_u^tab = Q* + 0.3: hold at 3 of 3, learner minus tabular
  = gap + 0.2 (lower) and gap - 0.3 (upper). delta 0.75: Q_l = Q_u = Q*: all hold, gaps 0."""
  q_star = np.array([[0.5, 1.0], [0.2, 0.0]])
  refs = {"q_star": q_star, "visited": np.array([[True, True], [True, False]]),
          "lower": np.stack([q_star - 0.2] * 2), "upper": np.stack([q_star + 0.3] * 2)}
  q_l = np.stack([[[0.4, 1.1], [0.1, 9.0]], q_star])
  q_u = np.stack([[[0.6, 0.9], [0.3, -9.0]], q_star])
  rows = gb.coverage_rows(q_l, q_u, refs, [0.25, 0.75])
  r = rows[0]
  assert r["pairs"] == 3 and r["target"] == 0.75
  np.testing.assert_allclose([r["lower_holds"], r["upper_holds"]], [2 / 3, 2 / 3])
  np.testing.assert_allclose([r["lower_gap"], r["upper_gap"]], [-0.1 / 3, 0.1 / 3])
  np.testing.assert_allclose([r["v_lower_holds"], r["v_upper_holds"]], [0.0, 0.5])
  np.testing.assert_allclose([r["tabular_lower_holds"], r["tabular_upper_holds"]], [1.0, 1.0])
  np.testing.assert_allclose([r["lower_minus_tabular"], r["upper_minus_tabular"]],
                             [-0.1 / 3 + 0.2, 0.1 / 3 - 0.3])
  np.testing.assert_allclose([r["tabular_lower_gap"], r["tabular_upper_gap"]], [-0.2, 0.3])
  r = rows[1]
  assert r["lower_holds"] == r["upper_holds"] == r["v_lower_holds"] == r["v_upper_holds"] == 1.0
  assert r["lower_gap"] == r["upper_gap"] == 0.0
  assert gb.coverage_met(rows) == {"lower": False, "upper": False}
  assert gb.coverage_met(rows[1:]) == {"lower": True, "upper": True}
  flat = gb.flat_metrics(rows, "bounds")
  assert flat["bounds/lower_holds@0.25"] == pytest.approx(2 / 3) and "bounds/delta@0.25" not in flat
  lower_only = gb.coverage_rows(q_l, None, refs, [0.25, 0.75])
  assert "upper_holds" not in lower_only[0] and gb.coverage_met(lower_only) == {"lower": False}
  with pytest.raises(ValueError, match="no visited"):
    gb.coverage_rows(q_l, q_u, dict(refs, visited=np.zeros((2, 2), bool)), [0.25, 0.75])


def test_markdown_table_and_plot(tmp_path):
  q_star = np.array([[0.5, 1.0], [0.2, 0.0]])
  refs = {"q_star": q_star, "visited": np.ones((2, 2), bool),
          "lower": np.stack([q_star - 0.2]), "upper": np.stack([q_star + 0.3])}
  rows = gb.coverage_rows(np.stack([q_star - 0.1]), np.stack([q_star + 0.1]), refs, [0.5])
  table = gb.markdown_table(rows, "offline start")
  assert table.splitlines()[0] == "### offline start"
  assert "| 0.5 | 0.500 | 1.000 | 1.000 | -0.100 | +0.100 | +0.100 | -0.200 |" in table
  path = str(tmp_path / "bounds.png")
  gb.plot({"offline start": rows, "after fine-tuning": rows}, path)
  assert (tmp_path / "bounds.png").stat().st_size > 1000


def test_references_on_the_gridworld_data():
  """The paper's dataset: Q* of the p = 0.3 world, the tabular bounds at the 8 grid deltas with
  n(s) = the dataset's state counts; Q_l^tab <= Q_u^tab <= 1 everywhere, and the visited pairs
  are the dataset's 141."""
  data = tds.make_gridworld_dataset(seed=0)
  refs = gb.references(data, gridworld.GridWorld(), belief.delta_grid(8), alpha=0.2)
  assert refs["visited"].sum() == 141 and refs["counts"].sum() == 2500
  assert np.all(refs["lower"] <= refs["upper"] + 1e-12) and refs["upper"].max() <= 1.0
  with pytest.raises(ValueError, match="counts must have shape"):
    gb.references(data, gridworld.GridWorld(), [0.5], 0.2, counts=np.ones(3))


@pytest.mark.slow
def test_offline_gridworld_bounds_hold_at_every_grid_delta(tmp_path):
  """README's offline step (online_start.train_offline_gridworld, 1500 steps, deterministic on CPU;
  ~10 s): the neural Q_l <= Q* and Q_u >= Q* at >= 1 - delta of the dataset's 141 pairs at each
  of the 8 grid deltas (measured: Q_l 0.65-1.00, Q_u 0.965-1.00), with mean gaps to Q* within
  0.5 and to the tabular bounds within 0.2 (measured 0.46 and 0.14)."""
  from ccvl_tf.experiments.online import config as online_config
  from ccvl_tf.experiments.online import start as online_start
  from ccvl_tf.experiments.online import scores_and_bounds as online_eval
  root = str(tmp_path / "offline")
  online_start.train_offline_gridworld(root, num_steps=1500, seed=0, log=lambda s: None)
  cfg = online_config.OnlineConfig(game="gridworld")
  agent = online_config.build_agent("gridworld", *online_config.specs("gridworld"), cfg.bounds(),
                                    alpha=0.2)
  online_start.restore_offline(agent, root, log=lambda s: None)
  rows = online_eval.gridworld_bounds_report(cfg, agent, 0.2, tds.make_gridworld_dataset(seed=0),
                                             gridworld.GridWorld())
  assert gb.coverage_met(rows) == {"lower": True, "upper": True}, rows
  assert all(r["pairs"] == 141 for r in rows)
  for r in rows:
    assert abs(r["lower_gap"]) < 0.5 and abs(r["upper_gap"]) < 0.5, r
    assert abs(r["lower_minus_tabular"]) < 0.2 and abs(r["upper_minus_tabular"]) < 0.2, r


def test_transition_log_round_trip_and_resume_cut(tmp_path):
  """Two batches (steps 5 and 6) of one-hot rows become integer transitions; saved and reloaded
  at resume step 5, only step 5's rows are kept."""
  from ccvl_tf.experiments.online import bounds as online_bounds
  eye = np.eye(4, dtype=np.float32)
  path = str(tmp_path / "log.npz")
  log = online_bounds.TransitionLog(path, None)
  assert log.as_transitions() is None
  log.add(dict(observation=eye[[0, 1]], next_observation=eye[[1, 2]], action=np.array([1, 2]),
               reward=np.array([0.0, 1.0]), terminal=np.array([0.0, 1.0])), step=5)
  log.add(dict(observation=eye[[3]], next_observation=eye[[3]], action=np.array([0]),
               reward=np.array([0.0]), terminal=np.array([0.0])), step=6)
  tr = log.as_transitions()
  np.testing.assert_array_equal(tr.state, [0, 1, 3])
  np.testing.assert_array_equal(tr.next_state, [1, 2, 3])
  np.testing.assert_array_equal(tr.terminal, [0, 1, 0])
  log.save()
  resumed = online_bounds.TransitionLog(path, resume_step=5).as_transitions()
  np.testing.assert_array_equal(resumed.state, [0, 1])
  np.testing.assert_array_equal(resumed.reward, [0.0, 1.0])
  with pytest.raises(ValueError, match="phase must be"):
    online_bounds.report_phase(None, None, 0.2, np.ones(4), log, "later", 0, print)
