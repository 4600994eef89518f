"""Value iteration / policy evaluation on a hand-solved 3-state MDP."""
import numpy as np
import pytest

from ccvl_tf.tabular import value_iteration as vi


def three_state_mdp():
  """States 0, 1, 2 (2 absorbing). Actions: 0 'stay/slow', 1 'go'.

  s0: a0 -> s0 with reward 0.1 (forever);  a1 -> s1, reward 0.
  s1: a0 -> s2 with reward 1;              a1 -> s2 with reward 0.5.
  s2: absorbing, reward 0.
  gamma = 0.5. By hand:
    V*(s2) = 0.
    Q*(s1, a0) = 1, Q*(s1, a1) = 0.5  -> V*(s1) = 1.
    Q*(s0, a1) = 0 + 0.5 * 1 = 0.5;  Q*(s0, a0) = 0.1 + 0.5 V*(s0).
    If V*(s0) = 0.5 (take a1): Q*(s0, a0) = 0.1 + 0.25 = 0.35 < 0.5, consistent.
  """
  P = np.zeros((3, 2, 3))
  R = np.zeros((3, 2, 3))
  P[0, 0, 0] = 1; R[0, 0, 0] = 0.1
  P[0, 1, 1] = 1
  P[1, 0, 2] = 1; R[1, 0, 2] = 1.0
  P[1, 1, 2] = 1; R[1, 1, 2] = 0.5
  P[2, :, 2] = 1
  return P, R


def test_value_iteration_hand_solved():
  P, R = three_state_mdp()
  q, v = vi.value_iteration(P, R, gamma=0.5)
  np.testing.assert_allclose(q, [[0.35, 0.5], [1.0, 0.5], [0.0, 0.0]], atol=1e-9)
  np.testing.assert_allclose(v, [0.5, 1.0, 0.0], atol=1e-9)
  np.testing.assert_array_equal(vi.greedy_policy(q)[:2], [1, 0])


def test_policy_evaluation_and_finite_horizon():
  P, R = three_state_mdp()
  # Always a0: V(s0) = 0.1 / (1 - 0.5) = 0.2; V(s1) = 1.
  v = vi.policy_evaluation(P, R, 0.5, np.array([0, 0, 0]))
  np.testing.assert_allclose(v, [0.2, 1.0, 0.0], atol=1e-12)
  # Two steps of a0 from s0: 0.1 + 0.5 * 0.1 = 0.15.
  assert vi.finite_horizon_return(P, R, 0.5, np.array([0, 0, 0]), 0, 2) == pytest.approx(0.15)
  # Stochastic policy 50/50 at s1: V(s1) = 0.75.
  pi = np.array([[0, 1], [0.5, 0.5], [1, 0]], float)
  assert vi.policy_evaluation(P, R, 0.5, pi)[1] == pytest.approx(0.75)


def test_bad_model_rejected():
  P, R = three_state_mdp()
  with pytest.raises(ValueError, match="gamma"):
    vi.value_iteration(P, R, gamma=1.0)
  P2 = P.copy(); P2[0, 0, 0] = 0.5
  with pytest.raises(ValueError, match="sum to 1"):
    vi.value_iteration(P2, R, gamma=0.5)
