"""Gridworld dynamics and the two layout properties the experiment relies on."""
import numpy as np
import pytest

from ccvl_tf.envs.gridworld import GridWorld, DATA_SLIP_PROB, EVAL_SLIP_PROB
from ccvl_tf.tabular import value_iteration as vi


@pytest.fixture(scope="module")
def data_env():
  return GridWorld(slip_prob=DATA_SLIP_PROB)


@pytest.fixture(scope="module")
def eval_env():
  return GridWorld(slip_prob=EVAL_SLIP_PROB)


def test_layout_constants(data_env):
  assert data_env.shape == (8, 8)
  assert (DATA_SLIP_PROB, EVAL_SLIP_PROB) == (0.3, 0.15)
  assert data_env.cell(data_env.start_state) == (6, 0)
  assert data_env.cell(data_env.goal_state) == (6, 7)
  assert len(data_env.lava_states) == 8


def test_probabilities_sum_to_one(data_env, eval_env):
  for env in (data_env, eval_env):
    np.testing.assert_allclose(env.P.sum(-1), 1.0, atol=1e-12)
    assert (env.P >= 0).all()


def test_slip_distribution(data_env):
  # From (0, 3) moving right: intended (0, 4) w.p. 0.7; down (1, 3) and left (0, 2) w.p. 0.1
  # each; up hits the border and stays at (0, 3) w.p. 0.1.
  s = data_env.state(0, 3)
  row = data_env.P[s, 1]
  assert row[data_env.state(0, 4)] == pytest.approx(0.7)
  assert row[data_env.state(1, 3)] == pytest.approx(0.1)
  assert row[data_env.state(0, 2)] == pytest.approx(0.1)
  assert row[s] == pytest.approx(0.1)


def test_lava_is_absorbing_with_zero_reward(data_env):
  for lava in data_env.lava_states:
    for a in range(4):
      assert data_env.P[lava, a, lava] == 1.0
      assert data_env.R[lava, a].sum() == 0.0
  # Entering lava from the corridor: (6, 2) moving up lands in lava (5, 2) w.p. 0.7.
  s = data_env.state(6, 2)
  assert data_env.P[s, 0, data_env.state(5, 2)] == pytest.approx(0.7)
  assert data_env.R[s, 0, data_env.state(5, 2)] == 0.0


def test_walls_block(data_env):
  # (6, 1): up is the wall (5, 1); moving up with no slip stays in place.
  s = data_env.state(6, 1)
  env0 = GridWorld(slip_prob=0.0)
  assert env0.P[s, 0, s] == 1.0
  # (1, 2) moving down runs into the wall block at (2, 2).
  s = env0.state(1, 2)
  assert env0.P[s, 2, s] == 1.0


def test_goal_reward_and_terminal(data_env):
  s = data_env.state(6, 6)
  assert data_env.R[s, 1, data_env.goal_state] == 1.0
  assert data_env.P[s, 1, data_env.goal_state] == pytest.approx(0.7)
  assert data_env.terminal_mask[data_env.goal_state]
  assert data_env.terminal_mask[data_env.lava_states].all()
  assert data_env.terminal_mask.sum() == 9


def test_optimal_route_under_data_dynamics_is_long_and_safe(data_env):
  q, v = vi.value_iteration(data_env.P, data_env.R, data_env.gamma)
  pol = vi.greedy_policy(q)
  assert data_env.route_name(pol) == "long"
  assert v[data_env.start_state] == pytest.approx(0.2514, abs=1e-4)


def test_optimal_route_under_eval_dynamics_is_short_beside_lava(eval_env, data_env):
  q, v = vi.value_iteration(eval_env.P, eval_env.R, eval_env.gamma)
  pol = vi.greedy_policy(q)
  assert eval_env.route_name(pol) == "short"
  # The data-optimal (long) route is clearly worse at evaluation: about 0.82 of optimal.
  q30, _ = vi.value_iteration(data_env.P, data_env.R, data_env.gamma)
  long_value = vi.policy_evaluation(eval_env.P, eval_env.R, eval_env.gamma,
                                    vi.greedy_policy(q30))[eval_env.start_state]
  assert long_value / v[eval_env.start_state] == pytest.approx(0.818, abs=0.005)


def test_sampling_matches_model(data_env):
  rng = np.random.default_rng(0)
  s = np.full(20000, data_env.state(6, 3))
  a = np.full(20000, 1)
  nxt = data_env.sample_next_states(s, a, rng)
  freq = np.bincount(nxt, minlength=data_env.num_states) / len(nxt)
  np.testing.assert_allclose(freq, data_env.P[s[0], 1], atol=0.01)


@pytest.mark.parametrize("kwargs,match", [
    (dict(slip_prob=1.5), "slip_prob"), (dict(gamma=1.0), "gamma"), (dict(horizon=0), "horizon"),
    (dict(layout=("S.", "..")), "exactly one 'G'"), (dict(layout=("SX", ".G")), "may only contain"),
])
def test_bad_arguments(kwargs, match):
  with pytest.raises(ValueError, match=match):
    GridWorld(**kwargs)
