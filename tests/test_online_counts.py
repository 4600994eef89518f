"""Online counts in the CCVL agents and the penalty diagnostic: the train step's
count update takes the online rule after start_online_counts, the weight w(s, delta) the agent
reports, its gradient effect by hand, and online_penalty's probe and plot."""
import ccvl_tf  # noqa: F401

import keras
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.agents import ccvl_bounds_agent
from ccvl_tf.algorithm.readings import paper
from ccvl_tf.algorithm.readings import ablation
from ccvl_tf.algorithm import networks
from ccvl_tf.experiments.online import penalty as online_penalty

TINY = networks.QNetworkConfig(torso="mlp", mlp_units=(16,), n_cos=8, hidden_units=16)


def _specs(num_obs=5, num_actions=3):
  return (ts.time_step_spec(tf.TensorSpec((num_obs,), tf.float32)),
          tensor_spec.BoundedTensorSpec((), tf.int64, 0, num_actions - 1))


def _batch(b, seed, num_obs=5, num_actions=3):
  rng = np.random.default_rng(seed)
  return {"observation": np.eye(num_obs, dtype=np.float32)[rng.integers(0, num_obs, b)],
          "action": rng.integers(0, num_actions, b).astype(np.int32),
          "reward": rng.random(b).astype(np.float32),
          "next_observation": np.eye(num_obs, dtype=np.float32)[rng.integers(0, num_obs, b)],
          "terminal": np.zeros(b, np.float32)}


def _agent(**cfg):
  keras.utils.set_random_seed(0)
  cfg = dict(dict(num_deltas=2, num_pairs=2, alpha=0.5, dr3_coef=0.0, count_refresh_period=1),
             **cfg)
  return ccvl_agent.CCVLAgent(*_specs(), ccvl_agent.CCVLConfig(**cfg), TINY, dataset_size=100)


def test_train_step_takes_the_online_count_rule_after_start_online_counts():
  """One offline step (traces the step with the offline rule), then start_online_counts(8, 4):
  a step on 8 online rows adds 8 / 4 = 2 to |D| (100 -> 102), folds those rows' phi phi^T
  into C_on (its first fold: their plain mean), leaves C_off and the normalization's running
  mean untouched."""
  agent = _agent()
  agent.train_on_batch(_batch(8, 0))
  counts = agent.counts
  frozen = float(counts.running_mean_inverse_count().numpy())
  c_off = counts.second_moment.numpy().copy()
  assert agent.start_online_counts(online_rows=8, samples_per_insert=4.0)
  batch = _batch(8, 1)
  phi = agent.online_network.phi_model({"observation": batch["observation"]}).numpy()  # [8, D]
  agent.train_on_batch(batch)
  assert float(counts.total_size().numpy()) == 102.0
  np.testing.assert_allclose(counts.online_moment.numpy(), phi.T @ phi / 8, rtol=1e-4,
                             atol=1e-6)
  np.testing.assert_array_equal(counts.second_moment.numpy(), c_off)
  assert float(counts.running_mean_inverse_count().numpy()) == frozen
  # The precision was refreshed (period 1) with |D_off| C_off + n_on C_on.
  gram = 100 * c_off + 2 * phi.T @ phi / 8
  lam = agent.config.count_ridge * np.trace(gram) / gram.shape[0]
  assert abs(float(counts.ridge_used.numpy()) - lam) < 1e-4 * lam
  p = np.linalg.inv(gram + lam * np.eye(gram.shape[0]))
  np.testing.assert_allclose(counts.raw_inverse_count(phi).numpy(),
                             np.minimum(np.einsum("bd,de,be->b", phi, p, phi), 1.0), rtol=1e-3)


def test_regularizer_weight_is_alpha_sqrt_log_inverse_delta_times_the_inverse_count():
  agent = _agent()
  agent.train_on_batch(_batch(8, 0))
  obs = np.eye(5, dtype=np.float32)
  phi = agent.online_network.phi_model({"observation": obs})
  inv = agent.counts.inverse_count(phi).numpy()                       # normalized, as trained
  np.testing.assert_allclose(agent.regularizer_weight(obs, 0.25).numpy(),
                             0.5 * np.sqrt(np.log(4.0) * inv), rtol=1e-5)
  off = _agent(reading=ablation.Ablation(count_weight="off"))
  np.testing.assert_allclose(off.regularizer_weight(obs, 0.25).numpy(),
                             np.full(5, 0.5 * np.sqrt(np.log(4.0))), rtol=1e-6)
  with pytest.raises(ValueError, match="delta"):
    agent.regularizer_weight(obs, 1.0)


