"""Tests for ccvl_tf/algorithm/policies.py with a tiny hand-computable contract Q-network.

The fake network (docs/CONTRACTS.md contract: functional Keras 3, inputs
{'observation': [B, D], 'delta': [B, K]}, output [B, K, A]) is

    Q(s, a, delta) = sum_i s_i W[i, a] + delta * c[a]

so every expected number below is worked out by hand in the comments.
"""
import ccvl_tf  # noqa: F401  (TF_USE_LEGACY_KERAS before TensorFlow)

import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.policies import epsilon_greedy_policy
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.algorithm import belief
from ccvl_tf.algorithm import policies


def linear_q_model(w, c, name="q"):
  """Q(s, a, delta) = s @ W[:, a] + delta * c[a] as a contract functional model."""
  w = np.asarray(w, np.float32)  # [D, A]
  c = np.asarray(c, np.float32)  # [A]
  obs_dim, num_actions = w.shape
  obs_in = keras.Input((obs_dim,), name="observation")
  delta_in = keras.Input((None,), name="delta")
  q_s = keras.layers.Dense(num_actions, use_bias=False, name=f"{name}_w")(obs_in)  # [B, A]
  q_s = keras.layers.Reshape((1, num_actions))(q_s)  # [B, 1, A]
  d = keras.layers.Reshape((-1, 1))(delta_in)  # [B, K, 1]
  q_d = keras.layers.Dense(num_actions, use_bias=False, name=f"{name}_c")(d)  # [B, K, A]
  q = keras.layers.Add()([q_s, q_d])  # [B, K, A]
  model = keras.Model({"observation": obs_in, "delta": delta_in}, q, name=name)
  model.get_layer(f"{name}_w").set_weights([w])
  model.get_layer(f"{name}_c").set_weights([c[np.newaxis, :]])
  return model


def specs(obs_dim, num_actions, minimum=0):
  time_step_spec = ts.time_step_spec(tf.TensorSpec((obs_dim,), tf.float32, "observation"))
  action_spec = tensor_spec.BoundedTensorSpec((), tf.int32, minimum, minimum + num_actions - 1,
                                              "action")
  return time_step_spec, action_spec


def first(obs):
  return ts.restart(tf.constant(obs, tf.float32), batch_size=len(obs))


def mid(obs, reward):
  obs = tf.constant(obs, tf.float32)
  return ts.transition(obs, reward=tf.constant(reward, tf.float32), discount=tf.ones([len(reward)]))


def last(obs, reward):
  # Terminal LAST: TF-Agents discount 0.
  obs = tf.constant(obs, tf.float32)
  return ts.termination(obs, reward=tf.constant(reward, tf.float32))


# W maps s=[s0, s1] to Q(., a) = [s0, s1, 0]; c adds delta * [0, 0, 2].
W3 = [[1., 0., 0.], [0., 1., 0.]]
C3 = [0., 0., 2.]


# ----------------------------------------------------------------------------- FixedDeltaPolicy
def test_fixed_delta_greedy_actions_by_hand():
  tss, aspec = specs(2, 3)
  model = linear_q_model(W3, C3)
  obs = [[0.9, 0.0], [0.0, 0.3]]
  # delta=0.25: row0 Q=[0.9, 0, 0.5] -> 0; row1 Q=[0, 0.3, 0.5] -> 2.
  step = policies.FixedDeltaPolicy(tss, aspec, model, delta=0.25).action(first(obs))
  np.testing.assert_array_equal(step.action.numpy(), [0, 2])
  np.testing.assert_allclose(step.info.delta.numpy(), [0.25, 0.25])
  assert step.state == ()
  # delta=0.75: row0 Q=[0.9, 0, 1.5] -> 2.
  step = policies.FixedDeltaPolicy(tss, aspec, model, delta=0.75).action(first(obs))
  np.testing.assert_array_equal(step.action.numpy(), [2, 2])


def test_fixed_delta_respects_action_minimum():
  tss, aspec = specs(2, 3, minimum=5)
  model = linear_q_model(W3, C3)
  step = policies.FixedDeltaPolicy(tss, aspec, model, delta=0.25).action(first([[0.9, 0.0]]))
  assert int(step.action[0]) == 5  # index 0 + minimum 5


