"""Upper bounds Q_u(s, a, delta): Eq. (upper update) loss by hand, checkpoint layout, policies,
Q_u >= Q_l on the data after a short training on a tiny chain MDP, and both bounds' train step
under MirroredStrategy (ccvl_tf/experiments/online/distributed.py) equal to the single-device step."""
import math
import os
import subprocess
import sys

import ccvl_tf  # noqa: F401

import keras
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.agents import ccvl_bounds_agent as cba
from ccvl_tf.algorithm import losses
from ccvl_tf.algorithm import readings
from ccvl_tf.algorithm.readings import paper
from ccvl_tf.algorithm import upper_losses
from ccvl_tf.algorithm import networks
from ccvl_tf.algorithm import policies

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = networks.QNetworkConfig(torso="mlp", mlp_units=(16,), n_cos=8, hidden_units=16)


def _specs(num_obs, num_actions):
  obs = tensor_spec.BoundedTensorSpec((num_obs,), tf.float32, 0.0, 1.0)
  act = tensor_spec.BoundedTensorSpec((), tf.int32, 0, num_actions - 1)
  return ts.time_step_spec(obs), act


def test_upper_loss_by_hand():
  # B=1, N=1, A=2, M=2. Q_u(s, ., delta) = [1, 3], a_D = 0, targets y = [2, 0.5],
  # log(1/delta_1) = [1, 4], n(s)^-1 = 0.25, alpha = 2 -> weights 2 sqrt(1 * .25) = 1, 2 sqrt(4 * .25) = 2.
  q = tf.constant([[[1.0, 3.0]]])
  a = tf.constant([0])
  y = tf.constant([[[2.0, 0.5]]])
  d1 = tf.constant([[[math.exp(-1.0), math.exp(-4.0)]]])
  inv = tf.constant([0.25])
  # softmin: R_u = Q(a_D) + logsumexp(-Q) = 1 + log(e^-1 + e^-3) = log(1 + e^-2) = 0.126928
  r_u = math.log(1.0 + math.exp(-2.0))
  # L_1 = 1 * R_u + (1 - 2)^2 / 2 = 0.626928 ; L_2 = 2 * R_u + (1 - 0.5)^2 / 2 = 0.378857
  l1, l2 = r_u + 0.5, 2 * r_u + 0.125
  res = upper_losses.ccvl_upper_loss(q, a, y, d1, inv, 2.0, "squared")
  np.testing.assert_allclose(res["gap"].numpy(), [[r_u]], rtol=1e-5)
  np.testing.assert_allclose(res["pair_losses"].numpy(), [[[l1, l2]]], rtol=1e-5)
  np.testing.assert_allclose(res["loss"].numpy(), min(l1, l2), rtol=1e-5)   # min over pairs
  assert int(res["argmax_j"][0, 0]) == 1
  res_max = upper_losses.ccvl_upper_loss(q, a, y, d1, inv, 2.0, "squared", pair_reduction="max")
  np.testing.assert_allclose(res_max["loss"].numpy(), max(l1, l2), rtol=1e-5)
  # Literal sign flip: R = -(logsumexp Q - Q(a_D)) = 1 - (3 + log(1 + e^-2)) = -2.126928
  res_neg = upper_losses.ccvl_upper_loss(q, a, y, d1, inv, 2.0, "squared", regularizer="neg_logsumexp")
  r_neg = 1.0 - (3.0 + r_u)
  np.testing.assert_allclose(res_neg["pair_losses"].numpy(),
                             [[[r_neg + 0.5, 2 * r_neg + 0.125]]], rtol=1e-5)
  # The lower-bound CQL gap at the same numbers (logsumexp - Q(a_D) = 2 + log(1 + e^-2)) differs.
  lower = paper.loss(q, a, y, d1, inv, 2.0, "squared")
  np.testing.assert_allclose(lower["gap"].numpy(), [[2.0 + r_u]], rtol=1e-5)


