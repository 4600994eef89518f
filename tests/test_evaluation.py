"""Tests for ccvl_tf/evaluation/score_stats.py (rliable aggregation) and
ccvl_tf/evaluation/rollouts.py (the evaluation loop, loading exports; normalization:
tests/test_scores.py; tables: tests/test_reporting.py)."""
import math
import os

import ccvl_tf  # noqa: F401

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf
from tf_agents.environments import py_environment
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.algorithm import belief
from ccvl_tf.evaluation import rollouts, score_stats
from ccvl_tf.algorithm import policies
from ccvl_tf.tabular import gridworld
from ccvl_tf.envs import gridworld_env
from tests.test_policies import C3, W3, linear_q_model, specs


# ----------------------------------------------------------------------------- aggregation
SCORES = np.array([[10., 50., 90., 130.],
                   [20., 40., 100., 170.],
                   [0., 60., 80., 110.],
                   [30., 55., 95., 150.],
                   [5., 45., 85., 120.]])  # [5 runs, 4 games]


def _independent_stratified_bootstrap_iqm(scores, reps, rng):
  """Resample runs with replacement within each game (stratified), IQM of each resample."""
  n, m = scores.shape
  out = np.empty(reps)
  for i in range(reps):
    idx = rng.integers(0, n, size=(n, m))
    out[i] = scipy.stats.trim_mean(scores[idx, np.arange(m)].ravel(), 0.25)
  return np.percentile(out, [2.5, 97.5])


def test_aggregate_scores_against_independent_computation():
  agg = score_stats.aggregate_scores(SCORES, reps=2000, seed=0)
  # IQM: 25% trimmed mean of the 20 pooled scores (drops the 5 lowest and 5 highest).
  assert agg["iqm"].value == pytest.approx(scipy.stats.trim_mean(SCORES.ravel(), 0.25))
  # By hand: sorted middle 10 = 40 45 50 55 60 80 85 90 95 100 -> 700 / 10 = 70.
  assert agg["iqm"].value == pytest.approx(70.0)
  # Mean of per-game means: (13 + 50 + 90 + 136) / 4 = 72.25; median of them: (50+90)/2 = 70.
  assert agg["mean"].value == pytest.approx(72.25)
  assert agg["median"].value == pytest.approx(70.0)
  for a in agg.values():
    assert a.ci_low <= a.value <= a.ci_high and a.ci_low < a.ci_high
  lo, hi = _independent_stratified_bootstrap_iqm(SCORES, 4000, np.random.default_rng(123))
  width = hi - lo
  assert abs(agg["iqm"].ci_low - lo) < 0.15 * width
  assert abs(agg["iqm"].ci_high - hi) < 0.15 * width


def test_aggregate_scores_is_seeded_and_leaves_global_rng_alone():
  np.random.seed(99)
  before = np.random.get_state()[1].copy()
  a = score_stats.aggregate_scores(SCORES, reps=500, seed=1)
  assert np.array_equal(np.random.get_state()[1], before)
  b = score_stats.aggregate_scores(SCORES, reps=500, seed=1)
  c = score_stats.aggregate_scores(SCORES, reps=500, seed=2)
  assert a == b
  assert (a["iqm"].ci_low, a["iqm"].ci_high) != (c["iqm"].ci_low, c["iqm"].ci_high)


def test_aggregate_degenerate_runs_give_zero_width_ci():
  # Every run identical within a game: every stratified resample is the same matrix.
  scores = np.tile([[1.0, 2.0, 3.0, 4.0]], [3, 1])
  agg = score_stats.aggregate_scores(scores, reps=200, seed=0)["iqm"]
  # IQM of [1,1,1,2,2,2,3,3,3,4,4,4] trimmed 3 each side: mean(1,2,2,2,3,3,3,4)... = 2.5.
  assert agg.value == pytest.approx(2.5)
  assert agg.ci_low == pytest.approx(2.5) and agg.ci_high == pytest.approx(2.5)
  with pytest.raises(ValueError, match="num_runs"):
    score_stats.aggregate_scores(np.ones(3))