def test_fixed_delta_tracks_the_keras_variables():
  tss, aspec = specs(2, 3)
  policy = policies.FixedDeltaPolicy(tss, aspec, linear_q_model(W3, C3), delta=0.5)
  assert len(policy.variables()) == 2  # the W and c kernels
  assert all(isinstance(v, tf.Variable) for v in policy.variables())


def test_bad_arguments_fail_fast():
  tss, aspec = specs(2, 4)  # 4 actions, model has 3
  with pytest.raises(ValueError, match="3 actions.*4 actions"):
    policies.FixedDeltaPolicy(tss, aspec, linear_q_model(W3, C3), delta=0.5)
  tss, aspec = specs(2, 3)
  with pytest.raises(ValueError, match="delta"):
    policies.FixedDeltaPolicy(tss, aspec, linear_q_model(W3, C3), delta=1.0)
  with pytest.raises(ValueError, match="temperature"):
    policies.ConfidenceAdaptivePolicy(tss, aspec, linear_q_model(W3, C3), temperature=0.0)
  obs_in = keras.Input((2,), name="obs")
  d_in = keras.Input((None,), name="delta")
  q = keras.layers.Dense(3)(keras.layers.Reshape((-1, 1))(d_in))
  q = keras.layers.Add()([q, keras.layers.Reshape((1, 3))(keras.layers.Dense(3)(obs_in))])
  misnamed = keras.Model({"obs": obs_in, "delta": d_in}, q)
  with pytest.raises(ValueError, match="named inputs 'observation' and 'delta'"):
    policies.FixedDeltaPolicy(tss, aspec, misnamed, delta=0.5)
  assert policies.action_count(aspec) == 3
  with pytest.raises(ValueError, match="together"):
    policies.ConfidenceAdaptivePolicy(tss, aspec, linear_q_model(W3, C3), beta=0.5)


# ----------------------------------------------------------------------------- BoundsPolicy
def test_safe_set_hand_example():
  # Q_l = [3, 2.5, 1, -1], beta = 0.8: threshold 0.8 * 3 = 2.4 -> A_l = {0, 1}.
  mask = policies.safe_set_mask([[3., 2.5, 1., -1.]], 0.8)
  np.testing.assert_array_equal(mask.numpy(), [[True, True, False, False]])
  # beta = 0.3: threshold 0.9 -> {0, 1, 2}.
  mask = policies.safe_set_mask([[3., 2.5, 1., -1.]], 0.3)
  np.testing.assert_array_equal(mask.numpy(), [[True, True, True, False]])
  # All negative, Q_l = [-1, -2], beta = 0.5: threshold -0.5 excludes both; argmax (0) is kept.
  mask = policies.safe_set_mask([[-1., -2.]], 0.5)
  np.testing.assert_array_equal(mask.numpy(), [[True, False]])


def test_bounds_policy_acts_on_upper_bound_within_safe_set():
  tss, aspec = specs(1, 4)
  lower = linear_q_model([[3., 2.5, 1., -1.]], [0., 0., 0., 0.], name="lower")
  upper = linear_q_model([[3.5, 4., 9., 10.]], [0., 0., 0., 0.], name="upper")
  obs = [[1.0]]
  # Safe set at beta=0.8 is {0, 1}; Q_u there is [3.5, 4] -> action 1
  # (unconstrained argmax Q_u would be 3, argmax Q_l would be 0).
  policy = policies.BoundsPolicy(tss, aspec, lower, upper, beta=0.8, delta=0.5)
  assert int(policy.action(first(obs)).action[0]) == 1
  # beta=0.3: safe set {0, 1, 2} -> Q_u [3.5, 4, 9] -> action 2.
  policy = policies.BoundsPolicy(tss, aspec, lower, upper, beta=0.3, delta=0.5)
  assert int(policy.action(first(obs)).action[0]) == 2
  assert len(policy.variables()) == 4