def test_upper_loss_gradient_wrt_q_by_hand():
  """dL/dQ_u on the numbers of the test above (B = N = 1, a_D = 0, alpha = 2, min over pairs).

  L_j = w_j R_u + TD(Q_u(a_D) - y_j), R_u = Q_u(a_D) + logsumexp_a(-Q_u), so
    dR_u/dQ_u = onehot(a_D) - softmax(-Q_u),
    dL/dQ_u   = w_j* (onehot(a_D) - softmax(-Q_u)) + (Q_u(a_D) - y_j*) onehot(a_D)
  with j* = argmin_j L_j = pair 2 (L = [0.6269, 0.3789]): w = 2, x = 1 - 0.5 = 0.5.
  softmax(-[1, 3]) = [1, e^-2] / (1 + e^-2) = [0.8807971, 0.1192029]:
    dL/dQ_u = [2 (1 - 0.8807971) + 0.5, -2 (0.1192029)] = [0.7384058, -0.2384058].
  With pair_reduction='max' (j* = pair 1: w = 1, x = 1 - 2 = -1):
    [(1 - 0.8807971) - 1, -0.1192029] = [-0.8807971, -0.1192029].
  No gradient reaches delta_1 or n(s)^-1.
  """
  q = tf.constant([[[1.0, 3.0]]])
  d1 = tf.constant([[[math.exp(-1.0), math.exp(-4.0)]]])
  inv = tf.constant([0.25])
  for reduction, expected in (("min", [0.7384058, -0.2384058]),
                              ("max", [-0.8807971, -0.1192029])):
    with tf.GradientTape(persistent=True) as tape:
      tape.watch([q, d1, inv])
      res = upper_losses.ccvl_upper_loss(q, tf.constant([0]), tf.constant([[[2.0, 0.5]]]), d1, inv,
                                   2.0, "squared", pair_reduction=reduction)
    np.testing.assert_allclose(tape.gradient(res["loss"], q).numpy()[0, 0], expected,
                               rtol=1e-5, err_msg=reduction)
    assert tape.gradient(res["loss"], d1) is None and tape.gradient(res["loss"], inv) is None


def test_upper_regularizer_pushes_the_lowest_action_up_and_stays_bounded():
  # Q = [0, 5, -5], a_D = 0. d R / d Q for the softmin form: [1 - w_0, -w_1, -w_2], w = softmin
  # weights = softmax(-Q); a gradient step (Q -= lr * grad) raises the lowest action most and
  # barely moves the largest one (w_1 = e^-5 / sum ~ 4.5e-5).
  q = tf.Variable([[[0.0, 5.0, -5.0]]])
  for kind, expect in (("softmin", None), ("neg_logsumexp", None)):
    with tf.GradientTape() as tape:
      gap, _ = upper_losses.upper_gap(q, tf.constant([0]), kind)
    g = tape.gradient(gap, q).numpy()[0, 0]
    if kind == "softmin":
      w = np.exp(-np.array([0.0, 5.0, -5.0]))
      w /= w.sum()
      np.testing.assert_allclose(g, [1 - w[0], -w[1], -w[2]], rtol=1e-5, atol=1e-7)
      assert g[2] < -0.99 and abs(g[1]) < 1e-4      # lowest up, largest ~untouched
      assert float(gap[0, 0]) >= 0.0
    else:
      p = np.exp(np.array([0.0, 5.0, -5.0]))
      p /= p.sum()
      # -(logsumexp - Q_D): d/dQ = [1 - p_0, -p_1, -p_2]: the LARGEST action is pushed up with
      # weight ~1 however large it already is -- the linear divergence of the literal flip.
      np.testing.assert_allclose(g, [1 - p[0], -p[1], -p[2]], rtol=1e-5, atol=1e-7)
      assert g[1] < -0.99


