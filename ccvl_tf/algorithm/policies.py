"""CCVL policies as TF-Agents `TFPolicy` subclasses (paper Sec. "Confidence-Adaptive Policies").

Writing them as SavedModels is ccvl_tf/algorithm/policy_export.py (`export_policy`; the one here
also refuses, in every export, the adaptive policy's state where another state is taken). More in
docs/policies.md "Module notes", `ccvl_tf/algorithm/policies.py`.
"""
from __future__ import annotations

import collections
import collections.abc
from typing import Optional

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from tf_agents.policies import epsilon_greedy_policy
from tf_agents.policies import tf_policy
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import policy_step

from ccvl_tf.algorithm import belief
# The adaptive policy's state: its keys, spec and initial belief check (part of this module's API).
from ccvl_tf.algorithm.adaptive_state import (  # noqa: F401
    DELTA_INDEX, HAS_PREV, LOG_BELIEF, PREV_ACTION, PREV_OBSERVATION, RNG, SQ_ERROR_COUNT,
    SQ_ERROR_SUM, adaptive_state_spec, checked_log_belief)
from ccvl_tf.algorithm import networks as networks_lib
from ccvl_tf.algorithm import policy_export

PolicyInfo = collections.namedtuple("PolicyInfo", ["delta"])
PolicyInfo.__doc__ = "Side information of every CCVL policy: `delta` [B] float32 acted under."

def _keras_variables(*models):
  """The underlying tf.Variables of Keras 3 models (what TFPolicy/PolicySaver can track).

  Keras 3 variables are not tf.Variables themselves; `v.value` is (see shared/STACK.md).
  """
  out = []
  for model in models:
    for v in model.variables:
      out.append(getattr(v, "value", v))
  return out


def action_count(action_spec) -> int:
  """A = maximum - minimum + 1 of a scalar bounded integer action spec (ValueError otherwise)."""
  return _num_actions(action_spec)


def _num_actions(action_spec) -> int:
  if not tensor_spec.is_bounded(action_spec) or action_spec.shape.rank != 0:
    raise ValueError(f"CCVL policies need a scalar bounded discrete action spec, got {action_spec}")
  if not action_spec.dtype.is_integer:
    raise ValueError(f"CCVL policies need an integer action spec, got {action_spec}")
  return int(np.asarray(action_spec.maximum) - np.asarray(action_spec.minimum) + 1)


def _check_q_network(q_network, num_actions: int, what: str = "q_network"):
  """Fails fast when a model does not follow the contract or has the wrong action count."""
  input_names = None
  try:
    inputs = q_network.inputs
    if isinstance(q_network.input, dict):
      input_names = set(q_network.input.keys())
    elif inputs is not None:
      input_names = {getattr(t, "name", "").split(":")[0] for t in inputs}
  except (AttributeError, ValueError):  # not built / subclassed model
    pass
  if input_names is not None and not {"observation", "delta"} <= input_names:
    raise ValueError(
        f"{what} must be a functional Keras model with named inputs 'observation' and 'delta' "
        f"(docs/CONTRACTS.md); its inputs are {sorted(input_names)}")
  try:
    out_shape = tuple(q_network.outputs[0].shape)
  except (AttributeError, ValueError, TypeError, IndexError):
    out_shape = None
  if out_shape is not None:
    if len(out_shape) != 3:
      raise ValueError(f"{what} must output Q values [B, K, A], its output shape is {out_shape}")
    if out_shape[-1] is not None and int(out_shape[-1]) != num_actions:
      raise ValueError(
          f"{what} outputs Q values for {int(out_shape[-1])} actions, but the action spec has "
          f"{num_actions} actions")


def _q_values(q_network, observation, deltas):
  """Q(s, a, delta) for every delta given: observation [B, ...], deltas [B, K] -> [B, K, A]."""
  q = q_network({"observation": observation, "delta": tf.cast(deltas, tf.float32)},
                training=False)
  return tf.cast(q, tf.float32)