# ----------------------------------------------------------------------------- adaptive policy
def test_belief_update_episode_boundary_by_hand():
  """K=2 (grid [0.25, 0.75]), gamma=0.5, T=1, delta = argmax b; Q = [s0, s1, 2 delta].

  step 1 FIRST s0=[1,0]: no transition scored; b uniform -> argmax index 0, delta 0.25;
         Q(s0,.,0.25) = [1, 0, 0.5] -> a0 = 0.
  step 2 MID r=0.75, s1=[0,0.2]: q_sa = Q(s0,0,.) = [1, 1]; max Q(s1,.,d) = [0.5, 1.5]
         e = (1 - 0.75 - 0.5*[0.5, 1.5])^2 = [0, 0.25]; log b ~ [0, -0.25]
         b(0.25) = 1 / (1 + e^-0.25) = 0.562177;  Q(s1,.,0.25) = [0, 0.2, 0.5] -> a1 = 2.
  step 3 LAST r=0.5 (discount 0), s2=[0,0]: q_sa = Q(s1,2,.) = 2 delta = [0.5, 1.5]
         e = (q_sa - 0.5)^2 = [0, 1]; log b ~ [0, -1.25]; b(0.25) = 1/(1+e^-1.25) = 0.777300.
         (Bootstrapping would give e = (q_sa - 0.5 - 0.5*[0.5,1.5])^2 = [0.0625, 0.0625].)
  step 4 FIRST s0 (next episode): belief kept, LAST->FIRST not scored: b(0.25) = 0.777300;
         a = 0 as in step 1.
  step 5 MID r=0.75, s1: same transition as step 2: log b ~ [0, -1.5]; b(0.25) = 0.817574.
  """
  tss, aspec = specs(2, 3)
  policy = policies.ConfidenceAdaptivePolicy(
      tss, aspec, linear_q_model(W3, C3), num_grid_deltas=2, gamma=0.5, temperature=1.0,
      sample_delta=False)
  np.testing.assert_allclose(policy.delta_grid, [0.25, 0.75])
  s0, s1, s2 = [[1.0, 0.0]], [[0.0, 0.2]], [[0.0, 0.0]]
  state = policy.get_initial_state(1)
  np.testing.assert_allclose(tf.exp(state["log_belief"]).numpy(), [[0.5, 0.5]])
  assert not bool(state["has_prev"][0])

  def b0(st):
    return float(tf.exp(st["log_belief"])[0, 0])

  step = policy.action(first(s0), state)
  assert int(step.action[0]) == 0 and float(step.info.delta[0]) == 0.25
  assert b0(step.state) == pytest.approx(0.5)
  assert bool(step.state["has_prev"][0]) and int(step.state["prev_action"][0]) == 0
  np.testing.assert_allclose(step.state["prev_observation"].numpy(), s0)

  step = policy.action(mid(s1, [0.75]), step.state)
  assert b0(step.state) == pytest.approx(0.562177, abs=1e-5)
  assert int(step.action[0]) == 2

  step = policy.action(last(s2, [0.5]), step.state)
  assert b0(step.state) == pytest.approx(0.777300, abs=1e-5)
  belief_at_last = step.state["log_belief"].numpy()

  step = policy.action(first(s0), step.state)
  np.testing.assert_allclose(step.state["log_belief"].numpy(), belief_at_last, atol=1e-6)
  assert int(step.action[0]) == 0
  np.testing.assert_allclose(step.state["prev_observation"].numpy(), s0)

  step = policy.action(mid(s1, [0.75]), step.state)
  assert b0(step.state) == pytest.approx(0.817574, abs=1e-5)


