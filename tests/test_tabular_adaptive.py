"""The tabular confidence-adaptive policy: belief kept across episodes, delta per episode."""
import numpy as np
import pytest

from ccvl_tf.algorithm import belief
from ccvl_tf.tabular.gridworld import GridWorld
from ccvl_tf.tabular import evaluation as ev
from ccvl_tf.tabular import value_iteration as vi


def test_belief_moves_to_the_bellman_consistent_delta():
  # p = 0.3: the optimal (long) route never passes lava, so the stream is not dominated by a few
  # unlucky lava entries (single lava entries favor a lower Q; in expectation Q* still wins).
  env = GridWorld(slip_prob=0.3)
  q_star, _ = vi.value_iteration(env.P, env.R, env.gamma)
  # Three candidate Q functions: Q* (consistent with the dynamics) and two shifted copies.
  # A constant shift c adds (1 - gamma) c to every non-terminal Bellman error and c to the
  # error at the goal (reward 1, terminal).
  q_delta = np.stack([q_star - 0.5, q_star, q_star + 0.5])
  rng = np.random.default_rng(0)
  episodes, log_b = ev.run_adaptive(env, q_delta, num_episodes=5, temperature=0.01, rng=rng,
                                    select="argmax")
  assert log_b.shape == (6, 3)
  np.testing.assert_allclose(log_b[0], np.log(1 / 3), atol=1e-6)  # uniform prior
  assert np.argmax(log_b[-1]) == 1
  # The belief carries across episodes: after the first episode the agent already acts with Q*.
  assert [e.delta_index for e in episodes[1:]] == [1, 1, 1, 1]


def test_one_step_belief_update_by_hand():
  # A 1-step episode into lava from a state next to it is hard to force; instead check the
  # update of one transition through the same function the policy uses.
  lb = belief.uniform_log_belief(2)
  err = belief.bellman_sq_errors([0.2, 0.6], 0.0, 0.95, [0.2, 0.2]).numpy()
  # (0.2 - 0.19)^2 = 1e-4, (0.6 - 0.19)^2 = 0.1681
  np.testing.assert_allclose(err, [1e-4, 0.1681], rtol=1e-4)
  b = np.exp(belief.update_log_belief(lb, err, 0.1).numpy())
  expected = np.exp(-np.array([1e-4, 0.1681]) / 0.1)
  np.testing.assert_allclose(b, expected / expected.sum(), rtol=1e-4)


def test_optimal_return_and_expected_return_agree():
  env = GridWorld(slip_prob=0.15)
  q, _ = vi.value_iteration(env.P, env.R, env.gamma)
  assert ev.expected_return(env, q) == pytest.approx(ev.optimal_return(env))
  # Monte Carlo estimate of the same quantity (2,000 episodes: std error ~ 0.006)
  rng = np.random.default_rng(1)
  pol = vi.greedy_policy(q)
  mc = np.mean([ev.run_episode(env, pol, rng)[0] for _ in range(2000)])
  assert mc == pytest.approx(ev.optimal_return(env), abs=0.025)


def test_bad_arguments():
  env = GridWorld()
  q = np.zeros((2, env.num_states, 4))
  with pytest.raises(ValueError, match="select"):
    ev.run_adaptive(env, q, 1, 1.0, np.random.default_rng(0), select="mode")
  with pytest.raises(ValueError, match="num_episodes"):
    ev.run_adaptive(env, q, 0, 1.0, np.random.default_rng(0))