@pytest.mark.parametrize("scores", [np.tile([[1.0, 2.0, 3.0, 4.0]], [3, 1]), np.zeros([1, 1]),
                                    np.full([5, 2], -0.4255)])
def test_runs_equal_within_each_game_give_rliables_own_numbers_without_resampling(scores):
  """aggregate_scores skips the bootstrap when every run equals the others within each game;
  its numbers are the ones rliable's resampling gives (compared exactly), and the global RNG
  is left alone."""
  from rliable import metrics
  funcs = lambda x: np.array([metrics.aggregate_iqm(x), metrics.aggregate_mean(x),  # noqa: E731
                              metrics.aggregate_median(x)])
  point, interval = score_stats._seeded_interval_estimates(scores, funcs, 200, 0, 0.95)
  np.random.seed(7)
  before = np.random.get_state()[1].copy()
  agg = score_stats.aggregate_scores(scores, reps=200, seed=0)
  assert np.array_equal(np.random.get_state()[1], before)
  for i, name in enumerate(("iqm", "mean", "median")):
    assert (agg[name].value, agg[name].ci_low, agg[name].ci_high) == (
        point[i], interval[0, i], interval[1, i]), name


# ----------------------------------------------------------------------------- evaluation loop
class ScriptedEnv(py_environment.PyEnvironment):
  """Episodes of fixed observations/rewards regardless of the action; logs executed actions.

  Episode: FIRST s0=[1,0] -> MID s1=[0,0.2] r=0.75 -> LAST s2=[0,0] r=0.5 (terminal).
  """
  OBS = np.array([[1.0, 0.0], [0.0, 0.2], [0.0, 0.0]], np.float32)
  REWARDS = (0.75, 0.5)

  def __init__(self, num_actions=3):
    super().__init__(handle_auto_reset=True)
    self._t = 0
    self.actions = []
    self._act = array_spec.BoundedArraySpec((), np.int32, 0, num_actions - 1, "action")

  def observation_spec(self):
    return array_spec.ArraySpec((2,), np.float32, "observation")

  def action_spec(self):
    return self._act

  def _reset(self):
    self._t = 0
    return ts.restart(self.OBS[0])

  def _step(self, action):
    self.actions.append(int(action))
    self._t += 1
    r = np.float32(self.REWARDS[self._t - 1])
    if self._t == 2:
      return ts.termination(self.OBS[2], r)
    return ts.transition(self.OBS[self._t], r)


def _adaptive(sample=False):
  tss, aspec = specs(2, 3)
  return policies.ConfidenceAdaptivePolicy(tss, aspec, linear_q_model(W3, C3), num_grid_deltas=2,
                                           gamma=0.5, temperature=1.0, sample_delta=sample)


def test_probability_of_improvement_by_hand():
  """Per game the share of run pairs with x > y (ties 1/2), averaged over games:
  game A x = [10, 41], y = [0, 30]: 10>0, 10<30, 41>0, 41>30 -> 3/4;
  game B x = [5, 5], y = [5, 0]: tie, 5>0, tie, 5>0 -> (0.5 + 1 + 0.5 + 1)/4 = 3/4; P = 0.75.
  x above y in every pair: 1 with a zero-width CI; x == y: 0.5."""
  x = np.array([[10.0, 5.0], [41.0, 5.0]])   # [runs, games]
  y = np.array([[0.0, 5.0], [30.0, 0.0]])
  p = score_stats.probability_of_improvement(x, y, reps=200)
  assert p.value == pytest.approx(0.75)
  assert p.ci_low <= 0.75 <= p.ci_high
  assert score_stats.probability_of_improvement(x, y, reps=200) == p     # seeded
  top = score_stats.probability_of_improvement(x + 100.0, y, reps=200)
  assert (top.value, top.ci_low, top.ci_high) == pytest.approx((1.0, 1.0, 1.0))
  assert score_stats.probability_of_improvement(x, x, reps=200).value == pytest.approx(0.5)
  with pytest.raises(ValueError, match="same games"):
    score_stats.probability_of_improvement(x, y[:, :1])