def test_belief_update_matches_belief_module():
  """One step through the policy equals belief.bellman_sq_errors + update_log_belief."""
  tss, aspec = specs(2, 3)
  k, gamma, temp = 4, 0.9, 0.5
  policy = policies.ConfidenceAdaptivePolicy(
      tss, aspec, linear_q_model(W3, C3), num_grid_deltas=k, gamma=gamma, temperature=temp,
      sample_delta=False)
  grid = belief.delta_grid(k)  # [0.125, 0.375, 0.625, 0.875]
  s, s_next, r = np.array([0.3, 0.1]), np.array([0.2, 0.6]), 0.4
  step = policy.action(first([s]), policy.get_initial_state(1))
  a = int(step.action[0])
  step = policy.action(mid([s_next], [r]), step.state)
  q = lambda obs: obs @ np.asarray(W3) + grid[:, None] * np.asarray(C3)  # [K, A]
  e = belief.bellman_sq_errors(q(s)[:, a], r, gamma, q(s_next).max(-1))
  expected = belief.update_log_belief(belief.uniform_log_belief(k), e, temp)
  np.testing.assert_allclose(step.state["log_belief"].numpy()[0], expected.numpy(), atol=1e-6)


def test_reward_clip_applies_to_scoring():
  # Same as step 2 of the hand test but r = 5.75 clipped to 0.75: same belief 0.562177.
  tss, aspec = specs(2, 3)
  policy = policies.ConfidenceAdaptivePolicy(
      tss, aspec, linear_q_model(W3, C3), num_grid_deltas=2, gamma=0.5, sample_delta=False,
      reward_clip=0.75)
  step = policy.action(first([[1.0, 0.0]]), policy.get_initial_state(1))
  step = policy.action(mid([[0.0, 0.2]], [5.75]), step.state)
  assert float(tf.exp(step.state["log_belief"])[0, 0]) == pytest.approx(0.562177, abs=1e-5)


def test_belief_concentrates_on_bellman_consistent_delta():
  """Single state, r=1, gamma=0.5: the consistent value is 1/(1-0.5) = 2.

  Q(s, a, delta) = 4 delta for every a, so e(delta) = (4d - 1 - 0.5*4d)^2 = (2d - 1)^2:
  zero only at delta = 0.5. Grid K=5: [0.1, 0.3, 0.5, 0.7, 0.9] -> e = [.64, .16, 0, .16, .64].
  After 40 transitions with T=1: b(0.5) = 1 / (1 + 2 e^-6.4 + 2 e^-25.6) = 0.99667.
  """
  tss, aspec = specs(2, 3)
  model = linear_q_model(np.zeros([2, 3]), [4., 4., 4.])
  policy = policies.ConfidenceAdaptivePolicy(tss, aspec, model, num_grid_deltas=5, gamma=0.5,
                                             temperature=1.0, sample_delta=True, seed=7)
  obs = [[1.0, 0.0]]
  step = policy.action(first(obs), policy.get_initial_state(1))
  deltas = []
  for _ in range(40):
    step = policy.action(mid(obs, [1.0]), step.state)
    deltas.append(float(step.info.delta[0]))
  b = tf.exp(step.state["log_belief"]).numpy()[0]
  assert b[2] == pytest.approx(1.0 / (1 + 2 * np.exp(-6.4) + 2 * np.exp(-25.6)), rel=1e-4)
  assert int(np.argmax(b)) == 2
  assert deltas[-10:] == [0.5] * 10  # sampled from b: P(all 0.5) = 0.9967^10 ~ 0.97 (seeded)


def test_sampling_is_deterministic_given_state_and_advances_rng():
  tss, aspec = specs(2, 3)
  policy = policies.ConfidenceAdaptivePolicy(tss, aspec, linear_q_model(W3, C3), num_grid_deltas=8,
                                             sample_delta=True, seed=3)
  state = policy.get_initial_state(4)
  np.testing.assert_array_equal(state["rng"].numpy(), [[3, 0]] * 4)
  t = first([[0.5, 0.5]] * 4)
  a, b = policy.action(t, state), policy.action(t, state)
  np.testing.assert_array_equal(a.info.delta.numpy(), b.info.delta.numpy())
  np.testing.assert_array_equal(a.state["rng"].numpy(), [[3, 1]] * 4)
  # Under a uniform belief over 8 deltas, 50 steps of 4 rows visit more than one delta.
  seen, st = set(), state
  for _ in range(50):
    step = policy.action(t, st)
    seen.update(step.info.delta.numpy().tolist())
    st = step.state
  assert len(seen) > 1


