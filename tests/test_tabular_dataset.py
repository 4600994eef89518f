"""The offline gridworld dataset: size, seeding, behavior mix, episode structure."""
import numpy as np
import pytest

from ccvl_tf.tabular.gridworld import GridWorld
from ccvl_tf.tabular import dataset
from ccvl_tf.tabular import value_iteration as vi


def test_size_and_determinism():
  a = dataset.make_gridworld_dataset(seed=7)
  b = dataset.make_gridworld_dataset(seed=7)
  c = dataset.make_gridworld_dataset(seed=8)
  assert len(a) == 2500 and a.state.shape == (2500,)
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x, y)
  assert not np.array_equal(a.action, c.action)


def test_behavior_policy_mix():
  env = GridWorld()
  pi = dataset.behavior_policy(env)
  np.testing.assert_allclose(pi.sum(1), 1.0)
  q, _ = vi.value_iteration(env.P, env.R, env.gamma)
  opt = vi.greedy_policy(q)
  # optimal action: 0.5 + 0.5 / 4 = 0.625; every other action 0.125
  np.testing.assert_allclose(pi[np.arange(64), opt], 0.625)
  assert np.isclose(pi, 0.125).sum() == 64 * 3


def test_empirical_behavior_mix_in_data():
  env = GridWorld()
  q, _ = vi.value_iteration(env.P, env.R, env.gamma)
  opt = vi.greedy_policy(q)
  stacked = dataset.collect(env, dataset.behavior_policy(env), 2500, seed=0, num_datasets=8)
  frac = np.mean(stacked.action == opt[stacked.state])
  # 20,000 draws of a Bernoulli(0.625): std 0.0034
  assert frac == pytest.approx(0.625, abs=0.015)


def test_episode_structure():
  env = GridWorld()
  d = dataset.make_gridworld_dataset(seed=0)
  term = d.terminal.astype(bool)
  # terminal exactly when s' is the goal or lava; reward only on reaching the goal
  np.testing.assert_array_equal(term, env.terminal_mask[d.next_state])
  np.testing.assert_array_equal(d.reward > 0, d.next_state == env.goal_state)
  # after a terminal transition the next one starts at the start state
  idx = np.nonzero(term[:-1])[0] + 1
  assert np.all(d.state[idx] == env.start_state)
  # otherwise transitions chain (except at time-outs, after env.horizon steps)
  chained = ~term[:-1]
  breaks = np.nonzero(chained & (d.next_state[:-1] != d.state[1:]))[0]
  assert np.all(d.state[breaks + 1] == env.start_state)
  assert d.state[0] == env.start_state


def test_bad_arguments():
  env = GridWorld()
  with pytest.raises(ValueError, match="num_transitions"):
    dataset.collect(env, dataset.behavior_policy(env), 0)
  with pytest.raises(ValueError, match="policy must be"):
    dataset.collect(env, np.ones((3, 4)) / 4, 10)
