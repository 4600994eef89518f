"""Why the gridworld bounds did not bound, and the fix, on problems small enough to
solve by hand.

* The regularized objectives' exact fixed points (per state: Q_a = y_a -+ w (pi_a / pi_beta_a - 1)
  with pi = softmax(+-Q) at temperature 1) lie on the wrong side of Q*: the CQL(H) lower bound
  *raises* the behaviour's frequent action above Q* (one-state problem), the softmin upper term
  *lowers* it below Q* and raises rare actions by ~w / pi_beta, pushes never-taken actions up at
  every finite value, and on a zero-reward self-loop (an epsilon-greedy actor stuck in a
  corner) the max backup compounds that raise to V_u ~ 58 where every return is 0.
* The bonus forms (Eq. update for Q_l, Eq. upper update for Q_u; the fix) have the closed-form
  fixed point Q_l = B Q_l - w, Q_u = B Q_u + w on a two-state chain: the losses are stationary
  exactly there, and the neural bounds agent converges to it (Q_l <= Q* <= Q_u).

Every expected value is derived in the docstrings or by a 1-D root in the test (not by the code
under test); each fixed point is then checked to be a zero of the loss's gradient (TensorFlow).
"""
import math

import ccvl_tf  # noqa: F401

import keras
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.agents import ccvl_bounds_agent as cba
from ccvl_tf.algorithm import counts as counts_lib
from ccvl_tf.algorithm import losses
from ccvl_tf.algorithm.readings import bonus
from ccvl_tf.algorithm.readings import bonus, bound
from ccvl_tf.algorithm import upper_losses
from ccvl_tf.algorithm import networks


def _grad(loss_fn, q):
  q = tf.Variable(np.asarray(q, np.float32))
  with tf.GradientTape() as tape:
    loss = loss_fn(q)
  return tape.gradient(loss, q).numpy(), float(loss)


def _one_state_batch(beta_counts):
  """A batch holding action a beta_counts[a] times (one state, so pi_beta = counts / total)."""
  return np.repeat(np.arange(len(beta_counts)), beta_counts).astype(np.int32)


def _solve_per_state(r, beta, w, sign, gamma=0.0):
  """The per-state fixed point of a regularized objective, by damped iteration of its closed
  form (a test helper, independent of ccvl_tf): Q_a = y_a + sign * w (pi_a / beta_a - 1),
  pi = softmax(-sign * Q) (sign -1: CQL(H) lower, softmax(Q); +1: softmin upper), with
  y_a = r_a + gamma V for a zero-continuation (gamma = 0) or self-loop (gamma > 0) state,
  V = max_a Q. Returns (Q [A], V)."""
  r, beta = np.asarray(r, np.float64), np.asarray(beta, np.float64)
  x = np.zeros_like(beta)                        # x_a = Q_a - gamma V - r_a
  for _ in range(5_000):   # converged after ~2,000 (checked against 200,000)
    z = -sign * (x + r)
    pi = np.exp(z - z.max())
    pi /= pi.sum()
    x = x + 0.05 * (sign * w * (pi / beta - 1.0) - x)
  v = (x + r).max() / (1.0 - gamma)
  return x + r + gamma * v, v


def test_upper_bonus_loss_by_hand():
  """B = N = 1, A = 2, M = 2: Q_u(s, .) = [1, 3], a_D = 0, candidate targets y = [2, 0.5],
  delta = e^-1 (log(1/delta) = 1), n(s)^-1 = 0.25, alpha = 2: w = 2 sqrt(1 * 0.25) = 1;
  y = min_j y_j + w = 0.5 + 1 = 1.5; loss = (1 - 1.5)^2 / 2 = 0.125; dL/dQ_u = [1 - 1.5, 0].
  Capped at value_max = 1.2: y = 1.2, loss = 0.02, dL/dQ_u = [-0.2, 0]. No regularizer term;
  the softmin gap Q(a_D) + log(e^-1 + e^-3) = log(1 + e^-2) is reported only."""
  args = (tf.constant([0]), tf.constant([[[2.0, 0.5]]]), tf.constant([[math.exp(-1.0)]]),
          tf.constant([0.25]), 2.0)
  for value_max, y, grad in ((None, 1.5, [-0.5, 0.0]), (1.2, 1.2, [-0.2, 0.0])):
    g, loss = _grad(lambda q: upper_losses.ccvl_upper_bonus_loss(
        q, *args, value_max=value_max)["loss"], [[[1.0, 3.0]]])
    res = upper_losses.ccvl_upper_bonus_loss(tf.constant([[[1.0, 3.0]]]), *args, value_max=value_max)
    np.testing.assert_allclose(float(res["target"][0, 0]), y, rtol=1e-6)
    np.testing.assert_allclose(loss, 0.5 * (1.0 - y) ** 2, rtol=1e-5)
    np.testing.assert_allclose(g[0, 0], grad, atol=1e-6)
    np.testing.assert_allclose(float(res["weight"][0, 0]), 1.0, rtol=1e-6)
    np.testing.assert_allclose(float(res["gap"][0, 0]), math.log(1 + math.exp(-2.0)),
                               rtol=1e-5)
    assert float(tf.reduce_sum(res["regularizer"])) == 0.0
    assert int(res["argmax_j"][0, 0]) == 1          # the argmin: y_2 = 0.5