def test_adaptive_bounds_policy_uses_sampled_delta():
  # Q_l(s,a,d) = [3, 2.5, 1, -1]*s, Q_u = [3.5, 4, 9, 10]*s: delta-independent, so whatever
  # delta is drawn the bounds rule gives action 1 at beta=0.8 (see the BoundsPolicy test).
  tss, aspec = specs(1, 4)
  lower = linear_q_model([[3., 2.5, 1., -1.]], [0.] * 4, name="lower")
  upper = linear_q_model([[3.5, 4., 9., 10.]], [0.] * 4, name="upper")
  policy = policies.ConfidenceAdaptivePolicy(tss, aspec, lower, num_grid_deltas=4,
                                             upper_network=upper, beta=0.8)
  step = policy.action(first([[1.0]]), policy.get_initial_state(1))
  assert int(step.action[0]) == 1
  assert len(policy.variables()) == 4


# ----------------------------------------------------------------------------- epsilon-greedy
def test_epsilon_zero_equals_greedy_and_keeps_belief_across_first():
  tss, aspec = specs(2, 3)
  inner = policies.ConfidenceAdaptivePolicy(tss, aspec, linear_q_model(W3, C3), num_grid_deltas=2,
                                            gamma=0.5, sample_delta=False)
  wrapped = policies.epsilon_greedy(inner, epsilon=0.0)
  assert isinstance(wrapped, epsilon_greedy_policy.EpsilonGreedyPolicy)
  # The stock wrapper's get_initial_state would be zeros; ours is the inner one's.
  np.testing.assert_allclose(wrapped.get_initial_state(1)["log_belief"].numpy(),
                             inner.get_initial_state(1)["log_belief"].numpy())
  st_w = st_i = inner.get_initial_state(1)
  seq = [first([[1.0, 0.0]]), mid([[0.0, 0.2]], [0.75]), last([[0.0, 0.0]], [0.5]),
         first([[1.0, 0.0]])]
  for t in seq:
    w, i = wrapped.action(t, st_w), inner.action(t, st_i)
    np.testing.assert_array_equal(w.action.numpy(), i.action.numpy())
    np.testing.assert_allclose(w.state["log_belief"].numpy(), i.state["log_belief"].numpy())
    st_w, st_i = w.state, i.state
  # After the second FIRST the belief is still the hand value 0.777300 (not reset to 0.5).
  assert float(tf.exp(st_w["log_belief"])[0, 0]) == pytest.approx(0.777300, abs=1e-5)


def test_stock_epsilon_greedy_would_reset_the_belief():
  """Documents why epsilon_greedy() exists: TF-Agents' defaults reset state at FIRST steps."""
  tss, aspec = specs(2, 3)
  inner = policies.ConfidenceAdaptivePolicy(tss, aspec, linear_q_model(W3, C3), num_grid_deltas=2,
                                            gamma=0.5, sample_delta=False)
  stock = epsilon_greedy_policy.EpsilonGreedyPolicy(inner, epsilon=0.0)
  st = inner.get_initial_state(1)
  for t in [first([[1.0, 0.0]]), mid([[0.0, 0.2]], [0.75]), first([[1.0, 0.0]])]:
    st = stock.action(t, st).state
  # The stock wrapper replaced the state by zeros at the FIRST step: belief back to uniform.
  b = tf.nn.softmax(st["log_belief"]).numpy()[0]
  np.testing.assert_allclose(b, [0.5, 0.5])


def test_epsilon_one_records_executed_action_and_greedy_delta():
  tss, aspec = specs(2, 3)
  inner = policies.ConfidenceAdaptivePolicy(tss, aspec, linear_q_model(W3, C3), num_grid_deltas=2,
                                            sample_delta=False)
  wrapped = policies.epsilon_greedy(inner, epsilon=1.0)
  st = wrapped.get_initial_state(64)
  step = wrapped.action(first([[1.0, 0.0]] * 64), st, seed=1)
  actions = step.action.numpy()
  assert len(set(actions.tolist())) > 1  # uniformly random over 3 actions, 64 rows
  np.testing.assert_array_equal(step.state["prev_action"].numpy(), actions)
  np.testing.assert_allclose(step.info.delta.numpy(), [0.25] * 64)  # greedy delta, not random