def test_config_errors_name_the_value():
  with pytest.raises(ValueError, match="upper_regularizer.*'bogus'"):
    cba.BoundsConfig(upper_regularizer="bogus").validate()
  with pytest.raises(ValueError, match="beta must be > 0"):
    cba.BoundsConfig(beta=0.0).validate()
  with pytest.raises(ValueError, match="explore_delta"):
    cba.BoundsConfig(explore_delta=1.0).validate()
  with pytest.raises(ValueError, match="pair_reduction"):
    upper_losses.ccvl_upper_loss(tf.zeros([1, 1, 2]), tf.constant([0]), tf.zeros([1, 1, 1]),
                           tf.fill([1, 1, 1], 0.5), tf.constant([1.0]), 1.0,
                           pair_reduction="median")


def test_upper_objective_is_the_upper_bounds_objective():
  """UpperCCVLAgent's step loss is UpperBound's objective at the step's confidences; it reports 'upper_gap' (the lower: 'cql_gap'), and ignores the lower reading's
  delta_2 rewrite (same loss for 'paper' and 'bound', unlike the lower bound)."""
  losses_by_objective = {}
  for objective, reading in (("algorithm1", readings.paper.Paper()),
                             ("bound", readings.bound.Bound())):
    keras.utils.set_random_seed(5)
    cfg = ccvl_agent.CCVLConfig(num_deltas=3, num_pairs=2, dr3_coef=0.1, reading=reading)
    upper = cba.UpperCCVLAgent(*_specs(4, 3), cfg, TINY, dataset_size=100)
    keras.utils.set_random_seed(5)
    lower = ccvl_agent.CCVLAgent(*_specs(4, 3), cfg, TINY, dataset_size=100)
    batch = upper.prepare_batch(_chain_data(np.random.default_rng(0), 16))
    m_upper = upper._objective(batch, upper.step_seed(), training=False)  # pylint: disable=protected-access
    m_lower = lower._objective(batch, lower.step_seed(), training=False)  # pylint: disable=protected-access
    assert "upper_gap" in m_upper and "cql_gap" not in m_upper
    assert "cql_gap" in m_lower and "upper_gap" not in m_lower
    delta, delta_1, delta_2 = losses.sample_confidences(16, 3, 2, upper.step_seed())
    by_hand = cba.UpperBound(cfg, cba.BoundsConfig()).objective(
        upper.online_network, upper.target_network, batch, delta, delta_1, delta_2,
        lambda obs, phi: upper.counts.inverse_count(phi), cfg)
    np.testing.assert_allclose(float(m_upper["loss"]), float(by_hand["loss"]), rtol=1e-6)
    losses_by_objective[objective] = (float(m_upper["loss"]), float(m_lower["loss"]))
  assert losses_by_objective["algorithm1"][0] == losses_by_objective["bound"][0]
  assert losses_by_objective["algorithm1"][1] != losses_by_objective["bound"][1]


def _chain_data(rng, n):
  """A 4-state chain, 3 actions: 0 left, 1 right, 2 stay; reward 1 on reaching state 3
  (terminal). The behaviour policy never takes action 2 in states 0 and 1 (OOD there)."""
  s = rng.integers(0, 3, n)
  a = np.where(s < 2, rng.integers(0, 2, n), rng.integers(0, 3, n))
  s2 = np.clip(np.where(a == 0, s - 1, np.where(a == 1, s + 1, s)), 0, 3)
  r = (s2 == 3).astype(np.float32)
  eye = np.eye(4, dtype=np.float32)
  return {"observation": eye[s], "action": a.astype(np.int32), "reward": r,
          "next_observation": eye[s2], "terminal": r.copy()}


