"""Tabular learners: counts, CQL fixed point by hand, bonus updates, Lemma 1, Fixed-CCVL."""
import numpy as np
import pytest

from ccvl_tf import belief
from ccvl_tf.envs.gridworld import GridWorld
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