def test_run_episodes_fixed_policy_records():
  tss, aspec = specs(2, 3)
  policy = policies.FixedDeltaPolicy(tss, aspec, linear_q_model(W3, C3), delta=0.25)
  env = ScriptedEnv()
  seen = []
  recs = rollouts.run_episodes(policy, env, 3, on_episode=seen.append)
  assert len(recs) == 3 and seen == recs
  for i, r in enumerate(recs):
    assert r.episode == i and r.length == 2
    assert r.return_ == pytest.approx(1.25) and r.raw_score == pytest.approx(1.25)
    assert r.deltas == [0.25, 0.25] and math.isnan(r.map_delta) and r.log_belief is None
  # delta 0.25: Q(s0) = [1, 0, 0.5] -> 0; Q(s1) = [0, 0.2, 0.5] -> 2. The LAST action is not
  # executed, so 2 actions per episode.
  assert env.actions == [0, 2] * 3
  with pytest.raises(ValueError, match="num_episodes"):
    rollouts.run_episodes(policy, env, 0)


def test_run_episodes_carries_belief_across_episodes():
  # Each episode adds [0, -1.25] to log b (see tests/test_policies.py, hand example): after
  # episode 1 b(0.25) = 1/(1+e^-1.25) = 0.777300, after episode 2 1/(1+e^-2.5) = 0.924142.
  recs = rollouts.run_episodes(_adaptive(), ScriptedEnv(), 2)
  b = [float(np.exp(r.log_belief[0])) for r in recs]
  assert b[0] == pytest.approx(0.777300, abs=1e-5)
  assert b[1] == pytest.approx(0.924142, abs=1e-5)
  assert recs[0].map_delta == 0.25 and recs[0].deltas == [0.25, 0.25]


def test_epsilon_actions_are_the_ones_scored_by_the_belief():
  env = ScriptedEnv()
  recs = rollouts.run_episodes(_adaptive(), env, 4, epsilon=1.0, seed=3)
  acts = np.array(env.actions).reshape(4, 2)
  assert len(set(env.actions)) > 1  # random actions
  # Replay the executed actions through the belief math independently.
  grid = belief.delta_grid(2)
  q = lambda s: np.asarray(s) @ np.asarray(W3) + grid[:, None] * np.asarray(C3)  # [K, A]
  s0, s1, s2 = ScriptedEnv.OBS
  log_b = belief.uniform_log_belief(2)
  for a0, a1 in acts:
    e1 = belief.bellman_sq_errors(q(s0)[:, a0], 0.75, 0.5, q(s1).max(-1))
    log_b = belief.update_log_belief(log_b, e1, 1.0)
    e2 = belief.bellman_sq_errors(q(s1)[:, a1], 0.5, 0.0, q(s2).max(-1))
    log_b = belief.update_log_belief(log_b, e2, 1.0)
  np.testing.assert_allclose(recs[-1].log_belief, np.asarray(log_b), atol=1e-5)


def test_each_record_holds_the_errors_the_belief_summed_in_its_episode():
  """Hand example (tests/test_policies.py): each ScriptedEnv episode scores its MID transition,
  e = [0, 0.25], and its LAST one, e = [0, 1]: per episode [0, 1.25] over 2 transitions, also
  in the second and third episodes (the FIRST step after LAST is not scored, so 2, not 3),
  although the state's running record keeps growing."""
  recs = rollouts.run_episodes(_adaptive(), ScriptedEnv(), 3)
  for r in recs:
    assert r.sq_error_sum.dtype == np.float64 and r.sq_error_count == 2
    np.testing.assert_allclose(r.sq_error_sum, [0.0, 1.25], atol=1e-6)
  # A policy without a belief records none.
  tss, aspec = specs(2, 3)
  fixed = policies.FixedDeltaPolicy(tss, aspec, linear_q_model(W3, C3), delta=0.25)
  rec = rollouts.run_episodes(fixed, ScriptedEnv(), 1)[0]
  assert rec.sq_error_sum is None and rec.sq_error_count is None