# ---- the two-state chain: closed forms ------------------------------------------------------
# s0 --go--> s1 (r 0), s0 --stay--> s0 (r 0); s1 --go--> end (r 1, terminal), s1 --stay--> s1.
# gamma = 0.9: Q*(s1, go) = 1, Q*(s1, stay) = Q*(s0, go) = 0.9, Q*(s0, stay) = 0.81.
# Bonus w_i = alpha sqrt(log(1/delta) / n(s_i)); for w <= 1 - gamma the greedy action is 'go':
#   Q_l(s1, go) = 1 - w1,          Q_l(s1, stay) = g (1 - w1) - w1,
#   Q_l(s0, go) = g (1 - w1) - w0, Q_l(s0, stay) = g (g (1 - w1) - w0) - w0,
#   Q_u: the same with -w replaced by +w.
GAMMA = 0.9
Q_STAR = np.array([[0.81, 0.9], [0.9, 1.0]])   # [state, action (0 stay, 1 go)]
STAY, GO = 0, 1


def _chain_closed_form(w0, w1, sign):
  """Q [2, 2] of the bonus fixed point, sign -1: Q_l, +1: Q_u (formulas above)."""
  v1 = 1.0 + sign * w1
  v0 = GAMMA * v1 + sign * w0
  return np.array([[GAMMA * v0 + sign * w0, v0], [GAMMA * v1 + sign * w1, v1]])


def _chain_transitions():
  """(s, a, r, s', terminal) of the four pairs."""
  return ([0, 0, 1, 1], [STAY, GO, STAY, GO], [0.0, 0.0, 0.0, 1.0], [0, 1, 1, 1],
          [0.0, 0.0, 0.0, 1.0])


def test_chain_closed_form_bounds_are_the_fixed_points_of_the_bonus_losses():
  """On the chain's four transitions at delta in {0.2, 0.6} (N = 2), with candidate targets at
  delta_2 = delta (pair 0) and delta / 2 (pair 1), all computed from the closed form: the lower
  loss (reading 'bonus': max_j y_j - w) and the upper loss (min_j y_j + w) are 0 with zero
  gradient exactly at the closed-form Q_l, Q_u, and Q_l <= Q* <= Q_u."""
  s, a, r, s2, term = _chain_transitions()
  n_s = np.array([400.0, 100.0])                     # n(s0), n(s1); alpha 0.5
  alpha, deltas = 0.5, np.array([0.2, 0.6])

  def w(delta):                                      # [2] per state
    return alpha * np.sqrt(np.log(1.0 / delta) / n_s)

  for sign, loss_fn in ((-1, bonus.loss), (+1, upper_losses.ccvl_upper_bonus_loss)):
    q = np.stack([_chain_closed_form(*w(d), sign) for d in deltas])           # [N, S, A]
    q_batch = np.stack([q[:, si] for si in s])                                # [B, N, A]
    targets = np.zeros((4, 2, 2))                                             # [B, N, M]
    for i in range(4):
      for k, d in enumerate(deltas):
        for j, d2 in enumerate((d, d / 2)):
          v_next = _chain_closed_form(*w(d2), sign)[s2[i]].max()
          targets[i, k, j] = r[i] + GAMMA * (1 - term[i]) * v_next
    g, loss = _grad(lambda qv: loss_fn(
        qv, tf.constant(a), tf.constant(targets, tf.float32),
        tf.constant(np.tile(deltas, (4, 1)), tf.float32),
        tf.constant(1.0 / n_s[s], tf.float32), alpha)["loss"], q_batch)
    assert loss < 1e-12 and np.abs(g).max() < 1e-6, (sign, loss, g)
    for k in range(2):
      assert np.all(sign * (q[k] - Q_STAR) > 0), (sign, q[k])


TINY = networks.QNetworkConfig(torso="mlp", mlp_units=(16,), n_cos=8, hidden_units=16)


