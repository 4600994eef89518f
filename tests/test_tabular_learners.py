"""Tabular learners: counts, CQL fixed point by hand, bonus updates, Lemma 1, Fixed-CCVL."""
import numpy as np
import pytest

from ccvl_tf.algorithm import belief
from ccvl_tf.tabular.gridworld import GridWorld
from ccvl_tf.tabular import dataset, learners
from ccvl_tf.tabular.dataset import Transitions


def _bandit(actions, rewards):
  """One state (0), terminal transitions: the empirical backup is just the mean reward."""
  n = len(actions)
  return Transitions(np.zeros(n, np.int64), np.array(actions), np.array(rewards, np.float32),
                     np.zeros(n, np.int64), np.ones(n, np.float32))


def test_counts_exact():
  data = Transitions(np.array([0, 0, 1, 0]), np.array([1, 1, 0, 0]), np.zeros(4, np.float32),
                     np.array([1, 1, 0, 0]), np.zeros(4, np.float32))
  n_sa, n_s = learners.counts(data, num_states=3, num_actions=2)
  np.testing.assert_array_equal(n_sa, [[1, 2], [1, 0], [0, 0]])
  np.testing.assert_array_equal(n_s, [3, 1, 0])
  m = learners.empirical_model(data, 3, 2)
  # p_cont[0, 1] = 1 at s' = 1 (both transitions non-terminal).
  np.testing.assert_allclose(m.p_cont[0, 1], [0, 1, 0])


def test_empirical_model_rejects_out_of_range():
  data = _bandit([0, 5], [0, 0])
  with pytest.raises(ValueError, match=r"action values must be in \[0, 2\)"):
    learners.empirical_model(data, 1, 2)


def test_cql_one_state_bandit_by_hand():
  # Data: action 0 three times (reward 0), action 1 once (reward 0) -> beta = (0.75, 0.25),
  # B^Q = (0, 0). The CQL(H) fixed point satisfies q_a = -c (p_a / beta_a - 1), p = softmax(q).
  # Guess p = (0.6, 0.4): q0 = -c (0.8 - 1) = 0.2 c, q1 = -c (1.6 - 1) = -0.6 c, so
  # q0 - q1 = 0.8 c must equal log(0.6 / 0.4) = log 1.5  ->  c = log(1.5) / 0.8 = 0.506826...
  # and q = (0.101365, -0.304096).
  c = np.log(1.5) / 0.8
  m = learners.empirical_model(_bandit([0, 0, 0, 1], [0, 0, 0, 0]), 1, 3)
  q = learners.cql_q(m, gamma=0.9, alpha=c)
  np.testing.assert_allclose(q[0, :2], [0.2 * c, -0.6 * c], atol=1e-8)
  # Action 2 never appears in the data: the penalty pushes it to -inf.
  assert q[0, 2] == -np.inf


def test_cql_alpha_zero_is_empirical_q_learning():
  m = learners.empirical_model(_bandit([0, 1, 1], [1.0, 0.0, 0.5]), 1, 2)
  np.testing.assert_allclose(learners.cql_q(m, 0.9, 0.0)[0], [1.0, 0.25], atol=1e-10)


def test_anti_exploration_bonus_by_hand():
  # Q = B^Q - alpha / sqrt(n): action 0 seen 4 times with mean reward 1 -> 1 - 0.5 / 2 = 0.75;
  # action 1 unseen -> pessimistic prior 0 minus alpha * 1 = -0.5.
  m = learners.empirical_model(_bandit([0, 0, 0, 0], [1, 1, 1, 1]), 1, 2)
  np.testing.assert_allclose(learners.anti_exploration_q(m, 0.9, 0.5)[0], [0.75, -0.5])


def test_ccvl_bonus_by_hand_and_matches_anti_exploration():
  # Q(s, a, delta) = mean reward - alpha sqrt(log(1/delta) / n). delta = 0.25, n = 4, alpha = 1:
  # 1 - sqrt(log 4 / 4) = 1 - 0.588705 = 0.411295.
  m = learners.empirical_model(_bandit([0, 0, 0, 0], [1, 1, 1, 1]), 1, 2)
  q = learners.ccvl_bonus_q(m, 0.9, 1.0, [0.25, 0.5])
  assert q[0, 0, 0] == pytest.approx(1 - np.sqrt(np.log(4) / 4))
  # With a bonus alpha' = alpha sqrt(log(1/delta)) the anti-exploration Q is the same.
  ae = learners.anti_exploration_q(m, 0.9, np.sqrt(np.log(2)))
  np.testing.assert_allclose(q[1], ae, atol=1e-9)


@pytest.fixture(scope="module")
def gridworld_model():
  env = GridWorld()
  data = dataset.make_gridworld_dataset(seed=3)
  return env, data, learners.empirical_model(data, env.num_states, env.num_actions)