@pytest.mark.slow
@pytest.mark.parametrize("head,steps", [("cosine", 400), ("monotone", 1200)])
def test_upper_bound_above_lower_bound_on_data_after_training(head, steps):
  """A short training on the chain: Q_u(s, a_D, delta) >= Q_l(s, a_D, delta) on the data and
  max_a Q_u >= max_a Q_l at the data states, for a grid of deltas (a random init has no such
  ordering, checked first). Measured: the cosine head after 400 steps, at every delta by a
  margin of ~0.3-1 in value; the monotone head after 400 steps at deltas <= 0.7 but not at 0.9
  (smallest margin -0.17: its top increments learn slower), after 1200 at every delta (smallest
  margin +0.17)."""
  keras.utils.set_random_seed(0)
  cfg = ccvl_agent.CCVLConfig(num_deltas=4, num_pairs=2, alpha=0.5, gamma=0.9, td_loss="squared",
                              dr3_coef=0.0, learning_rate=3e-3, adam_epsilon=1e-7,
                              target_update_period=10, delta_head=head)
  agent = cba.CCVLBoundsAgent(*_specs(4, 3), cfg, TINY, dataset_size=2000)
  rng = np.random.default_rng(0)
  data = _chain_data(rng, 2000)
  grid = np.array([0.1, 0.3, 0.5, 0.7, 0.9], np.float32)
  states = np.eye(4, dtype=np.float32)[:3]

  def gaps():
    ql = agent.lower.q_values(states, grid).numpy()   # [3, K, A]
    qu = agent.upper.q_values(states, grid).numpy()
    return ql, qu

  ql0, qu0 = gaps()
  assert not np.all(qu0 >= ql0)        # the ordering is learned, not an artefact of the init
  for step in range(steps):
    idx = rng.integers(0, 2000, 64)
    agent.train_on_batch({k: v[idx] for k, v in data.items()})
  assert int(agent.train_step_counter.numpy()) == steps
  assert int(agent.upper.train_step_counter.numpy()) == steps
  ql, qu = gaps()
  seen = np.array([[1, 1, 0], [1, 1, 0], [1, 1, 1]], bool)   # (s, a) pairs in the data
  for k in range(len(grid)):
    assert np.all(qu[:, k][seen] >= ql[:, k][seen]), (grid[k], qu[:, k], ql[:, k])
    assert np.all(qu[:, k].max(-1) >= ql[:, k].max(-1))
  # OOD action 2 at states 0, 1: the upper bound raises it relative to the lower bound.
  assert np.all(qu[:2, :, 2] - ql[:2, :, 2] > 0)


@pytest.mark.parametrize("head", networks.DELTA_HEADS)
def test_checkpoint_layout_restores_a_plain_ccvl_checkpoint(tmp_path, head):
  keras.utils.set_random_seed(1)
  cfg = ccvl_agent.CCVLConfig(num_deltas=2, num_pairs=2, dr3_coef=0.0, delta_head=head)
  plain = ccvl_agent.CCVLAgent(*_specs(4, 3), cfg, TINY, dataset_size=100)
  plain.train_step_counter.assign(7)
  path = plain.make_checkpoint().save(str(tmp_path / "plain"))
  bounds = cba.CCVLBoundsAgent(*_specs(4, 3), cfg, TINY, dataset_size=100)
  bounds.lower.make_checkpoint().restore(path).assert_existing_objects_matched()
  bounds.copy_lower_to_upper()
  obs = np.eye(4, dtype=np.float32)
  grid = np.array([1e-6, 0.3, 0.7, 1 - 1e-6], np.float32)
  q_l = plain.q_values(obs, grid).numpy()                                # [S, K, A]
  if head == "cosine":  # Q_u starts as a copy of Q_l
    expected_u = q_l
  else:  # the monotone head's Q_u falls with delta: Q_l's family reflected
    expected_u = q_l[:, :1] + q_l[:, -1:] - q_l
    assert np.all(np.diff(bounds.upper.q_values(obs, grid).numpy(), axis=1) <= 1e-6)
  np.testing.assert_allclose(bounds.lower.q_values(obs, grid), q_l)
  np.testing.assert_allclose(bounds.upper.q_values(obs, grid), expected_u, rtol=1e-5, atol=1e-6)
  assert int(bounds.train_step_counter.numpy()) == 7
  # The bounds checkpoint round-trips both bounds.
  p2 = bounds.make_checkpoint().save(str(tmp_path / "bounds"))
  other = cba.CCVLBoundsAgent(*_specs(4, 3), cfg, TINY, dataset_size=100)
  other.make_checkpoint().restore(p2).assert_consumed()
  np.testing.assert_allclose(other.upper.q_values(obs, grid), expected_u, rtol=1e-5, atol=1e-6)