@pytest.mark.slow
@pytest.mark.parametrize("head", ["cosine", "monotone"])
def test_bounds_agent_learns_the_chain_closed_form(head):
  """The neural bounds agent (both bonus forms, exact n(s) = 400 per state, alpha 1, 1000
  steps, ~6 s) converges to the closed form within 0.03 at delta 0.1 / 0.5 / 0.9 (measured:
  within 0.012 with the cosine head, 0.023 with the monotone one), so Q_l < Q* < Q_u at every
  pair at delta 0.1 and 0.5 (margins >= 0.04 there); capped at value_max = 1, Q_u stays
  within that fit tolerance of 1 (the cosine head within 0.01, the monotone one 1.019; and
  Q_u(s1, go) = 1 = Q*)."""
  s = np.repeat([0, 0, 1, 1], 200)
  a = np.tile(np.repeat([STAY, GO], 200), 2)
  s2 = np.where(a == STAY, s, 1)
  r = ((s == 1) & (a == GO)).astype(np.float32)
  eye = np.eye(2, dtype=np.float32)
  data = dict(observation=eye[s], action=a.astype(np.int32), reward=r, next_observation=eye[s2],
              terminal=r.copy())
  specs = (ts.time_step_spec(tensor_spec.BoundedTensorSpec((2,), tf.float32, 0.0, 1.0)),
           tensor_spec.BoundedTensorSpec((), tf.int32, 0, 1))
  cfg = ccvl_agent.CCVLConfig(num_deltas=4, num_pairs=2, alpha=1.0, gamma=GAMMA,
                              td_loss="squared", dr3_coef=0.0, learning_rate=3e-3,
                              adam_epsilon=1e-7, target_update_period=10,
                              reading=bonus.Bonus(), delta_head=head)
  grid = np.array([0.1, 0.5, 0.9], np.float32)
  for value_max in (None, 1.0):
    keras.utils.set_random_seed(0)
    counts = counts_lib.GrowingExactCounts(s, 2)
    agent = cba.CCVLBoundsAgent(*specs, cfg, TINY, cba.BoundsConfig(value_max=value_max),
                                inverse_count_fn=counts.inverse_count_one_hot)
    rng = np.random.default_rng(0)
    for _ in range(1000):
      idx = rng.integers(0, len(s), 64)
      agent.train_on_batch({k: v[idx] for k, v in data.items()})
    q_l = agent.lower.q_values(eye, grid).numpy()                 # [S, K, A]
    q_u = agent.upper.q_values(eye, grid).numpy()
    for k, delta in enumerate(grid):
      w = math.sqrt(math.log(1.0 / delta) / 400)
      lower, upper = _chain_closed_form(w, w, -1), _chain_closed_form(w, w, +1)
      if value_max is not None:        # the cap at 1 binds only Q_u(s1, go) = 1 + w -> 1 ...
        upper = np.minimum(upper, 1.0)
        upper[1, STAY] = GAMMA * 1.0 + w             # ... and what bootstraps from it
        upper[0, GO] = GAMMA * 1.0 + w
        upper[0, STAY] = GAMMA * upper[0, GO] + w
        assert q_u[:, k].max() <= 1.0 + 0.03
      np.testing.assert_allclose(q_l[:, k], lower, atol=0.03, err_msg=f"Q_l at {delta}")
      np.testing.assert_allclose(q_u[:, k], upper, atol=0.03, err_msg=f"Q_u at {delta}")
      if delta < 0.8:                  # capped, Q_u(s1, go) = 1 = Q* (within the fit)
        slack = 0.0 if value_max is None else 0.01
        assert np.all(q_l[:, k] < Q_STAR) and np.all(q_u[:, k] > Q_STAR - slack), (
            delta, q_l, q_u)


# ---- the regularized forms: where their fixed points are ------------------------------------
def test_cql_lower_fixed_point_lies_above_q_star_when_the_behaviour_is_peaked():
  """One state, both actions reward 1 and end the episode (Q* = [1, 1]), behaviour [0.9, 0.1],
  weight w = 0.5. The CQL(H) fixed point Q_a = 1 - w (softmax(Q)_a / beta_a - 1) has
  softmax(Q)_0 < 0.9 (the frequent action's softmax cannot reach its behaviour share at these
  values), so Q_l(frequent) > Q* = 1: a "lower bound" above the true value. The regularized
  CCVL loss (reading 'bound', w = alpha sqrt(log(1/delta) n^-1)) is stationary there."""
  beta, w = np.array([0.9, 0.1]), 0.5
  q, _ = _solve_per_state([1.0, 1.0], beta, w, sign=-1)
  assert q[0] > 1.0 + 1e-3 and q[1] < 1.0
  actions = _one_state_batch([9, 1])                                          # [10]
  delta = math.exp(-1.0)                        # log(1/delta) = 1; n^-1 = 1 -> weight = alpha
  g, _ = _grad(lambda qv: bound.loss(
      tf.tile(qv[None, None], [10, 1, 1]), tf.constant(actions), tf.ones([10, 1, 1]),
      tf.fill([10, 1], delta), tf.ones([10]), w)["loss"], q)
  assert np.abs(g).max() < 1e-5, g