def test_epsilon_greedy_on_fixed_policy():
  tss, aspec = specs(2, 3)
  fixed = policies.FixedDeltaPolicy(tss, aspec, linear_q_model(W3, C3), delta=0.25)
  step = policies.epsilon_greedy(fixed, 0.0).action(first([[0.9, 0.0], [0.0, 0.3]]))
  np.testing.assert_array_equal(step.action.numpy(), [0, 2])
  with pytest.raises(ValueError):
    policies.epsilon_greedy(fixed, 1.5)


def test_resample_per_episode_holds_delta_within_episode():
  # Uniform belief that never changes (Q independent of delta and r consistent: W=0, c=0,
  # r=0 -> e=0), 8 deltas: per-step sampling changes delta within an episode, per-episode
  # sampling holds it until the next FIRST step.
  tss, aspec = specs(2, 3)
  model = linear_q_model(np.zeros([2, 3]), [0., 0., 0.])
  held = policies.ConfidenceAdaptivePolicy(tss, aspec, model, num_grid_deltas=8, seed=5,
                                           resample="episode")
  per_step = policies.ConfidenceAdaptivePolicy(tss, aspec, model, num_grid_deltas=8, seed=5)
  obs = [[0.0, 0.0]]

  def deltas(policy, steps):
    st, out = policy.get_initial_state(1), []
    for t in steps:
      step = policy.action(t, st)
      st = step.state
      out.append(float(step.info.delta[0]))
    return out

  steps = [first(obs)] + [mid(obs, [0.0])] * 9 + [first(obs)] + [mid(obs, [0.0])] * 9
  d_held, d_step = deltas(held, steps), deltas(per_step, steps)
  assert len(set(d_held[:10])) == 1 and len(set(d_held[10:])) == 1
  assert len(set(d_step[:10])) > 1
  # Same rng stream: the first draw of both is the same sample.
  assert d_held[0] == d_step[0]
  with pytest.raises(ValueError, match="resample"):
    policies.ConfidenceAdaptivePolicy(tss, aspec, model, resample="never")


@pytest.mark.parametrize("key,value,named", [
    ("log_belief", [[float("nan"), 0.0, 0.0, 0.0]], "the policy state's 'log_belief' must be a "
                                                    "log-belief over the 4 grid deltas"),
    ("log_belief", [[-np.inf] * 4], "the policy state's 'log_belief' must be"),
    ("prev_action", [7], "the policy state's 'prev_action' must be an action of the action spec "
                         "(3 actions from its minimum)"),
    ("prev_action", [-1], "the policy state's 'prev_action' must be"),
    ("delta_index", [4], "the policy state's 'delta_index' must index the 4 grid deltas, in "
                         "[0, 4)"),
])
def test_a_state_no_step_can_produce_is_refused_naming_its_key(key, value, named):
  """Before: a NaN belief was blamed on the rewards; an out-of-range previous action or delta
  index, or an all -inf belief, ended in a bare TensorFlow index error."""
  tss, aspec = specs(2, 3)
  policy = policies.ConfidenceAdaptivePolicy(tss, aspec, linear_q_model(W3, C3),
                                             num_grid_deltas=4)
  step = policy.action(first([[0.3, 0.1]]), policy.get_initial_state(1))
  state = dict(step.state)
  state[key] = tf.constant(value, state[key].dtype)
  with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(named)):
    policy.action(mid([[0.2, 0.6]], [0.4]), state)
  # The state the policy made itself goes on.
  policy.action(mid([[0.2, 0.6]], [0.4]), step.state)


