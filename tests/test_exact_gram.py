"""CCVLAgent with count_gram='exact' (n(s)^-1 from the dataset's own Phi^T Phi at each refresh)
and the offline run's dataset states it reads (dataset.Batches.state_batches)."""
import ccvl_tf  # noqa: F401

import keras
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.algorithm import networks
from ccvl_tf.data.frame_store import FrameStore
from ccvl_tf.experiments.offline import dataset
from ccvl_tf.experiments.offline.seeds import Seeds

TINY = networks.QNetworkConfig(torso="mlp", mlp_units=(16,), n_cos=8, hidden_units=16)
EXACT = dict(count_gram="exact", count_normalization="none", count_ridge_mode="absolute",
             count_ridge=1e-3, num_deltas=2, num_pairs=2, alpha=0.5)
# The dataset: one-hot states 0-3 of 5, visited 1, 2, 3 and 6 times (|D| = 12); state 4 unseen.
VISITS = np.array([1, 2, 3, 6, 0])
STATES = np.repeat(np.arange(5), VISITS)


def _specs(num_obs=5, num_actions=3):
  return (ts.time_step_spec(tf.TensorSpec((num_obs,), tf.float32)),
          tensor_spec.BoundedTensorSpec((), tf.int64, 0, num_actions - 1))


class _DatasetStates:
  """dataset_observations: the dataset's one-hot states in 3 batches; counts the calls."""

  def __init__(self):
    self.calls = 0

  def __call__(self):
    self.calls += 1
    return iter(np.array_split(np.eye(5, dtype=np.float32)[STATES], 3))


def _agent(states=None, **cfg):
  keras.utils.set_random_seed(0)
  return ccvl_agent.CCVLAgent(*_specs(), ccvl_agent.CCVLConfig().with_values({**EXACT, **cfg}),
                              TINY, dataset_size=float(len(STATES)),
                              dataset_observations=states or _DatasetStates())


def _batch(seed=0, b=8):
  rng = np.random.default_rng(seed)
  eye = np.eye(5, dtype=np.float32)
  return {"observation": eye[rng.choice(STATES, b)], "action": rng.integers(0, 3, b).astype(
      np.int32), "reward": rng.random(b).astype(np.float32),
          "next_observation": eye[rng.choice(STATES, b)],
          "terminal": np.zeros(b, np.float32)}


def test_the_refresh_sums_every_dataset_state_and_ranks_the_unseen_state_first():
  agent = _agent()
  out = agent.refresh_exact_counts()
  phi = agent.online_network.phi_model({"observation": np.eye(5, dtype=np.float32)}).numpy()
  # Phi^T Phi over the 12 rows = sum_s n(s) phi_s phi_s^T (every state of every batch once).
  expected = (phi.T * VISITS) @ phi                                    # [D, D]
  assert out["rows"] == len(STATES)
  np.testing.assert_allclose(agent.counts.gram().numpy(), expected, rtol=1e-5, atol=1e-5)
  raw = agent.counts.raw_inverse_count(tf.constant(phi)).numpy()       # [5]
  # m_0: the mean raw n(s)^-1 over the dataset's rows (each state weighted by its visits).
  np.testing.assert_allclose(out["first_mean"], (raw * VISITS).sum() / VISITS.sum(), rtol=1e-5)
  # The state the data never visits gets the largest n(s)^-1, and the rarer a seen state the
  # larger its n(s)^-1 (4 seen one-hot states' features are generically independent).
  assert raw[4] > raw[:4].max()
  assert np.all(np.diff(raw[:4]) < 0), raw


def test_train_on_batch_refreshes_before_steps_0_and_every_period():
  states = _DatasetStates()
  agent = _agent(states, count_refresh_period=3)
  for step in range(7):
    agent.train_on_batch(_batch(step))
  assert states.calls == 3                       # before steps 0, 3 and 6
  first = float(agent.counts.first_mean.numpy())
  assert first > 0
  # The weight the objective uses: raw n(s)^-1 / m_0 (alpha rescaled once).
  obs = np.eye(5, dtype=np.float32)
  phi = agent.online_network.phi_model({"observation": obs})
  np.testing.assert_allclose(agent.counts.inverse_count(phi).numpy(),
                             agent.counts.raw_inverse_count(phi).numpy() / first, rtol=1e-6)
  np.testing.assert_allclose(agent.regularizer_weight(obs, 0.5).numpy(), 0.5 * np.sqrt(
      np.log(2.0) * agent.counts.raw_inverse_count(phi).numpy() / first), rtol=1e-5)


def test_the_exact_setting_is_validated_with_a_clear_error():
  with pytest.raises(ValueError, match="count_normalization='none'"):
    ccvl_agent.CCVLConfig(count_gram="exact").validate()
  with pytest.raises(ValueError, match="count_gram must be one of|'dataset'"):
    ccvl_agent.CCVLConfig(count_gram="dataset").validate()
  with pytest.raises(ValueError, match="dataset_observations"):
    ccvl_agent.CCVLAgent(*_specs(), ccvl_agent.CCVLConfig().with_values(EXACT), TINY,
                         dataset_size=12.0)
  running = ccvl_agent.CCVLAgent(*_specs(), ccvl_agent.CCVLConfig(), TINY, dataset_size=12.0)
  with pytest.raises(ValueError, match="count_gram='exact'"):
    running.refresh_exact_counts()


def test_checkpoint_round_trip_restores_the_exact_gram_and_m0(tmp_path):
  agent = _agent(count_refresh_period=2)
  for step in range(3):
    agent.train_on_batch(_batch(step))
  path = agent.make_checkpoint().save(str(tmp_path / "c"))
  gram = agent.counts.gram().numpy().copy()
  first = float(agent.counts.first_mean.numpy())
  expected = float(agent.train_on_batch(_batch(3))["loss"])   # step 3: no refresh (period 2)
  states = _DatasetStates()
  fresh = _agent(states, count_refresh_period=2)
  assert not fresh.counts.gram().numpy().any()     # nothing refreshed yet
  fresh.make_checkpoint().restore(path).assert_consumed()
  np.testing.assert_array_equal(fresh.counts.gram().numpy(), gram)
  assert float(fresh.counts.first_mean.numpy()) == first
  np.testing.assert_allclose(float(fresh.train_on_batch(_batch(3))["loss"]), expected,
                             rtol=1e-5)
  assert states.calls == 0                       # the restored precision served step 3


def test_state_batches_give_every_state_once_or_a_fixed_subsample():
  n = 2501                                       # 2,500 transitions: 3 batches of <= 1,000
  frames = np.zeros((n, 2, 2), np.uint8)
  frames[:, 0, 0] = np.arange(n) % 256
  frames[:, 0, 1] = np.arange(n) // 256
  store = FrameStore(frames, np.zeros(n), np.zeros(n), np.zeros(n), np.arange(n - 1),
                     stack_size=1)
  batches = dataset.Batches(store, 32, Seeds(0))
  ids = lambda bs: np.concatenate([b[:, 0, 0, 0].astype(int) + 256 * b[:, 0, 1, 0]
                                   for b in bs])                     # noqa: E731
  every = list(batches.state_batches(0)())
  assert [len(b) for b in every] == [1000, 1000, 500]
  np.testing.assert_array_equal(ids(every), np.arange(n - 1))
  sub = ids(batches.state_batches(300)())
  assert len(sub) == 300 and len(set(sub)) == 300 and np.all(np.diff(sub) > 0)
  np.testing.assert_array_equal(ids(batches.state_batches(300)()), sub)   # fixed