def test_the_recorded_sums_are_the_executed_transitions_errors_by_hand():
  """Random actions (epsilon 1): each episode's record is the sum of its two transitions'
  errors, computed independently from the executed actions."""
  env = ScriptedEnv()
  recs = rollouts.run_episodes(_adaptive(), env, 4, epsilon=1.0, seed=3)
  acts = np.array(env.actions).reshape(4, 2)
  grid = belief.delta_grid(2)
  q = lambda s: np.asarray(s) @ np.asarray(W3) + grid[:, None] * np.asarray(C3)  # [K, A]
  s0, s1, s2 = ScriptedEnv.OBS
  for rec, (a0, a1) in zip(recs, acts):
    e1 = belief.bellman_sq_errors(q(s0)[:, a0], 0.75, 0.5, q(s1).max(-1)).numpy()
    e2 = belief.bellman_sq_errors(q(s1)[:, a1], 0.5, 0.0, q(s2).max(-1)).numpy()
    np.testing.assert_allclose(rec.sq_error_sum, e1.astype(np.float64) + e2, rtol=1e-6)
    assert rec.sq_error_count == 2


def test_the_per_episode_files_have_a_column_per_grid_delta(tmp_path):
  """delta.csv (evaluate.py) and the diagnostics' belief.csv: sq_error_count and one
  'sq_error_sum@<delta>' column per grid delta, to full precision; none for a policy without
  a belief."""
  import csv
  from ccvl_tf.evaluation import diagnostics, reporting
  recs = rollouts.run_episodes(_adaptive(), ScriptedEnv(), 2)
  reporting.write_delta_csv(str(tmp_path / "delta.csv"), recs)
  trace = diagnostics.belief_trace(recs, belief.delta_grid(2))
  diagnostics.write_belief_csv(str(tmp_path / "belief.csv"), trace)
  for name in ("delta.csv", "belief.csv"):
    with open(tmp_path / name, newline="") as f:
      rows = list(csv.DictReader(f))
    assert list(rows[0])[-3:] == ["sq_error_count", "sq_error_sum@0.25", "sq_error_sum@0.75"]
    for row, rec in zip(rows, recs):
      assert int(row["sq_error_count"]) == 2
      assert float(row["sq_error_sum@0.75"]) == float(rec.sq_error_sum[1])  # full precision
      assert float(row["sq_error_sum@0.25"]) == float(rec.sq_error_sum[0])
  assert trace[1]["sq_error_count"] == 2 and trace[1]["sq_error_sum@0.75"] == pytest.approx(1.25)
  # A result row that lists its episodes (compare, results.json): the same numbers, as lists.
  fields = rollouts.sq_error_fields(recs)
  assert fields["sq_error_count"] == [2, 2]
  assert fields["sq_error_sum"] == [[float(v) for v in r.sq_error_sum] for r in recs]
  assert fields["sq_error_sum"][1][1] == pytest.approx(1.25)
  tss, aspec = specs(2, 3)
  fixed = policies.FixedDeltaPolicy(tss, aspec, linear_q_model(W3, C3), delta=0.25)
  fixed_records = rollouts.run_episodes(fixed, ScriptedEnv(), 1)
  reporting.write_delta_csv(str(tmp_path / "fixed.csv"), fixed_records)
  assert rollouts.sq_error_fields(fixed_records) == {}  # no belief, no record in the row
  assert (tmp_path / "fixed.csv").read_text().splitlines()[0] == (
      "run,episode,delta_mean,delta_first,delta_last,map_delta")
  # The column names: the float32 grid's shortest decimals, the grid of belief.delta_grid.
  assert rollouts.sq_error_columns(belief.delta_grid(8))[:2] == ["sq_error_sum@0.0625",
                                                                 "sq_error_sum@0.1875"]
  for k in (1, 3, 8, 10, 1024):
    np.testing.assert_array_equal(rollouts.delta_grid_of(k), belief.delta_grid(k))
    assert len(set(rollouts.sq_error_columns(belief.delta_grid(k)))) == k