def test_softmin_upper_fixed_point_lowers_the_frequent_action_and_raises_rare_ones():
  """The same one-state problem for the regularized upper bound (softmin term, weight w = 0.5):
  Q_a = 1 + w (softmax(-Q)_a / beta_a - 1). The frequent action ends *below* Q* = 1 (not an
  upper bound) and the rare one above it by ~w (q / beta - 1) ~ w / beta; the loss
  (upper_losses.ccvl_upper_loss, M = 1) is stationary there. With behaviour [0.99, 0.01] the rare
  action's excess grows (1/beta)."""
  excess = {}
  for beta in ([0.9, 0.1], [0.99, 0.01]):
    beta = np.array(beta)
    q, _ = _solve_per_state([1.0, 1.0], beta, 0.5, sign=+1)
    assert q[0] < 1.0 and q[1] > 1.0, q
    excess[beta[1]] = q[1] - 1.0
    counts = np.round(beta * 100).astype(int)
    actions = _one_state_batch(counts)
    g, _ = _grad(lambda qv, actions=actions: upper_losses.ccvl_upper_loss(
        tf.tile(qv[None, None], [len(actions), 1, 1]), tf.constant(actions),
        tf.ones([len(actions), 1, 1]), tf.fill([len(actions), 1, 1], math.exp(-1.0)),
        tf.ones([len(actions)]), 0.5)["loss"], q)
    assert np.abs(g).max() < 1e-5, (beta, g)
  assert excess[0.01] > excess[0.1] > 0


def test_softmin_upper_pushes_a_never_taken_action_up_at_every_value():
  """An action the data never takes (beta = 0) gets only the softmin term's gradient,
  -w softmax(-Q)_a < 0: gradient descent raises it whatever its value (0, 10, 30 above the
  data action), so its exact fixed point is +inf, and max_a' in the target then picks it."""
  for unseen in (0.0, 10.0, 30.0):
    q0 = np.array([1.0, unseen], np.float32)
    g, _ = _grad(lambda qv: upper_losses.ccvl_upper_loss(
        qv[None, None], tf.constant([0]), tf.ones([1, 1, 1]),
        tf.fill([1, 1, 1], math.exp(-1.0)), tf.ones([1]), 0.5)["loss"], q0)
    expected = -0.5 * math.exp(-unseen) / (math.exp(-1.0) + math.exp(-unseen))
    np.testing.assert_allclose(g[1], expected, rtol=1e-4, atol=1e-30)
    assert g[1] < 0


def test_softmin_upper_on_a_zero_reward_self_loop_exceeds_any_return():
  """The online failure in one state: a corner the actor cannot leave (every action loops,
  reward 0, so Q* = 0), behaviour epsilon-greedy-like [0.9925, 0.0025 x 3], w = 0.167
  (alpha 0.2 at delta 0.5 with n^-1 ~ 1), gamma 0.95. The regularized upper's fixed point is
  Q_a = gamma V + w (q_a / beta_a - 1), V = max_a Q = w max_a (q_a / beta_a - 1) / (1 - gamma):
  the rare actions' raise (~2.9) divided by 1 - gamma gives V ~ 58 where every return is 0
  (the README run measured 87-147). The loss is stationary there with targets gamma V."""
  beta = np.array([0.9925, 0.0025, 0.0025, 0.0025])
  w, gamma = 0.167, 0.95
  q, v = _solve_per_state([0.0] * 4, beta, w, sign=+1, gamma=gamma)
  assert 50 < v < 70, v
  actions = _one_state_batch([397, 1, 1, 1])
  g, _ = _grad(lambda qv: upper_losses.ccvl_upper_loss(
      tf.tile(qv[None, None], [400, 1, 1]), tf.constant(actions),
      tf.fill([400, 1, 1], float(gamma * v)), tf.fill([400, 1, 1], math.exp(-1.0)),
      tf.ones([400]), w)["loss"], q)
  assert np.abs(g).max() < 1e-4, g
  # The bonus form on the same data: Q_u = gamma V + w at every action, V = w / (1 - gamma) with
  # these counts, and with the exact count n(s) = 400 the weight is w / 20: V ~ 0.17.
  assert (w / 20) / (1 - gamma) < 0.2