def safe_set_mask(q_lower, beta):
  """The safe set A_l of Eq. upper policy as a boolean mask over the last axis.

  A_l = {a : Q_l(s, a, delta) >= beta * max_a' Q_l(s, a', delta)}. With a negative max and
  beta < 1 that set can be empty (beta * max > max); argmax_a Q_l is therefore always added,
  so the policy never has to act outside the set and, for beta <= 1 and max >= 0, nothing
  changes (argmax_a Q_l already satisfies the inequality).

  Args:
    q_lower: Q_l [..., A].
    beta: scalar > 0.

  Returns:
    bool [..., A].
  """
  q_lower = tf.convert_to_tensor(q_lower, tf.float32)
  best = tf.reduce_max(q_lower, axis=-1, keepdims=True)
  in_set = q_lower >= tf.cast(beta, tf.float32) * best
  is_argmax = tf.one_hot(tf.argmax(q_lower, axis=-1), tf.shape(q_lower)[-1], on_value=True,
                         off_value=False, dtype=tf.bool)
  return tf.logical_or(in_set, is_argmax)


def bounds_greedy_index(q_lower, q_upper, beta):
  """argmax_{a in A_l} Q_u(s, a, delta) (Eq. upper policy): [..., A] x2 -> int64 [...]."""
  mask = safe_set_mask(q_lower, beta)
  q_upper = tf.convert_to_tensor(q_upper, tf.float32)
  masked = tf.where(mask, q_upper, tf.fill(tf.shape(q_upper), tf.constant(-np.inf, tf.float32)))
  return tf.argmax(masked, axis=-1)


class _CCVLPolicyBase(tf_policy.TFPolicy):
  """Shared plumbing: specs, Keras 3 variable tracking, greedy action from Q [B, A]."""

  def __init__(self, time_step_spec, action_spec, networks, policy_state_spec=(),
               name=None, automatic_state_reset=True):
    self._num_actions = _num_actions(action_spec)
    self._networks = tuple(networks)
    info_spec = PolicyInfo(delta=tf.TensorSpec((), tf.float32, name="delta"))
    super().__init__(
        time_step_spec, action_spec, policy_state_spec=policy_state_spec, info_spec=info_spec,
        automatic_state_reset=automatic_state_reset, name=name)
    # tf.Module tracking does not see Keras 3 models; keep their tf.Variables in an attribute so
    # that `variables()` and PolicySaver find them (shared/STACK.md).
    self._network_variables = _keras_variables(*self._networks)

  @property
  def num_actions(self) -> int:
    return self._num_actions

  def _variables(self):
    return list(self._network_variables)

  def _get_initial_state(self, batch_size):
    # None: TFPolicy's "no batch dimension", the () of a policy without state.
    if batch_size is not None:
      batch_size = policy_export.initial_state_batch(batch_size)
    return super()._get_initial_state(batch_size)

  def _index_to_action(self, index):
    minimum = tf.cast(self.action_spec.minimum, self.action_spec.dtype)
    return tf.cast(index, self.action_spec.dtype) + minimum

  def _action_to_index(self, action):
    minimum = tf.cast(self.action_spec.minimum, self.action_spec.dtype)
    return tf.cast(action - minimum, tf.int32)

  def _deterministic(self, action):
    return tfp.distributions.Deterministic(loc=action)


class FixedDeltaPolicy(_CCVLPolicyBase):
  """Fixed-CCVL: greedy in Q(s, ., delta) at one fixed delta (paper Sec. "Comparisons").

  Stateless (policy_state is ()). `delta` is a python float in (0, 1); the paper picks it as
  the delta with the lowest Bellman error during offline training.

  Args:
    time_step_spec: TF-Agents time step spec (observation spec as the network expects it).
    action_spec: scalar bounded integer spec with A = maximum - minimum + 1 actions.
    q_network: contract Q-network (docs/CONTRACTS.md), output [B, K, A].
    delta: the confidence to act under.
  """

  def __init__(self, time_step_spec, action_spec, q_network, delta: float, name=None):
    if not 0.0 < float(delta) < 1.0:
      raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    self._q_network = q_network
    self._delta = float(delta)
    super().__init__(time_step_spec, action_spec, [q_network], name=name)
    _check_q_network(q_network, self._num_actions)

  @property
  def delta(self) -> float:
    return self._delta

  def _distribution(self, time_step, policy_state):
    observation = time_step.observation
    batch = tf.shape(tf.nest.flatten(observation)[0])[0]
    deltas = tf.fill([batch, 1], tf.constant(self._delta, tf.float32))  # [B, 1]
    q = _q_values(self._q_network, observation, deltas)[:, 0, :]  # [B, A]
    action = self._index_to_action(tf.argmax(q, axis=-1))
    return policy_step.PolicyStep(self._deterministic(action), policy_state,
                                  PolicyInfo(delta=deltas[:, 0]))