# ----------------------------------------------------------------------------- the belief's record
def test_the_state_records_the_errors_the_belief_summed_by_hand():
  """The hand example above (K=2, gamma=0.5, T=1): the errors that updated the belief are
  step 2 (MID) e = [0, 0.25], step 3 (LAST, no bootstrap) e = [0, 1], step 4 (FIRST after
  LAST) none, step 5 (MID) e = [0, 0.25]. The record sums them (float64) and counts them; a
  FIRST step leaves it as it was (never reset inside a run)."""
  tss, aspec = specs(2, 3)
  policy = policies.ConfidenceAdaptivePolicy(
      tss, aspec, linear_q_model(W3, C3), num_grid_deltas=2, gamma=0.5, temperature=1.0,
      sample_delta=False)
  state = policy.get_initial_state(1)
  assert state["sq_error_sum"].dtype == tf.float64 and state["sq_error_count"].dtype == tf.int64
  np.testing.assert_array_equal(state["sq_error_sum"].numpy(), [[0.0, 0.0]])
  s0, s1, s2 = [[1.0, 0.0]], [[0.0, 0.2]], [[0.0, 0.0]]
  want = [([0.0, 0.0], 0), ([0.0, 0.25], 1), ([0.0, 1.25], 2), ([0.0, 1.25], 2),
          ([0.0, 1.5], 3)]
  for t, (sums, count) in zip([first(s0), mid(s1, [0.75]), last(s2, [0.5]), first(s0),
                               mid(s1, [0.75])], want):
    state = policy.action(t, state).state
    np.testing.assert_allclose(state["sq_error_sum"].numpy(), [sums], atol=1e-6)
    assert int(state["sq_error_count"][0]) == count
  # From the uniform prior, log b ~ -sum / T: b(0.25) = 1 / (1 + e^-1.5) = 0.817574.
  assert float(tf.exp(state["log_belief"])[0, 0]) == pytest.approx(0.817574, abs=1e-5)
  # A batch of 2 where only row 1 has a previous step: row 0's FIRST adds nothing.
  state2 = policy.action(first(s0 * 2), policy.get_initial_state(2)).state
  state2 = policy.action(ts.TimeStep(tf.constant([0, 1]), tf.constant([0.0, 0.75]),
                                     tf.constant([1.0, 1.0]), tf.constant(s1 * 2)),
                         state2).state
  np.testing.assert_allclose(state2["sq_error_sum"].numpy(), [[0.0, 0.0], [0.0, 0.25]],
                             atol=1e-6)
  np.testing.assert_array_equal(state2["sq_error_count"].numpy(), [0, 1])


def test_the_record_sums_exactly_the_errors_of_the_belief_module():
  """Two steps of a random transition chain: the record is the float64 sum of the float32
  errors belief.bellman_sq_errors gives (the ones update_log_belief took)."""
  tss, aspec = specs(2, 3)
  k, gamma, temp = 4, 0.9, 0.5
  policy = policies.ConfidenceAdaptivePolicy(
      tss, aspec, linear_q_model(W3, C3), num_grid_deltas=k, gamma=gamma, temperature=temp,
      sample_delta=False)
  grid = belief.delta_grid(k)
  q = lambda obs: obs @ np.asarray(W3) + grid[:, None] * np.asarray(C3)  # [K, A]
  obs = np.array([[0.3, 0.1], [0.2, 0.6], [0.9, 0.4]], np.float32)
  rewards = [0.4, -0.2]
  step = policy.action(first(obs[:1]), policy.get_initial_state(1))
  total = np.zeros(k)
  for i, r in enumerate(rewards):
    a = int(step.action[0])
    step = policy.action(mid(obs[i + 1:i + 2], [r]), step.state)
    e = belief.bellman_sq_errors(q(obs[i])[:, a], r, gamma, q(obs[i + 1]).max(-1)).numpy()
    total += e.astype(np.float64)
  np.testing.assert_allclose(step.state["sq_error_sum"].numpy()[0], total, rtol=1e-6)
  assert int(step.state["sq_error_count"][0]) == 2