def test_the_belief_movement_is_measured_from_the_policys_prior():
  from ccvl_tf.evaluation import diagnostics
  grid = belief.delta_grid(2)
  prior = belief.informed_log_prior([1.0, 2.0], 2.0)  # b_0 = [0.6225, 0.3775]
  tss, aspec = specs(2, 3)
  policy = policies.ConfidenceAdaptivePolicy(
      tss, aspec, linear_q_model(W3, C3), num_grid_deltas=2, gamma=0.5, temperature=1.0,
      sample_delta=False, initial_log_belief=prior)
  trace = diagnostics.belief_trace(rollouts.run_episodes(policy, ScriptedEnv(), 1), grid)
  moved = diagnostics.belief_movement(trace, grid, policy.initial_log_belief)
  b0 = np.exp(prior.astype(np.float64))
  assert moved["prior_expected_delta"] == pytest.approx(float(b0 @ grid), abs=1e-6)
  assert moved["prior_entropy"] == pytest.approx(float(-(b0 * np.log(b0)).sum()), abs=1e-6)
  uniform = diagnostics.belief_movement(trace, grid)
  assert uniform["prior_expected_delta"] == pytest.approx(0.5)
  assert uniform["prior_entropy"] == pytest.approx(np.log(2))
  # A policy given no prior holds the uniform one, and the run passes it (runner.py): measured
  # exactly as no prior is (the mean of the grid, log K), bit for bit, as every run before the
  # prior existed. K = 3, 5, 10: where the general (Categorical) route rounds otherwise.
  for k in (2, 3, 5, 8, 10):
    g = belief.delta_grid(k)
    trace_k = [{"expected_delta": 0.3, "entropy": 0.5}, {"expected_delta": 0.7, "entropy": 0.25}]
    held = policies.ConfidenceAdaptivePolicy(tss, aspec, linear_q_model(W3, C3),
                                             num_grid_deltas=k).initial_log_belief
    assert diagnostics.belief_movement(trace_k, g, held) == diagnostics.belief_movement(
        trace_k, g)
    assert diagnostics.belief_movement(trace_k, g)["prior_entropy"] == float(np.log(k))
    assert diagnostics.belief_movement(trace_k, g)["prior_expected_delta"] == float(
        np.mean(g.astype(np.float64)))


@pytest.mark.slow
def test_run_episodes_with_exported_policy(tmp_path):
  policies.export_policy(_adaptive(), str(tmp_path / "p"))
  saved, meta = rollouts.load_saved_policy(str(tmp_path / "p"), num_actions=3,
                                             observation_shape=(2,))
  assert meta == {"num_actions": 3, "observation_shape": (2,), "observation_dtype": "float32"}
  # An environment of another observation dtype: refused before any call, naming both.
  with pytest.raises(ValueError, match=r"takes float32 observations \[2\] \(policy_specs.pbtxt\) "
                                       r"but the environment gives uint8: convert them first"):
    rollouts.load_saved_policy(str(tmp_path / "p"), observation_dtype=np.uint8)
  recs = rollouts.run_episodes(saved, ScriptedEnv(), 2)
  assert float(np.exp(recs[1].log_belief[0])) == pytest.approx(0.924142, abs=1e-5)
  # The export keeps the record: each episode's errors, [0, 1.25] over 2 transitions.
  for r in recs:
    np.testing.assert_allclose(r.sq_error_sum, [0.0, 1.25], atol=1e-6)
    assert r.sq_error_count == 2
  # A stateless export (empty policy state) runs through the same loop.
  tss, aspec = specs(2, 3)
  fixed = policies.FixedDeltaPolicy(tss, aspec, linear_q_model(W3, C3), delta=0.25)
  policies.export_policy(fixed, str(tmp_path / "f"))
  saved, _ = rollouts.load_saved_policy(str(tmp_path / "f"))
  env = ScriptedEnv()
  recs = rollouts.run_episodes(saved, env, 2)
  assert env.actions == [0, 2, 0, 2] and recs[1].deltas == [0.25, 0.25]
  # Without its spec file a policy cannot be checked against a game: refused, not guessed.
  os.remove(tmp_path / "f" / "policy_specs.pbtxt")
  with pytest.raises(ValueError, match=r"policy_specs\.pbtxt is missing.*re-export"):
    rollouts.load_saved_policy(str(tmp_path / "f"), num_actions=3)