class BoundsPolicy(_CCVLPolicyBase):
  """Eq. upper policy at a fixed delta: argmax of Q_u over the safe set of Q_l.

    pi(s) = argmax_{a in A_l} Q_u(s, a, delta),
    A_l   = {a : Q_l(s, a, delta) >= beta * max_a' Q_l(s, a', delta)}   (see `safe_set_mask`).

  A model producing both bounds is passed as two contract models (e.g. two functional models
  sharing layers). For delta ~ b(h) use `ConfidenceAdaptivePolicy(..., upper_network=, beta=)`.
  """

  def __init__(self, time_step_spec, action_spec, lower_network, upper_network, beta: float,
               delta: float, name=None):
    if not 0.0 < float(delta) < 1.0:
      raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if not float(beta) > 0.0:
      raise ValueError(f"beta must be > 0 (Eq. upper policy), got {beta!r}")
    self._lower = lower_network
    self._upper = upper_network
    self._beta = float(beta)
    self._delta = float(delta)
    super().__init__(time_step_spec, action_spec, [lower_network, upper_network], name=name)
    _check_q_network(lower_network, self._num_actions, "lower_network")
    _check_q_network(upper_network, self._num_actions, "upper_network")

  def _distribution(self, time_step, policy_state):
    observation = time_step.observation
    batch = tf.shape(tf.nest.flatten(observation)[0])[0]
    deltas = tf.fill([batch, 1], tf.constant(self._delta, tf.float32))  # [B, 1]
    q_l = _q_values(self._lower, observation, deltas)[:, 0, :]  # [B, A]
    q_u = _q_values(self._upper, observation, deltas)[:, 0, :]  # [B, A]
    action = self._index_to_action(bounds_greedy_index(q_l, q_u, self._beta))
    return policy_step.PolicyStep(self._deterministic(action), policy_state,
                                  PolicyInfo(delta=deltas[:, 0]))