def test_upper_bound_weight_uses_alpha_u_and_exact_counts_report_their_weight():
  """CCVLBoundsAgent with exact n(s) = [1, 2, 4, 4, 1]^-1 ... (an inverse_count_fn): Q_l's
  weight at delta 0.5 is alpha sqrt(log 2 / n(s)), Q_u's alpha_u sqrt(log 2 / n(s)); neither
  starts online counts (no linear estimate)."""
  inv = tf.constant([1.0, 0.5, 0.25, 0.25, 1.0])
  keras.utils.set_random_seed(0)
  agent = ccvl_bounds_agent.CCVLBoundsAgent(
      *_specs(), ccvl_agent.CCVLConfig(num_deltas=2, num_pairs=2, alpha=0.5, dr3_coef=0.0),
      TINY, ccvl_bounds_agent.BoundsConfig(upper_alpha=0.2),
      inverse_count_fn=lambda obs: tf.gather(inv, tf.argmax(obs, -1)))
  obs = np.eye(5, dtype=np.float32)
  np.testing.assert_allclose(agent.lower.regularizer_weight(obs).numpy(),
                             0.5 * np.sqrt(np.log(2) * inv.numpy()), rtol=1e-6)
  np.testing.assert_allclose(agent.upper.regularizer_weight(obs).numpy(),
                             0.2 * np.sqrt(np.log(2) * inv.numpy()), rtol=1e-6)
  assert online_penalty.start_counts(agent, 8, 4.0, log=lambda s: None) == []


def test_regularizer_gradient_shrinks_by_sqrt_n_over_n_plus_k():
  """The gradient of Algorithm 1's regularizer w * (logsumexp_a Q - Q(s, a_D)) w.r.t. Q at a
  state with n(s)^-1 = 1/n is, by hand, alpha sqrt(log(1/delta_1) / n) (softmax(Q) -
  onehot(a_D)) / (B N M); with k more online visits (n(s)^-1 = 1 / (n + k)) it is the same
  times sqrt(n / (n + k)). n = 2, k = 4, alpha 0.3, delta_1 = 0.2, B = N = M = 1."""
  q = tf.Variable([[[1.0, 0.0, 2.0]]])                                 # [B=1, N=1, A=3]
  a, d1, alpha = tf.constant([1]), tf.constant([[[0.2]]]), 0.3

  def grad(inverse_count):
    with tf.GradientTape() as tape:
      res = paper.loss(q, a, tf.zeros([1, 1, 1]), d1, tf.constant([inverse_count]),
                             alpha)
      reg = tf.reduce_mean(res["regularizer"])
    return tape.gradient(reg, q).numpy()[0, 0]

  soft = np.exp([1.0, 0.0, 2.0]) / np.exp([1.0, 0.0, 2.0]).sum()
  by_hand = 0.3 * np.sqrt(np.log(1 / 0.2) / 2) * (soft - np.eye(3)[1])
  np.testing.assert_allclose(grad(1 / 2), by_hand, rtol=1e-5)
  np.testing.assert_allclose(grad(1 / 6), by_hand * np.sqrt(2 / 6), rtol=1e-5)


class _StubLearner:
  """w(s, delta) = s[0] + s[1] (a 'state' is two numbers), alpha 2, counts of |D| 7."""
  penalty_alpha = 2.0

  class counts:  # pylint: disable=invalid-name
    @staticmethod
    def total_size():
      return tf.constant(7.0)

  def regularizer_weight(self, obs, delta):
    assert delta == 0.5
    return tf.reduce_sum(tf.constant(obs, tf.float32), -1)


class _StubAgent:
  def guarded_learners(self):
    return {"": _StubLearner()}