def test_plain_policy_saver_export_also_loads_for_evaluation(tmp_path):
  # PolicySaver directly (as an agent's checkpointing code might): needs TFP at load time,
  # which load_saved_policy provides.
  from tf_agents.policies import policy_saver
  policy_saver.PolicySaver(_adaptive(), batch_size=None).save(str(tmp_path / "plain"))
  saved, meta = rollouts.load_saved_policy(str(tmp_path / "plain"), num_actions=3)
  recs = rollouts.run_episodes(saved, ScriptedEnv(), 2)
  assert float(np.exp(recs[1].log_belief[0])) == pytest.approx(0.924142, abs=1e-5)


def test_load_saved_policy_errors(tmp_path):
  with pytest.raises(ValueError, match="--policy_dir .*missing does not exist"):
    rollouts.load_saved_policy(str(tmp_path / "missing"))
  (tmp_path / "a_file").write_text("x")
  with pytest.raises(ValueError, match="--policy_dir .*a_file is a file, not a directory"):
    rollouts.load_saved_policy(str(tmp_path / "a_file"))
  (tmp_path / "empty").mkdir()
  with pytest.raises(ValueError, match="not a SavedModel directory"):
    rollouts.load_saved_policy(str(tmp_path / "empty"))
  tss, aspec = specs(2, 3)
  policies.export_policy(policies.FixedDeltaPolicy(tss, aspec, linear_q_model(W3, C3), 0.5),
                         str(tmp_path / "fixed"))
  with pytest.raises(ValueError, match="has 3 actions but the game has 18"):
    rollouts.load_saved_policy(str(tmp_path / "fixed"), num_actions=18)
  with pytest.raises(ValueError, match=r"shape \(2,\).*\(84, 84, 4\)"):
    rollouts.load_saved_policy(str(tmp_path / "fixed"), observation_shape=(84, 84, 4))


def test_gridworld_environment_goal_by_hand():
  world = gridworld.GridWorld(slip_prob=0.0)
  env = gridworld_env.GridWorldEnvironment(world, seed=0)
  # Always 'right' (action 1): Q = delta * c with c = [0, 1, 0, 0].
  tss = ts.time_step_spec(tf.TensorSpec((world.num_states,), tf.float32, "observation"))
  aspec = policies.tensor_spec.BoundedTensorSpec((), tf.int32, 0, 3, "action")
  model = linear_q_model(np.zeros([world.num_states, 4]), [0., 1., 0., 0.])
  policy = policies.FixedDeltaPolicy(tss, aspec, model, delta=0.5)
  recs = rollouts.run_episodes(
      policy, env, 2, raw_score_fn=lambda e: e.get_info()["episode_discounted_return"])
  # Layout row 6 is "S......G": 7 steps right, reward 1 on arrival, discounted gamma^6.
  for r in recs:
    assert r.length == 7 and r.return_ == 1.0
    assert r.raw_score == pytest.approx(world.gamma ** 6)


def test_py_driver_resets_state_on_unbatched_env_unless_run_per_episode():
  """Backs the ConfidenceAdaptivePolicy docstring: PyDriver on an unbatched env calls
  get_initial_state at the FIRST step of every episode after its first one."""
  from tf_agents.drivers import py_driver
  from tf_agents.policies import py_tf_eager_policy
  policy = py_tf_eager_policy.PyTFEagerPolicy(_adaptive(), use_tf_function=False)
  env = ScriptedEnv()
  # PyDriver acts on the LAST step too (it counts an episode when the step it acted on is
  # LAST), so each episode adds [0, -1.25] to log b as in the hand example.
  # One run() over 2 episodes: the belief restarts, and at the end holds only episode 2
  # (b(0.25) = 0.777300, the one-episode value), not 0.924142.
  driver = py_driver.PyDriver(env, policy, [], max_episodes=2)
  t, state = driver.run(env.reset(), policy.get_initial_state(1))
  assert float(np.exp(state["log_belief"][0, 0])) == pytest.approx(0.777300, abs=1e-5)
  # One run() per episode, passing the state back in: the belief accumulates.
  driver = py_driver.PyDriver(env, policy, [], max_episodes=1)
  t, state = env.reset(), policy.get_initial_state(1)
  for _ in range(2):
    t, state = driver.run(t, state)
  assert float(np.exp(state["log_belief"][0, 0])) == pytest.approx(0.924142, abs=1e-5)