class ConfidenceAdaptivePolicy(_CCVLPolicyBase):
  """CCVL's confidence-adaptive policy (Eq. delta_selection), belief carried in policy_state.

  policy_state (a dict; every entry has a leading batch dimension B):
    'log_belief'       [B, K] float32  normalized log b over `belief.delta_grid(K)`
    'prev_observation' [B, *obs]       s of the last step
    'prev_action'      [B]             a taken at the last step
    'has_prev'         [B] bool        whether (s, a) above belongs to a real previous step
    'rng'              [B, 2] int64    stateless seed for drawing delta ~ b (row 0 seeds the batch)
    'delta_index'      [B] int32       grid index of the delta acted with at the last step
    'sq_error_sum'     [B, K] float64  sum over the transitions scored so far of the e(delta)
                                       that updated the belief (step 1 below), as float32
                                       errors summed in float64
    'sq_error_count'   [B] int64       number of those transitions
  The last two are a record, read by nothing here: never reset inside a run (a FIRST step
  leaves them), so the errors of one episode are the difference between its LAST step's state
  and the previous episode's (ccvl_tf.evaluation.rollouts.run_episodes records them so).

  Each call with time step (r, discount, s'):
    1. if has_prev and the step is not FIRST, score the transition (s, a, r, s') for every grid
       delta, e(delta) = (Q(s,a,delta) - r' - gamma*discount*max_a' Q(s',a',delta))^2 with
       `belief.bellman_sq_errors` (r' = r, clipped to [-reward_clip, reward_clip] when given:
       use the reward scale Q was trained on, e.g. 1.0 for Atari), and update
       log b <- log b - e / temperature, renormalized (`belief.update_log_belief`; the
       surrogate log-likelihood reading of Eq. delta_selection, see ccvl_tf/algorithm/belief.py).
       TF-Agents' discount is 0 at a terminal LAST step, so the final reward is scored with no
       bootstrap; a time-limit LAST (discount 1) bootstraps as usual.
    2. delta = grid[k] with k ~ b (sample_delta=True, the paper) or k = argmax b, drawn at
       every step (resample='step') or only at the first step of each episode and held for
       the episode (resample='episode', as ccvl_tf/tabular/evaluation.py does).
    3. act greedily: argmax_a Q(s', a, delta); with `upper_network` and `beta`, Eq. upper
       policy: argmax over the safe set of Q_l (this network) of Q_u.
    4. remember (s', a) for the next call.

  Episode boundaries: the belief persists across episodes within one evaluation run (the paper
  adapts delta over episodes); a FIRST step only discards the transition memory, so the LAST
  -> FIRST pair is never scored, while the LAST step's own transition (with the final reward)
  is. The policy is built with `automatic_state_reset=False`: TF-Agents' default
  (`TFPolicy.action` replacing the state by `get_initial_state` wherever `is_first()`) would
  wipe the belief at every episode start. What the caller must do to keep the belief:
    * carry `step.state` from one `action` call into the next, including across episode
      boundaries; call `get_initial_state` once per evaluation run, not per episode;
    * `tf_agents.drivers.py_driver.PyDriver` on an *unbatched* environment calls
      `get_initial_state` at every FIRST step after its first episode: run it one episode
      per `run()` call passing the returned state back in, wrap the env in
      `BatchedPyEnvironment`, or use `ccvl_tf.evaluation.rollouts.run_episodes`;
    * `DynamicEpisodeDriver`/`DynamicStepDriver.run()` call `get_initial_state` when
      `policy_state` is None: always pass the previous run's final state;
    * `get_initial_state(0)` (what TF-Agents' py policies ask for without a batch size) is the
      empty state, which `action` replaces by the initial state of the time step's batch; a
      state of another batch, or a batch size that is not an integer >= 0, is refused naming it
      (`policy_export.state_for_batch`, `policy_export.initial_state_batch`);
    * wrappers built with TF-Agents' defaults (GreedyPolicy, EpsilonGreedyPolicy) have
      `automatic_state_reset=True` and would reset the belief: use `epsilon_greedy()` here.
  The SavedModel written by PolicySaver keeps this behaviour (the reset logic is traced in).

  Args:
    time_step_spec, action_spec: TF-Agents specs.
    q_network: contract Q-network (the lower bound Q_l when `upper_network` is given); the
      belief is always scored with this network.
    num_grid_deltas: K, size of the quantized grid `belief.delta_grid(K)`; with a quantized
      delta head, its delta_members (networks.check_grid).
    gamma: discount of the Bellman error (the training discount, 0.99 on Atari).
    temperature: T of the surrogate likelihood; smaller concentrates faster.
    sample_delta: True: delta ~ b; False: delta = argmax b.
    resample: 'step' (draw delta at every step) or 'episode' (draw at FIRST steps only).
    seed: python int, initial stateless seed placed in `get_initial_state`.
    reward_clip: None or c > 0: clip r to [-c, c] when scoring (not for the returns).
    upper_network, beta: optional Q_u network and beta > 0 for Eq. upper policy.
    initial_log_belief: None (the uniform prior, `belief.uniform_log_belief(K)`) or the
      initial log-belief log b_0 [K] of every run (e.g. `belief.informed_log_prior`): finite,
      normalized (logsumexp within 1e-4 of 0); anything else is refused naming it.
  """

  def __init__(self, time_step_spec, action_spec, q_network, num_grid_deltas: int = 8,
               gamma: float = 0.99, temperature: float = 1.0, sample_delta: bool = True,
               seed: int = 0, reward_clip: Optional[float] = None, upper_network=None,
               beta: Optional[float] = None, resample: str = "step",
               initial_log_belief=None, name=None):
    if resample not in ("step", "episode"):
      raise ValueError(f"resample must be 'step' or 'episode', got {resample!r}")
    if not float(temperature) > 0.0:
      raise ValueError(f"temperature must be > 0, got {temperature!r}")
    if not 0.0 <= float(gamma) <= 1.0:
      raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
    if (upper_network is None) != (beta is None):
      raise ValueError("upper_network and beta must be given together (Eq. upper policy)")
    if beta is not None and not float(beta) > 0.0:
      raise ValueError(f"beta must be > 0 (Eq. upper policy), got {beta!r}")
    if reward_clip is not None and not float(reward_clip) > 0.0:
      raise ValueError(f"reward_clip must be None or > 0, got {reward_clip!r}")
    self._q_network = q_network
    self._upper = upper_network
    self._beta = None if beta is None else float(beta)
    self._grid = belief.delta_grid(num_grid_deltas)  # [K] numpy float32
    self._num_grid_deltas = int(num_grid_deltas)
    for model in (q_network, upper_network):  # a quantized head: one member per grid delta
      networks_lib.check_model_grid(model, self._num_grid_deltas)
    self._gamma = float(gamma)
    self._temperature = float(temperature)
    self._sample_delta = bool(sample_delta)
    self._resample = resample
    self._seed = int(seed)
    self._reward_clip = None if reward_clip is None else float(reward_clip)
    self._initial_log_belief = (belief.uniform_log_belief(self._num_grid_deltas)
                                if initial_log_belief is None else
                                checked_log_belief(initial_log_belief, self._num_grid_deltas))

    obs_spec = time_step_spec.observation
    if not isinstance(obs_spec, tf.TypeSpec):
      raise ValueError("ConfidenceAdaptivePolicy needs a single (non-nested) observation spec, "
                       f"got {obs_spec}")
    state_spec = {
        LOG_BELIEF: tf.TensorSpec([self._num_grid_deltas], tf.float32, name=LOG_BELIEF),
        PREV_OBSERVATION: tf.TensorSpec(obs_spec.shape, obs_spec.dtype, name=PREV_OBSERVATION),
        PREV_ACTION: tf.TensorSpec((), action_spec.dtype, name=PREV_ACTION),
        HAS_PREV: tf.TensorSpec((), tf.bool, name=HAS_PREV),
        RNG: tf.TensorSpec([2], tf.int64, name=RNG),
        DELTA_INDEX: tf.TensorSpec((), tf.int32, name=DELTA_INDEX),
        SQ_ERROR_SUM: tf.TensorSpec([self._num_grid_deltas], tf.float64, name=SQ_ERROR_SUM),
        SQ_ERROR_COUNT: tf.TensorSpec((), tf.int64, name=SQ_ERROR_COUNT),
    }
    networks = [q_network] + ([upper_network] if upper_network is not None else [])
    super().__init__(time_step_spec, action_spec, networks, policy_state_spec=state_spec,
                     name=name, automatic_state_reset=False)
    _check_q_network(q_network, self._num_actions)
    if upper_network is not None:
      _check_q_network(upper_network, self._num_actions, "upper_network")

  @property
  def delta_grid(self) -> np.ndarray:
    return self._grid.copy()

  @property
  def initial_log_belief(self) -> np.ndarray:
    """log b_0 [K] float32, where every run's belief starts (uniform unless given)."""
    return self._initial_log_belief.copy()

  def _get_initial_state(self, batch_size):
    # Every entry has a batch dimension: None (TFPolicy's "none") is refused with the rest.
    batch_size = policy_export.initial_state_batch(batch_size)
    state = tensor_spec.zero_spec_nest(self._policy_state_spec, outer_dims=(batch_size,))
    log_b0 = tf.constant(self._initial_log_belief, tf.float32)  # [K]
    state[LOG_BELIEF] = tf.tile(log_b0[tf.newaxis], [batch_size, 1])  # [B, K]
    state[RNG] = tf.tile(tf.constant([[self._seed, 0]], tf.int64), [batch_size, 1])  # [B, 2]
    return state

  def _check_state(self, policy_state):
    """Assertions that name the policy state's key for a state no step of this policy can
    have produced (a hand-made or edited state): a NaN or all -inf belief row, a previous
    action outside the action spec, a delta index outside the grid. Returns the state."""
    k = self._num_grid_deltas
    log_b = policy_state[LOG_BELIEF]  # [B, K]
    prev = self._action_to_index(policy_state[PREV_ACTION])  # [B]
    index = tf.cast(policy_state[DELTA_INDEX], tf.int32)  # [B]
    checks = [
        tf.debugging.Assert(
            tf.logical_and(tf.logical_not(tf.reduce_any(tf.math.is_nan(log_b))),
                           tf.reduce_all(tf.reduce_any(log_b > -np.inf, axis=-1))),
            [f"the policy state's '{LOG_BELIEF}' must be a log-belief over the {k} grid deltas "
             f"(no NaN, at least one entry above -inf per row; get_initial_state() gives the "
             f"uniform one); got", log_b], summarize=16),
        tf.debugging.Assert(
            tf.reduce_all(tf.logical_and(prev >= 0, prev < self._num_actions)),
            [f"the policy state's '{PREV_ACTION}' must be an action of the action spec "
             f"({self._num_actions} actions from its minimum); got", policy_state[PREV_ACTION]],
            summarize=16),
        tf.debugging.Assert(
            tf.reduce_all(tf.logical_and(index >= 0, index < k)),
            [f"the policy state's '{DELTA_INDEX}' must index the {k} grid deltas, in [0, {k}); "
             f"got", policy_state[DELTA_INDEX]], summarize=16),
    ]
    with tf.control_dependencies(checks):
      return {key: tf.identity(v) for key, v in policy_state.items()}

  def _distribution(self, time_step, policy_state):
    # get_initial_state(0), the empty state: the initial state of the time step's batch.
    policy_state = self._check_state(
        policy_export.state_for_batch(self, time_step, policy_state))
    observation = time_step.observation  # [B, *obs]
    batch = tf.shape(observation)[0]
    grid = tf.constant(self._grid, tf.float32)  # [K]
    deltas = tf.tile(grid[tf.newaxis], [batch, 1])  # [B, K]

    # One forward pass over [previous; current] observations (torso once per state).
    both_obs = tf.concat([policy_state[PREV_OBSERVATION], observation], axis=0)  # [2B, *obs]
    q_both = _q_values(self._q_network, both_obs, tf.concat([deltas, deltas], 0))  # [2B, K, A]
    q_prev, q_now = q_both[:batch], q_both[batch:]  # [B, K, A] each

    # 1. Score the last transition (s, a, r, s') for every grid delta.
    prev_index = self._action_to_index(policy_state[PREV_ACTION])  # [B]
    q_sa = tf.gather(q_prev, prev_index, axis=2, batch_dims=1)  # [B, K]
    next_v = tf.reduce_max(q_now, axis=-1)  # [B, K]
    reward = tf.cast(time_step.reward, tf.float32)  # [B]
    discount = tf.cast(time_step.discount, tf.float32)  # [B]
    # A NaN or infinite reward (or discount) would turn the belief into NaN, carried in the
    # state to every later step (a NaN belief samples out-of-range grid indices): refused.
    finite = tf.debugging.Assert(
        tf.logical_and(tf.reduce_all(tf.math.is_finite(reward)),
                       tf.reduce_all(tf.math.is_finite(discount))),
        ["the reward and discount of the time step must be finite numbers (the belief of the "
         "adaptive policy scores them); got reward", reward, "discount", discount], summarize=8)
    with tf.control_dependencies([finite]):
      reward = tf.identity(reward)
    if self._reward_clip is not None:
      reward = tf.clip_by_value(reward, -self._reward_clip, self._reward_clip)
    discount = self._gamma * discount
    sq_errors = belief.bellman_sq_errors(q_sa, reward, discount, next_v)  # [B, K]
    updated = belief.update_log_belief(policy_state[LOG_BELIEF], sq_errors, self._temperature)
    valid = tf.logical_and(policy_state[HAS_PREV], tf.logical_not(time_step.is_first()))  # [B]
    log_b = tf.where(valid[:, tf.newaxis], updated, policy_state[LOG_BELIEF])  # [B, K]
    # Finite inputs can still overflow every Bellman error of a row (a reward of 1e30 without
    # reward_clip, a diverged Q): the belief is then undefined, and not carried on either.
    defined = tf.debugging.Assert(
        tf.logical_not(tf.reduce_any(tf.math.is_nan(log_b))),
        ["the belief update is undefined (every Bellman error of a row overflowed: a reward "
         "far outside the Q-values' scale, or non-finite Q-values); squared errors",
         sq_errors], summarize=8)
    with tf.control_dependencies([defined]):
      log_b = tf.identity(log_b)
    # The record: exactly the errors that updated the belief, summed in float64.
    sq_error_sum = policy_state[SQ_ERROR_SUM] + tf.where(
        valid[:, tf.newaxis], tf.cast(sq_errors, tf.float64),
        tf.zeros_like(policy_state[SQ_ERROR_SUM]))  # [B, K]
    sq_error_count = policy_state[SQ_ERROR_COUNT] + tf.cast(valid, tf.int64)  # [B]

    # 2. Choose delta from the belief.
    rng = policy_state[RNG]  # [B, 2]
    if self._sample_delta:
      k_index = tf.random.stateless_categorical(log_b, 1, seed=rng[0])[:, 0]  # [B]
    else:
      k_index = tf.argmax(log_b, axis=-1)  # [B]
    k_index = tf.cast(k_index, tf.int32)
    if self._resample == "episode":
      new_episode = tf.logical_or(time_step.is_first(), tf.logical_not(policy_state[HAS_PREV]))
      k_index = tf.where(new_episode, k_index, policy_state[DELTA_INDEX])  # [B]
    delta = tf.gather(grid, k_index)  # [B]

    # 3. Act greedily under Q(s', ., delta) (or Eq. upper policy).
    q_l = tf.gather(q_now, k_index, axis=1, batch_dims=1)  # [B, A]
    if self._upper is None:
      index = tf.argmax(q_l, axis=-1)
    else:
      q_u = _q_values(self._upper, observation, delta[:, tf.newaxis])[:, 0, :]  # [B, A]
      index = bounds_greedy_index(q_l, q_u, self._beta)
    action = self._index_to_action(index)  # [B]

    new_state = {
        LOG_BELIEF: log_b,
        PREV_OBSERVATION: observation,
        PREV_ACTION: action,
        HAS_PREV: tf.ones_like(policy_state[HAS_PREV]),
        RNG: rng + tf.constant([[0, 1]], tf.int64),
        DELTA_INDEX: k_index,
        SQ_ERROR_SUM: sq_error_sum,
        SQ_ERROR_COUNT: sq_error_count,
    }
    return policy_step.PolicyStep(self._deterministic(action), new_state,
                                  PolicyInfo(delta=delta))