def test_the_bounds_variant_keeps_the_same_record():
  tss, aspec = specs(1, 4)
  lower = linear_q_model([[3., 2.5, 1., -1.]], [0.] * 4, name="lower")
  upper = linear_q_model([[3.5, 4., 9., 10.]], [0.] * 4, name="upper")
  policy = policies.ConfidenceAdaptivePolicy(tss, aspec, lower, num_grid_deltas=4,
                                             upper_network=upper, beta=0.8, gamma=0.5)
  step = policy.action(first([[1.0]]), policy.get_initial_state(1))
  step = policy.action(mid([[1.0]], [1.0]), step.state)
  # Action 1 taken at s=1: Q_l(s, 1) = 2.5 for every delta, max Q_l(s') = 3, r = 1:
  # e = (2.5 - 1 - 0.5 * 3)^2 = 0 for each of the 4 grid deltas.
  np.testing.assert_allclose(step.state["sq_error_sum"].numpy(), [[0.0] * 4], atol=1e-12)
  assert int(step.state["sq_error_count"][0]) == 1
  assert set(policies.adaptive_state_spec(tss.observation, aspec)) == set(
      policy.policy_state_spec)


# ----------------------------------------------------------------------------- the initial belief
def test_the_default_initial_belief_is_the_uniform_one_bit_for_bit():
  tss, aspec = specs(2, 3)
  policy = policies.ConfidenceAdaptivePolicy(tss, aspec, linear_q_model(W3, C3),
                                             num_grid_deltas=5)
  np.testing.assert_array_equal(policy.get_initial_state(3)["log_belief"].numpy(),
                                np.tile(belief.uniform_log_belief(5), [3, 1]))
  np.testing.assert_array_equal(policy.initial_log_belief, belief.uniform_log_belief(5))


def test_an_informed_initial_belief_starts_every_row_and_moves_as_the_uniform_one():
  """log b_0 = informed_log_prior(e, T, N); the first update adds -e'/T to it and
  renormalizes, as from the uniform prior."""
  tss, aspec = specs(2, 3)
  prior = belief.informed_log_prior([1.0, 2.0], 2.0)  # [-0.474, -0.974] (its docstring)
  policy = policies.ConfidenceAdaptivePolicy(
      tss, aspec, linear_q_model(W3, C3), num_grid_deltas=2, gamma=0.5, temperature=1.0,
      sample_delta=False, initial_log_belief=prior)
  state = policy.get_initial_state(2)
  np.testing.assert_array_equal(state["log_belief"].numpy(), [prior, prior])
  np.testing.assert_allclose(prior, [-0.474077, -0.974077], atol=1e-6)
  # The hand example's step 2 errors [0, 0.25]: log b ~ prior + [0, -0.25].
  step = policy.action(first([[1.0, 0.0]]), policy.get_initial_state(1))
  step = policy.action(mid([[0.0, 0.2]], [0.75]), step.state)
  want = belief.update_log_belief(prior, [0.0, 0.25], 1.0).numpy()
  np.testing.assert_allclose(step.state["log_belief"].numpy()[0], want, atol=1e-6)
  # The epsilon-greedy wrapper starts from it too.
  np.testing.assert_array_equal(
      policies.epsilon_greedy(policy, 0.0).get_initial_state(1)["log_belief"].numpy(), [prior])


@pytest.mark.parametrize("value,named", [
    ([0.5, 0.5], r"^initial_log_belief must be normalized, logsumexp 0 \(within 0\.0001\): "
                 r"log probabilities \(subtract their logsumexp; not probabilities\), got "
                 r"\[0\.5, 0\.5\] with logsumexp 1\.19315$"),
    ([0.0, float("nan")], r"^initial_log_belief must be finite"),
    ([-np.inf, 0.0], r"^initial_log_belief must be finite"),
    ([-0.7, -0.7, -0.7], r"^initial_log_belief must be a log-belief of 2 numbers \(one per "
                         r"grid delta, K = num_grid_deltas\), got \[-0\.7, -0\.7, -0\.7\]$"),
    ("uniform", r"^initial_log_belief must be a log-belief of 2 numbers"),
    (list(np.log(np.full(40, 1 / 40))), r"^initial_log_belief must be a log-belief of 2 "),
])
def test_a_bad_initial_belief_is_refused_in_one_line_naming_it(value, named):
  tss, aspec = specs(2, 3)
  with pytest.raises(ValueError, match=named) as e:
    policies.ConfidenceAdaptivePolicy(tss, aspec, linear_q_model(W3, C3), num_grid_deltas=2,
                                      initial_log_belief=value)
  assert "\n" not in str(e.value)