def test_lemma1_bonus_q_nondecreasing_in_delta(gridworld_model):
  env, _, m = gridworld_model
  q = learners.ccvl_bonus_q(m, env.gamma, 0.5, belief.delta_grid(10))
  assert np.all(np.diff(q, axis=0) >= -1e-12)
  # and strictly increasing somewhere (the bonus matters)
  assert np.max(np.diff(q, axis=0)) > 1e-3


def test_regularized_ccvl_satisfies_its_stationarity_condition(gridworld_model):
  # At the fixed point, for every visited (s, a):
  #   Q = T - w (softmax(Q)_a / beta_a - 1),  T = max_{delta2 <= delta} B^Q(delta2),
  #   w = alpha sqrt(log(1/delta) / n(s)).
  env, _, m = gridworld_model
  grid = belief.delta_grid(4)
  alpha = 0.3
  q = learners.ccvl_regularized_q(m, env.gamma, alpha, grid)
  v = np.where(m.seen_s, q.max(-1), 0.0)
  target = np.maximum.accumulate(m.backup(v, env.gamma), axis=0)
  beta = m.n_sa / np.maximum(m.n_s, 1)[:, None]
  w = alpha * np.sqrt(np.log(1 / grid)[:, None] / np.maximum(m.n_s, 1))[..., None]
  z = np.where(m.seen_sa, q, -np.inf)
  with np.errstate(invalid="ignore"):  # unvisited states: all -inf, masked below
    p = np.exp(z - z.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
  resid = np.where(m.seen_sa, q - (target - w * (p / np.where(m.seen_sa, beta, 1) - 1)), 0.0)
  assert np.abs(resid).max() < 1e-6
  assert np.all(q[:, ~m.seen_s] == 0.0)  # unvisited states keep their initial value
  assert np.all(np.isneginf(q[:, m.seen_s[:, None] & ~m.seen_sa]))  # unseen actions: -inf


def test_fixed_delta_picks_lowest_bellman_error(gridworld_model):
  env, data, m = gridworld_model
  grid = belief.delta_grid(5)
  q = learners.ccvl_bonus_q(m, env.gamma, 0.5, grid)
  errs = learners.data_bellman_errors(q, data, env.gamma)
  # Recompute one entry by hand from the definition.
  k = 2
  s, a, r, s2, t = data
  e = (q[k, s, a] - r - env.gamma * (1 - t) * q[k, s2].max(-1)) ** 2
  assert errs[k] == pytest.approx(e.mean(), rel=1e-5)
  assert learners.fixed_delta_index(q, data, env.gamma) == int(np.argmin(errs))


@pytest.mark.parametrize("bad", [[0.0, 0.5], [0.5, 1.0], [0.6, 0.4], []])
def test_bad_delta_grid(bad, gridworld_model):
  env, _, m = gridworld_model
  with pytest.raises(ValueError, match="delta"):
    learners.ccvl_bonus_q(m, env.gamma, 0.1, bad)


def test_negative_alpha_rejected(gridworld_model):
  env, _, m = gridworld_model
  with pytest.raises(ValueError, match="alpha must be >= 0"):
    learners.cql_q(m, env.gamma, -0.1)


# ---- the readings of Eq. (cql update): the family's order and bound (docs/agent.md) ----------
def _bandit_model():
  # One state, terminal transitions: action 0 three times with reward 0, action 1 once with
  # reward 1, action 2 never -> beta = (0.75, 0.25, 0), T = B^Q = (0, 1), n(s) = 4.
  return learners.empirical_model(_bandit([0, 0, 0, 1], [0, 0, 0, 1]), 1, 3)


def test_max_gap_solution_by_hand():
  # delta = 1/e: log(1/delta) = 1, so w = alpha sqrt(1 / 4) = alpha / 2.
  # alpha = 0.2 -> w = 0.1. c = T + w = (0.1, 1.1). Only action 1 is capped at v:
  #   g(v) = w + beta_1 (v - c_1) = 0  ->  v = 1.1 - 0.1 / 0.25 = 0.7; q_0 = min(0.1, 0.7) = 0.1.
  # Stationarity: d/dq_0 = -w beta_0 + beta_0 (q_0 - 0) = 0 at q_0 = w = 0.1;
  #   d/dq_1 = w - w beta_1 + beta_1 (q_1 - 1) = 0.1 - 0.025 - 0.075 = 0 at q_1 = 0.7.
  m = _bandit_model()
  delta = [np.exp(-1.0)]
  q = learners.ccvl_regularized_q(m, 0.9, 0.2, delta, reading="max")[0, 0]
  np.testing.assert_allclose(q[:2], [0.1, 0.7], atol=1e-12)
  assert np.isneginf(q[2])  # never taken: only the max sees it, pushed to -inf
  # alpha = 2 -> w = 1: both actions capped, v = E_beta T = 0.25 (the floor of the hard max).
  q = learners.ccvl_regularized_q(m, 0.9, 2.0, delta, reading="max")[0, 0]
  np.testing.assert_allclose(q[:2], [0.25, 0.25], atol=1e-12)
  # alpha = 0: plain empirical Q-learning, V = max T = 1.
  q = learners.ccvl_regularized_q(m, 0.9, 0.0, delta, reading="max")[0, 0]
  np.testing.assert_allclose(q[:2], [0.0, 1.0], atol=1e-12)


def test_logsumexp_gap_raises_the_greedy_value_with_the_weight():
  # The CQL(H) fixed point keeps sum_a beta_a q_a = sum_a beta_a T_a for any weight (the
  # stationarity condition q_a = T_a - w (p_a / beta_a - 1) summed with weights beta_a), so the
  # penalty only moves value between actions. Bandit with beta = (0.75, 0.25) and T = (1, 0):
  # the frequent action is the better one, its softmax share stays below 0.75, so its value
  # rises above T = 1 as w grows, i.e. V *falls* as delta rises.
  m = learners.empirical_model(_bandit([0, 0, 0, 1], [1, 1, 1, 0]), 1, 2)
  grid = [0.05, 0.5, 0.95]
  q = learners.ccvl_regularized_q(m, 0.9, 1.0, grid, reading="logsumexp")[:, 0]  # [K, A]
  np.testing.assert_allclose(q @ [0.75, 0.25], 0.75, atol=1e-9)
  v = q.max(-1)
  assert np.all(v > 1.0) and np.all(np.diff(v) < 0), v
  # The hard max on the same data: V <= max T = 1 and nondecreasing in delta.
  v_max = learners.ccvl_regularized_q(m, 0.9, 1.0, grid, reading="max")[:, 0].max(-1)
  assert np.all(v_max <= 1.0) and np.all(np.diff(v_max) >= 0), v_max


@pytest.mark.parametrize("reading", learners.READINGS)
def test_readings_on_the_gridworld(reading, gridworld_model):
  """What each reading satisfies on a paper-sized gridworld dataset, at two alphas:
  '+monotone' and every bonus reading -> Lemma 1 for every action, stepwise along the grid;
  'max', 'bonus' and 'bonus+max' -> V(s, .) nondecreasing and V <= 1 (no return exceeds 1:
  reward 1 ends the episode); 'logsumexp' -> neither (measured: V nondecreasing at <= 10% of
  visited states; V up to 1.72 at alpha 1); 'bonus' -> the greedy action varies along delta
  somewhere (measured: 8-30% of visited states on datasets 0-9)."""
  env, _, m = gridworld_model
  grid = belief.delta_grid(8)
  visited = m.seen_s & ~env.terminal_mask
  q = learners.family_q(m, env.gamma, np.array([0.2, 1.0]), grid, reading)
  parsed = learners.parse_reading(reading)
  ordered = parsed.monotone or parsed.form == "bonus"
  bounded = parsed.gap == "max" or reading == "bonus"
  for qa in q:
    stats = learners.family_stats(qa, visited)
    if ordered:
      assert stats["q_nondecreasing_share"] == 1.0
      # An unseen action is -inf at every delta (no value), a seen one finite at every delta.
      finite = np.isfinite(qa[:, visited])
      assert np.all(finite == finite[:1])
      assert np.all(np.diff(np.where(finite, qa[:, visited], 0.0), axis=0) >= 0)
    if ordered or parsed.gap == "max":
      assert stats["v_nondecreasing_share"] == 1.0
    if bounded:
      assert stats["v_max"] <= 1.0
    if reading == "logsumexp":
      assert stats["v_nondecreasing_share"] < 0.5, stats
    if reading == "bonus":
      assert stats["greedy_varies_share"] > 0.0 and stats["v_at_min_delta_share"] < 1.0, stats
  if parsed.form == "regularized" and parsed.gap == "logsumexp":
    assert learners.family_stats(q[1], visited)["v_max"] > 1.0


def test_max_gap_value_lies_between_the_data_average_and_the_best_backup(gridworld_model):
  # The hard-max solution per state: E_beta T <= V <= max_a T, the lower end being the floor that
  # keeps Theorem 2 from holding at every confidence (docs/agent.md).
  env, _, m = gridworld_model
  grid = belief.delta_grid(4)
  q = learners.ccvl_regularized_q(m, env.gamma, 5.0, grid, reading="max")
  v = np.where(m.seen_s, q.max(-1), 0.0)
  target = np.maximum.accumulate(m.backup(v, env.gamma), axis=0)       # [K, S, A]
  beta = m.n_sa / np.maximum(m.n_s, 1)[:, None]
  seen = m.seen_s
  floor = (beta * np.where(m.seen_sa, target, 0.0)).sum(-1)            # [K, S]
  top = np.where(m.seen_sa, target, -np.inf).max(-1)
  assert np.all(v[:, seen] >= floor[:, seen] - 1e-7)  # the fixed point is iterated to 1e-8
  assert np.all(v[:, seen] <= top[:, seen] + 1e-7)


def test_bonus_reading_on_a_bandit_by_hand():
  """One terminal state, action 0 three times (reward 1), action 1 once (reward 0), action 2
  never: n(s) = 4, B^Q = (1, 0, -). alpha 0.5, grid (0.25, 0.75):
  b(0.25) = 0.5 sqrt(ln 4 / 4) = 0.294353, b(0.75) = 0.5 sqrt(ln(4/3) / 4) = 0.134090.
  Q = B^Q - b on the data's actions; action 2 is outside the support: 1 below the smallest
  supported value. With tau = 0.5 (n(s, a) > 1.5) action 1 leaves the support too."""
  data = _bandit([0, 0, 0, 1], [1, 1, 1, 0])
  m = learners.empirical_model(data, 1, 3)
  b = 0.5 * np.sqrt(np.log([4.0, 4.0 / 3.0]) / 4.0)
  np.testing.assert_allclose(b, [0.294353, 0.134090], rtol=1e-5)
  q = learners.family_q(m, 0.9, 0.5, [0.25, 0.75], "bonus")[:, 0]            # [K, A]
  np.testing.assert_allclose(q, [[1 - b[0], -b[0], -b[0] - 1], [1 - b[1], -b[1], -b[1] - 1]],
                             rtol=1e-6)
  q = learners.ccvl_bonus_gap_q(m, 0.9, 0.5, [0.25, 0.75], support_threshold=0.5)[:, 0]
  np.testing.assert_allclose(q, [[1 - b[0], -b[0], -b[0]], [1 - b[1], -b[1], -b[1]]], rtol=1e-6)


def test_bonus_with_max_gap_on_a_bandit_by_hand():
  """Actions 0 (x3, reward 1) and 1 (x1, reward 0): T = (1, 0) - b, beta = (0.75, 0.25), w0 =
  0.2. The hard-max argmin caps action 0: v = (0.75 T_0 - w0 (1 - 0.75)) / 0.75 =
  T_0 - 0.2 / 3 (v = 0.9333 at b = 0); action 1 keeps T_1 + w0 < v. So V = 1 - 1/15 - b."""
  data = _bandit([0, 0, 0, 1], [1, 1, 1, 0])
  m = learners.empirical_model(data, 1, 2)
  q0 = learners.ccvl_bonus_gap_q(m, 0.9, 0.0, [0.5], gap="max", gap_weight=0.2)[0, 0]
  np.testing.assert_allclose(q0, [1 - 0.2 / 3, 0.2], rtol=1e-9)
  b = 0.5 * np.sqrt(np.log(2.0) / 4.0)
  q = learners.family_q(m, 0.9, 0.5, [0.5], "bonus+max", gap_weight=0.2)[0, 0]
  np.testing.assert_allclose(q, q0 - b, rtol=1e-9)


def test_greedy_varies_and_flat_value_by_hand():
  """K = 3 deltas, 3 states, 2 actions.
  s0: (1, 0) at every delta: one policy, V flat.
  s1: (1, 0), (0.5, 0.5), (0, 1): greedy {0}, {0, 1}, {1}: the ends are disjoint -> varies.
  s2: (1, 1), (0, 1), (1, 1): every pair of greedy sets shares action 1 -> a switch between
      tied actions only, not a variation; V = 1 throughout -> flat."""
  q = np.array([[[1, 0], [1, 0], [1, 1]],
                [[1, 0], [0.5, 0.5], [0, 1]],
                [[1, 0], [0, 1], [1, 1]]], np.float64)                 # [K, S, A]
  np.testing.assert_array_equal(learners.greedy_varies(q), [False, True, False])
  np.testing.assert_array_equal(learners.v_at_min_delta(q), [True, False, True])
  st = learners.family_stats(q, np.array([0, 1, 2]))
  assert st["greedy_varies_share"] == pytest.approx(1 / 3)
  assert st["v_at_min_delta_share"] == pytest.approx(2 / 3)


def test_regularized_solver_refuses_a_bonus_reading(gridworld_model):
  env, _, m = gridworld_model
  with pytest.raises(ValueError, match="bonus reading"):
    learners.ccvl_regularized_q(m, env.gamma, 0.2, [0.5], reading="bonus")


def test_bad_reading_is_named():
  with pytest.raises(ValueError, match="reading must be one of"):
    learners.parse_reading("softmax")