class CCVLEpsilonGreedyPolicy(epsilon_greedy_policy.EpsilonGreedyPolicy):
  """TF-Agents' `EpsilonGreedyPolicy`, made safe for the stateful CCVL policies.

  Differences from the stock wrapper, all needed by `ConfidenceAdaptivePolicy`:
    * `automatic_state_reset` follows the wrapped policy (stock: always True, which would reset
      the belief at every FIRST step, in the wrapper and in its inner GreedyPolicy);
    * the state's 'prev_action' is replaced by the action actually executed (stock: the greedy
      action, so the belief would score a transition that never happened when the random
      action is taken);
    * `PolicyInfo.delta` is inherited from the greedy step (stock: a random sample of the spec).
  """

  def __init__(self, policy, epsilon, name=None):
    super().__init__(policy, epsilon, info_fields_to_inherit_from_greedy=("delta",), name=name)
    reset = getattr(policy, "_automatic_state_reset", True)
    # Both the wrapper and its inner GreedyPolicy reset state in `action()` when this is True.
    self._automatic_state_reset = reset
    self._greedy_policy._automatic_state_reset = reset  # pylint: disable=protected-access

  def _get_initial_state(self, batch_size):
    # Stock wrappers return zeros of the state spec; the belief needs the wrapped policy's own
    # initial state (uniform log-belief, seeded RNG).
    return self.wrapped_policy.get_initial_state(batch_size)

  def _action(self, time_step, policy_state, seed):
    step = super()._action(time_step, policy_state, seed)
    state = step.state
    if isinstance(state, collections.abc.Mapping) and PREV_ACTION in state:
      state = dict(state)
      state[PREV_ACTION] = step.action
      step = step._replace(state=state)
    return step