# Q(s, ., delta) = TABLE[s] for every delta: identity MLP torso on one-hot states, the delta
# embedding's kernel 0 and bias 1 (eta(delta) = 1), no hidden layer, output kernel = the table.
TABLE_NET = networks.QNetworkConfig(torso="mlp", mlp_units=(4,), n_cos=8, hidden_units=0)
TABLE_CFG = ccvl_agent.CCVLConfig(dr3_coef=0.0, delta_head="cosine")  # the layers set by hand


def _set_q_table(agent, table):
  table = np.asarray(table, np.float32)                              # [S = 4, A]
  layers = {l.name.rsplit("_", 1)[-1]: l for l in agent.online_network.q_model.layers
            if isinstance(l, keras.layers.Dense)}
  layers["mlp0"].set_weights([np.eye(4, dtype=np.float32), np.zeros(4, np.float32)])
  layers["embed"].set_weights([np.zeros((8, 4), np.float32), np.ones(4, np.float32)])
  layers["q"].set_weights([table, np.zeros(table.shape[1], np.float32)])


def test_exploration_policy_is_eq_upper_policy():
  """Eq. upper policy, argmax over A_l = {a : Q_l >= beta max Q_l} (plus argmax Q_l) of Q_u,
  beta = 0.5, on hand-set tables (rows: states 0..3, columns: actions 0..2):

    s0: Q_l [1, 0.6, 0.2]   beta max = 0.5  -> A_l = {0, 1};  Q_u [1.1, 1.5, 3] -> 1
    s1: Q_l [0.4, 2, 1.2]   beta max = 1    -> A_l = {1, 2};  Q_u [5, 2.1, 2.5] -> 2
    s2: Q_l [0.3, 0.1, 0.2] beta max = 0.15 -> A_l = {0, 2};  Q_u [0.5, 0.9, 0.4] -> 0
    s3: Q_l [-1, -2, -0.5]  beta max = -0.25: no action qualifies, so A_l = {argmax Q_l} = {2}
                                                               Q_u [3, 4, 0] -> 2
  Expected [1, 2, 0, 2]: not argmax Q_l ([0, 1, 0, 2]) nor argmax Q_u ([2, 0, 1, 1]).
  """
  q_lower = [[1.0, 0.6, 0.2], [0.4, 2.0, 1.2], [0.3, 0.1, 0.2], [-1.0, -2.0, -0.5]]
  q_upper = [[1.1, 1.5, 3.0], [5.0, 2.1, 2.5], [0.5, 0.9, 0.4], [3.0, 4.0, 0.0]]
  keras.utils.set_random_seed(2)
  agent = cba.CCVLBoundsAgent(*_specs(4, 3), TABLE_CFG, TABLE_NET,
                              cba.BoundsConfig(beta=0.5, explore_delta=0.5, explore_epsilon=0.0),
                              dataset_size=10)
  _set_q_table(agent.lower, q_lower)
  _set_q_table(agent.upper, q_upper)
  obs = np.eye(4, dtype=np.float32)
  for bound, table in ((agent.lower, q_lower), (agent.upper, q_upper)):   # the tables are set
    np.testing.assert_allclose(bound.q_values(obs, [0.1, 0.5, 0.9]).numpy(),
                               np.repeat(np.asarray(table)[:, None], 3, 1), rtol=1e-6)
  step = ts.restart(tf.constant(obs), batch_size=4)
  np.testing.assert_array_equal(agent.exploration_policy.action(step).action.numpy(),
                                [1, 2, 0, 2])
  np.testing.assert_array_equal(agent.bounds_policy.action(step).action.numpy(), [1, 2, 0, 2])
  np.testing.assert_array_equal(agent.policy.action(step).action.numpy(), [0, 1, 0, 2])