def test_probe_means_by_hand_and_a_new_window_per_measure():
  offline = np.array([[1.0, 0.0], [3.0, 0.0]])                        # w = 1, 3
  probe = online_penalty.PenaltyProbe(offline, capacity=4, seed=0)
  out = probe.measure(_StubAgent())                                    # no new states yet
  assert out == {"penalty/lower_weight_offline": 2.0,
                 "penalty/lower_inverse_count_offline": pytest.approx(
                     np.mean([(1 / 2) ** 2, (3 / 2) ** 2]) / np.log(2)),
                 "penalty/lower_dataset_size": 7.0, "penalty/new_states": 0.0}
  probe.add(np.array([[0.5, 0.5], [2.0, 0.0]]))                        # w = 1, 2
  probe.add(np.array([[0.0, 3.0]]))                                    # w = 3
  out = probe.measure(_StubAgent())
  assert out["penalty/lower_weight_new"] == 2.0 and out["penalty/new_states"] == 3.0
  assert "penalty/lower_weight_new" not in probe.measure(_StubAgent())  # window restarted


def test_probe_reservoir_is_a_uniform_sample_of_the_window():
  """Rows 0..99 through a reservoir of 10, 2000 times: every row is kept with probability
  10 / 100 (mean count 200 per row; a binomial sd of ~13.4: all within 5 sd)."""
  kept = np.zeros(100)
  probe = online_penalty.PenaltyProbe(None, capacity=10, seed=1)
  for _ in range(2000):
    for start in range(0, 100, 32):
      probe.add(np.arange(start, min(start + 32, 100), dtype=np.float32)[:, None])
    kept[probe.new_observations[:, 0].astype(int)] += 1
    probe.measure(_StubAgent())
  assert np.all(np.abs(kept - 200) < 5 * np.sqrt(2000 * 0.1 * 0.9)), kept


def test_offline_states_file_errors_and_plot(tmp_path):
  path = str(tmp_path / "states.npz")
  np.savez(path, obs=np.zeros((3, 2)))
  with pytest.raises(ValueError, match="no 'observation'"):
    online_penalty.offline_states("minatar/Breakout", path, 10, 0)
  np.savez(path, observation=np.arange(12.0).reshape(6, 2))
  assert online_penalty.offline_states("minatar/Breakout", path, 4, 0).shape == (4, 2)
  assert online_penalty.offline_states("minatar/Breakout", None, 4, 0) is None
  assert online_penalty.offline_states("gridworld", None, 16, 0).shape == (16, 64)
  rows = [{"online_env_steps": 0.0, "penalty/lower_weight_offline": 0.1,
           "tight/lower_minus_mc@0.5": -0.2},
          {"online_env_steps": 100.0, "penalty/lower_weight_new": 0.05,
           "penalty/lower_weight_offline": 0.09, "tight/lower_minus_mc@0.5": -0.1,
           "tight/upper_minus_mc@0.5": 0.3}]
  online_penalty.plot({"run": rows}, str(tmp_path / "p.png"), title="t")
  assert (tmp_path / "p.png").stat().st_size > 1000


def test_penalty_plot_keeps_each_run_one_colour_where_a_panel_lacks_runs(tmp_path):
  """Only the bounds run has Q_u rows: its Q_u line must have the bounds run's legend colour
  (matplotlib's per-axes colour cycle gave it the first run's colour)."""
  lower_only = [{"online_env_steps": s, "penalty/lower_weight_new": 0.1,
                 "penalty/lower_weight_offline": 0.1, "tight/lower_minus_mc@0.5": -0.1}
                for s in (0.0, 100.0)]
  bounds = [dict(r, **{"tight/upper_minus_mc@0.5": 0.2}) for r in lower_only]
  drawn = online_penalty.plot({"Q_l only": lower_only, "bounds": bounds},
                              str(tmp_path / "p.png"))
  legend = drawn["legend"]
  assert set(legend) == {"Q_l only", "bounds"} and legend["Q_l only"] != legend["bounds"]
  qu = drawn["panels"]["Q_u - MC return (delta 0.5)"]
  assert qu == {"bounds": legend["bounds"]}
  for lines in drawn["panels"].values():
    assert all(colour == legend[name] for name, colour in lines.items())