def export_policy(policy: tf_policy.TFPolicy, directory: str, train_step=None, **record) -> str:
  """ccvl_tf.algorithm.policy_export.export_policy of `policy` (`record`: its game and action_set),
  the export also refusing, naming the state it takes, an adaptive policy's state: a run exports
  the adaptive policy beside Fixed-CCVL, whose export keeps no state."""
  observation = policy.time_step_spec.observation
  others = []
  if isinstance(observation, tf.TensorSpec):
    others.append(adaptive_state_spec(observation, policy.action_spec))
  return policy_export.export_policy(policy, directory, train_step=train_step,
                                     other_states=others, **record)


def epsilon_greedy(policy: tf_policy.TFPolicy, epsilon: float = 0.001,
                   name: Optional[str] = None) -> CCVLEpsilonGreedyPolicy:
  """Epsilon-greedy wrapper for evaluation (paper: evaluation epsilon = 0.001).

  Uses TF-Agents' `EpsilonGreedyPolicy` (via `CCVLEpsilonGreedyPolicy`, which keeps the belief
  of a `ConfidenceAdaptivePolicy` intact). The random branch uses TF's stateful RNG, so
  epsilon-greedy actions are not bit-reproducible across processes unless each sets TF's
  global seed (tf.random.set_seed) before building the policy, as fine-tuning's deterministic
  schedule does; epsilon=0 is.
  """
  if not 0.0 <= float(epsilon) <= 1.0:
    raise ValueError(f"epsilon must be in [0, 1], got {epsilon!r}")
  return CCVLEpsilonGreedyPolicy(policy, float(epsilon), name=name)