_MIRRORED_SCRIPT = r"""
import numpy as np, tensorflow as tf
import ccvl_tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.experiments.online import distributed
from ccvl_tf.experiments.online import start as online_start
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
tss, act = online_config.specs("gridworld")
bounds = online_config.OnlineConfig().bounds()
keras.utils.set_random_seed(0)
with strategy.scope():
  dist = online_config.build_agent("gridworld", tss, act, bounds)
single = online_config.build_agent("gridworld", tss, act, bounds)
for part in ("lower", "upper"):
  for name in ("online_variables", "target_variables"):
    for a, b in zip(getattr(getattr(dist, part), name), getattr(getattr(single, part), name)):
      b.assign(a.read_value())
step = distributed.make_learner_step(strategy, dist)
it = online_start.offline_gridworld_batches(0, 16)
for i in range(12):
  half = {k: tf.constant(v) for k, v in next(it).items()}
  m = step({k: tf.concat([v, v], 0) for k, v in half.items()})   # each replica gets `half`
  s = single.train_on_batch(half)
  assert abs(float(m["loss"]) - float(s["loss"])) < 1e-5, (i, float(m["loss"]), float(s["loss"]))
obs = np.eye(64, dtype=np.float32)
for part in ("lower", "upper"):
  d = np.abs(getattr(dist, part).q_values(obs, 0.5) - getattr(single, part).q_values(obs, 0.5))
  print(part, float(d.max()))
print("replicas", strategy.num_replicas_in_sync, "step", int(dist.train_step_counter.numpy()),
      type(dist.lower.online_variables[0]).__name__)
"""


