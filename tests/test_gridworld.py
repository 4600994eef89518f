"""Gridworld dynamics and the two layout properties the experiment relies on (route values
derived independently: a model built from the picture, hand-written policies, linear solves)."""
import numpy as np
import pytest

from ccvl_tf.tabular.gridworld import GridWorld, DATA_SLIP_PROB, EVAL_SLIP_PROB
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


# ---- route values, derived without the code under test ------------------------------------------
# The map of the paper's gridworld (ccvl_tf/tabular/gridworld.py docstring), copied as a picture.
MAP = ("........",
       "........",
       "..####..",
       "..####..",
       "..####..",
       ".#LLLL#.",
       "S......G",
       ".#LLLL#.")
# Optimal policies written out by hand, one character per cell (^ up, > right, v down, < left;
# '#', 'L', 'G' cells are absorbing or unreachable, their action is irrelevant). Under the data
# dynamics (p = 0.3) the route goes up the left side, across the top and down the right side
# (from (6, 1) it steps back to the start rather than walk along the lava); under the
# evaluation dynamics (p = 0.15) it runs right along row 6 beside the lava. Each is certified
# optimal below by the policy improvement theorem (no one-step deviation improves V^pi anywhere).
LONG_ROUTE = (">>>>>>vv",
              ">>>>>>vv",
              "^^####vv",
              "^^####vv",
              "^^####>v",
              "^#LLLL#v",
              "^<>>>>>G",
              "^#LLLL#^")
SHORT_ROUTE = (">>>>>>vv",
               ">>>>>>vv",
               "^^####vv",
               "^^####vv",
               "^^####>v",
               "v#LLLL#v",
               ">>>>>>>G",
               "^#LLLL#^")
_ARROWS = {"^": 0, ">": 1, "v": 2, "<": 3}
_STEPS = ((-1, 0), (0, 1), (1, 0), (0, -1))
START = 6 * 8 + 0                                   # 'S' at (6, 0)


def _policy(rows):
  return np.array([_ARROWS.get(ch, 0) for row in rows for ch in row])


def _independent_model(p):
  """P [S, A, S'] and r(s, a) = P(arrive at G | s, a), straight from the picture: the intended
  move w.p. 1 - p, each other direction w.p. p / 3; a move off the grid or into '#' stays put;
  'L', 'G' (and '#') cells are absorbing with reward 0. Cell (row, col) is state 8 row + col."""
  p_mat, r = np.zeros((64, 4, 64)), np.zeros((64, 4))
  for s in range(64):
    row, col = divmod(s, 8)
    if MAP[row][col] in "LG#":
      p_mat[s, :, s] = 1.0
      continue
    for a in range(4):
      for d, (dr, dc) in enumerate(_STEPS):
        nr, nc = row + dr, col + dc
        if not (0 <= nr < 8 and 0 <= nc < 8) or MAP[nr][nc] == "#":
          nr, nc = row, col
        prob = 1.0 - p if d == a else p / 3.0
        p_mat[s, a, 8 * nr + nc] += prob
        r[s, a] += prob * (MAP[nr][nc] == "G")
  return p_mat, r


def _value(p_mat, r, pi, gamma=0.95):
  """V^pi = (I - gamma P_pi)^-1 r_pi, one linear solve."""
  idx = np.arange(64)
  return np.linalg.solve(np.eye(64) - gamma * p_mat[idx, pi], r[idx, pi])


def _assert_optimal(p_mat, r, v, gamma=0.95):
  q = r + gamma * p_mat @ v                                          # [S, A]
  assert np.all(q.max(1) <= v + 1e-12), np.argmax(q.max(1) - v)


def test_independent_model_is_the_environments_model(data_env, eval_env):
  assert MAP[6][0] == "S" and data_env.start_state == START
  for env, p in ((data_env, 0.3), (eval_env, 0.15)):
    p_mat, r = _independent_model(p)
    np.testing.assert_allclose(env.P, p_mat, atol=1e-12)
    np.testing.assert_allclose(vi.expected_reward(env.P, env.R), r, atol=1e-12)


def test_optimal_route_under_data_dynamics_is_long_and_safe(data_env):
  p_mat, r = _independent_model(0.3)
  v_long = _value(p_mat, r, _policy(LONG_ROUTE))
  _assert_optimal(p_mat, r, v_long)                    # LONG_ROUTE is optimal at p = 0.3
  assert v_long[START] == pytest.approx(0.2514, abs=1e-4)
  assert _value(p_mat, r, _policy(SHORT_ROUTE))[START] == pytest.approx(0.2114, abs=1e-4)
  # The code under test: value iteration finds the same values and this very policy.
  q, v = vi.value_iteration(data_env.P, data_env.R, data_env.gamma)
  np.testing.assert_allclose(v, v_long, atol=1e-8)
  pol = vi.greedy_policy(q)
  open_cells = ~np.isin(np.arange(64), np.concatenate([data_env.lava_states,
                                                      data_env.wall_states,
                                                      [data_env.goal_state]]))
  np.testing.assert_array_equal(pol[open_cells], _policy(LONG_ROUTE)[open_cells])
  assert data_env.route_name(pol) == "long"
  assert data_env.route_name(_policy(LONG_ROUTE)) == "long"


def test_optimal_route_under_eval_dynamics_is_short_beside_lava(eval_env, data_env):
  p_mat, r = _independent_model(0.15)
  v_short = _value(p_mat, r, _policy(SHORT_ROUTE))
  _assert_optimal(p_mat, r, v_short)                   # SHORT_ROUTE is optimal at p = 0.15
  v_long = _value(p_mat, r, _policy(LONG_ROUTE))
  assert v_short[START] == pytest.approx(0.4339, abs=1e-4)
  assert v_long[START] == pytest.approx(0.3551, abs=1e-4)
  # The data-optimal (long) route is clearly worse at evaluation: 0.3551 / 0.4339 = 0.818.
  assert v_long[START] / v_short[START] == pytest.approx(0.818, abs=0.005)
  # The code under test agrees with the independent solves.
  q, v = vi.value_iteration(eval_env.P, eval_env.R, eval_env.gamma)
  np.testing.assert_allclose(v, v_short, atol=1e-8)
  assert eval_env.route_name(vi.greedy_policy(q)) == "short"
  q30, _ = vi.value_iteration(data_env.P, data_env.R, data_env.gamma)
  long_value = vi.policy_evaluation(eval_env.P, eval_env.R, eval_env.gamma,
                                    vi.greedy_policy(q30))
  np.testing.assert_allclose(long_value, v_long, atol=1e-8)


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