@pytest.mark.slow
def test_mirrored_step_equals_single_device_step():
  """MirroredStrategy over two logical CPUs (a subprocess: devices must be split before TF
  starts). Each replica gets the same half batch, so the averaged gradient equals the
  single-device gradient on that half: 12 steps of both bounds must give the same weights."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
  proc = subprocess.run([sys.executable, "-c", _MIRRORED_SCRIPT], capture_output=True,
                        text=True, env=env, cwd=REPO, timeout=150)
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = dict(l.split(" ", 1) for l in proc.stdout.strip().splitlines())
  assert float(lines["lower"]) < 1e-5 and float(lines["upper"]) < 1e-5, proc.stdout
  assert lines["replicas"].startswith("2 step 12 MirroredVariable"), proc.stdout



def _set_delta_dependent_table(agent, table, c=1.0):
  """Q(s, a, delta) = table[s, a] * eta(delta), eta(delta) = ReLU(1 + c + c cos(pi delta)) (the
  first cosine feature only): TABLE_NET with the embedding made delta-dependent."""
  _set_q_table(agent, table)
  layers = {l.name.rsplit("_", 1)[-1]: l for l in agent.online_network.q_model.layers
            if isinstance(l, keras.layers.Dense)}
  kernel = np.zeros((8, 4), np.float32)
  kernel[0] = c
  layers["embed"].set_weights([kernel, np.full(4, 1.0 + c, np.float32)])


def test_bounds_policy_draws_delta_from_its_belief_and_updates_it_from_q_lower():
  """Default BoundsConfig (explore_delta None): Eq. upper policy with delta ~ b(h).

  Grid K = 2: delta in {0.25, 0.75}; eta(0.25) = 2 + cos(pi/4) = 2.70711,
  eta(0.75) = 2 - cos(pi/4) = 1.29289. Q_l(s0) = [1, 0, 0] * eta, Q_l(s1) = 0; Q_u(s0) = [5, 0, 0]:
  the safe set at s0 is {0} (beta 0.5), so the policy takes a = 0 at s0.
  1. The delta acted with follows the belief in the state: log b = [0, -50] -> 0.25,
     [-50, 0] -> 0.75 (drawn at the FIRST step, resample='episode').
  2. Transition (s0, a=0, r = 2.70711, s1), discount 1, T = 1: Bellman errors of Q_l
     e = (eta - r)^2 = [0, 2.0] -> b = [1, e^-2] / (1 + e^-2) = [0.880797, 0.119203].
  """
  keras.utils.set_random_seed(3)
  bounds = cba.BoundsConfig(beta=0.5, explore_epsilon=0.0, num_grid_deltas=2,
                            belief_temperature=1.0)
  assert bounds.explore_delta is None
  agent = cba.CCVLBoundsAgent(*_specs(4, 3), TABLE_CFG, TABLE_NET,
                              bounds, dataset_size=10)
  assert isinstance(agent.bounds_policy, policies.ConfidenceAdaptivePolicy)
  zeros = [0.0, 0.0, 0.0]
  _set_delta_dependent_table(agent.lower, [[1.0, 0.0, 0.0], zeros, zeros, zeros])
  _set_q_table(agent.upper, [[5.0, 0.0, 0.0], zeros, zeros, zeros])
  eta = 2.0 + np.cos(np.pi / 4), 2.0 - np.cos(np.pi / 4)
  np.testing.assert_allclose(agent.lower.q_values(np.eye(4, dtype=np.float32)[:1],
                                                  [0.25, 0.75]).numpy()[0, :, 0], eta,
                             rtol=1e-5)
  policy = agent.bounds_policy
  s0, s1 = np.eye(4, dtype=np.float32)[None, 0], np.eye(4, dtype=np.float32)[None, 1]
  first = ts.restart(tf.constant(s0), batch_size=1)
  for log_b, expected in (([0.0, -50.0], 0.25), ([-50.0, 0.0], 0.75)):
    state = policy.get_initial_state(1)
    state["log_belief"] = tf.constant([log_b])
    step = policy.action(first, state)
    assert float(step.info.delta[0]) == pytest.approx(expected)
    assert int(step.action[0]) == 0
  step = policy.action(first, policy.get_initial_state(1))
  np.testing.assert_allclose(tf.exp(step.state["log_belief"]).numpy(), [[0.5, 0.5]])
  mid = ts.transition(tf.constant(s1), reward=tf.constant([eta[0]], tf.float32),
                      discount=tf.constant([1.0]))
  step = policy.action(mid, step.state)
  np.testing.assert_allclose(tf.exp(step.state["log_belief"]).numpy(),
                             [[0.880797, 0.119203]], atol=1e-5)
  # The epsilon-greedy exploration policy carries the same state (the belief).
  assert set(agent.exploration_policy.policy_state_spec) == set(policy.policy_state_spec)


def test_fixed_explore_delta_keeps_the_fixed_bounds_policy():
  agent = cba.CCVLBoundsAgent(*_specs(4, 3), TABLE_CFG, TABLE_NET,
                              cba.BoundsConfig(explore_delta=0.3), dataset_size=10)
  assert isinstance(agent.bounds_policy, policies.BoundsPolicy)
  with pytest.raises(ValueError, match="belief_temperature"):
    cba.BoundsConfig(belief_temperature=float("inf")).validate()


def test_lower_only_agent_explores_with_the_belief_over_q_lower():
  """LowerCCVLAgent (fine-tuning's --agent=ccvl_lower): Q_l alone, explored with the
  confidence-adaptive policy over Q_l. Same table as above (K = 2, delta in {0.25, 0.75},
  Q_l(s0) = [1, 0, 0] * eta(delta)): the delta acted with follows the belief in the state, the
  action is argmax Q_l = 0, and the transition (s0, 0, r = eta(0.25), s1) moves the uniform
  belief to [1, e^-2] / (1 + e^-2) = [0.880797, 0.119203] (errors [0, 2.0], T = 1). With
  explore_delta set it acts at that delta (FixedDeltaPolicy); epsilon comes from the bounds."""
  keras.utils.set_random_seed(3)
  bounds = cba.BoundsConfig(explore_epsilon=0.0, num_grid_deltas=2, belief_temperature=1.0)
  agent = cba.LowerCCVLAgent(*_specs(4, 3), TABLE_CFG, TABLE_NET,
                             bounds, dataset_size=10)
  assert agent.bounds_policy is None and set(agent.policy_variables()) == {"q"}
  policy = agent.adaptive_policy
  assert isinstance(policy, policies.ConfidenceAdaptivePolicy)
  zeros = [0.0, 0.0, 0.0]
  _set_delta_dependent_table(agent, [[1.0, 0.0, 0.0], zeros, zeros, zeros])
  eta0 = 2.0 + np.cos(np.pi / 4)
  s0, s1 = np.eye(4, dtype=np.float32)[None, 0], np.eye(4, dtype=np.float32)[None, 1]
  first = ts.restart(tf.constant(s0), batch_size=1)
  for log_b, expected in (([0.0, -50.0], 0.25), ([-50.0, 0.0], 0.75)):
    state = agent.exploration_policy.get_initial_state(1)
    state["log_belief"] = tf.constant([log_b])
    step = agent.exploration_policy.action(first, state)
    assert float(step.info.delta[0]) == pytest.approx(expected)
    assert int(step.action[0]) == 0
  step = policy.action(first, policy.get_initial_state(1))
  mid = ts.transition(tf.constant(s1), reward=tf.constant([eta0], tf.float32),
                      discount=tf.constant([1.0]))
  step = policy.action(mid, step.state)
  np.testing.assert_allclose(tf.exp(step.state["log_belief"]).numpy(),
                             [[0.880797, 0.119203]], atol=1e-5)
  fixed = cba.LowerCCVLAgent(*_specs(4, 3), TABLE_CFG, TABLE_NET,
                             cba.BoundsConfig(explore_delta=0.3), dataset_size=10)
  assert isinstance(fixed.adaptive_policy, policies.FixedDeltaPolicy)
  step = fixed.adaptive_policy.action(first)
  assert float(step.info.delta[0]) == pytest.approx(0.3)


def test_q_u_started_from_a_plain_ccvl_checkpoint_gets_its_counts():
  """Q_u <- Q_l copies the count statistics too (without them Q_u's
  n(s)^-1 was divided by each batch's own mean, its weight never shrank online). After the
  copy, Q_u weighs every state exactly as the checkpoint's agent does."""
  keras.utils.set_random_seed(3)
  cfg = ccvl_agent.CCVLConfig(num_deltas=2, num_pairs=2, dr3_coef=0.0, alpha=0.5)
  plain = ccvl_agent.CCVLAgent(*_specs(4, 3), cfg, TINY, dataset_size=100)
  data = _chain_data(np.random.default_rng(0), 64)
  for _ in range(3):
    plain.train_on_batch(data)
  obs = np.eye(4, dtype=np.float32)
  expected = plain.regularizer_weight(obs, 0.5).numpy()          # [4]
  assert np.ptp(expected) > 0                                      # states weighed differently
  assert float(plain.counts.running_mean_inverse_count().numpy()) > 0
  path = plain.make_checkpoint().save(str(__import__("tempfile").mkdtemp() + "/plain"))
  bounds = cba.CCVLBoundsAgent(*_specs(4, 3), cfg, TINY, dataset_size=100)
  assert bounds.restore_offline(path) == "lower bound only, Q_u <- Q_l"
  np.testing.assert_allclose(bounds.lower.regularizer_weight(obs, 0.5), expected, rtol=1e-6)
  np.testing.assert_allclose(bounds.upper.regularizer_weight(obs, 0.5), expected, rtol=1e-6)
  # The running mean that normalizes n(s)^-1 is the checkpoint's (not each batch's own mean).
  np.testing.assert_allclose(bounds.upper.counts.running_mean_inverse_count(),
                             plain.counts.running_mean_inverse_count(), rtol=1e-6)
  for learner in (bounds.lower, bounds.upper):
    assert learner.start_online_counts(online_rows=64, samples_per_insert=1.0)
  with pytest.raises(ValueError, match="already started online"):
    bounds.copy_lower_to_upper()
