"""CCVL with lower and upper bounds Q_l(s, a, delta), Q_u(s, a, delta) (paper Sec. "Learning
Lower- and Upper-Bounds", Eq. upper update, Eq. upper policy).

More in docs/agent.md "Module notes", `ccvl_tf/agents/ccvl_bounds_agent.py`.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.runtime import config_flags
from ccvl_tf.algorithm import readings
from ccvl_tf.algorithm import upper_losses
from ccvl_tf.algorithm import networks
from ccvl_tf.algorithm import policies
from ccvl_tf.runtime.config_flags import setting


@dataclasses.dataclass(frozen=True)
class ExplorationConfig:
  """The settings of the upper bound Q_u (alpha_u, its objective) and of the exploration
  policy (beta, delta, epsilon, the belief's K and T), each declared here once with its help
  and bounds (ccvl_tf/runtime/config_flags.py `setting`): inherited by BoundsConfig, embedded in
  ccvl_tf.experiments.online.config.OnlineConfig (finetune_online.py defines its flags from
  these declarations)."""
  upper_alpha: Optional[float] = setting(
      None, "alpha_u, weight of the upper bound's bonus / regularizer (default: the lower "
      "bound's alpha).", lower_bound=0.0, parse_bounds=False)
  # 'regularized': its exact fixed point raises rarely taken actions by ~w / pi_beta and
  # unseen ones to +inf, and the max backup compounds it (docs/online.md "Why the upper
  # bound diverged").
  upper_objective: str = setting(
      "bonus", "Objective of Q_u: 'bonus' (Eq. upper update: target + alpha_u "
      "sqrt(log(1/delta) n(s)^-1)) or 'regularized' (the softmin term; its fixed point "
      "overshoots, docs/online.md).", enum_values=upper_losses.UPPER_OBJECTIVES)
  upper_regularizer: str = setting(
      "softmin", "With upper_objective='regularized': 'softmin' or 'neg_logsumexp' (literal "
      "sign flip; diverges, see upper_losses.UPPER_REGULARIZERS).",
      enum_values=upper_losses.UPPER_REGULARIZERS)
  # The paper gives no value of beta; 0.5 is a placeholder (with rewards >= 0, beta -> 0 lets
  # Q_u choose among all actions, beta = 1 keeps only argmax Q_l).
  beta: float = setting(0.5, "beta of Eq. upper policy's safe set A_l = {a : Q_l >= beta "
                        "max_a' Q_l}.", above=0.0)
  explore_delta: Optional[float] = setting(
      None, "Fixed delta of the exploration (bounds) policy (policies.BoundsPolicy); unset "
      "(default): delta ~ the belief b(h) in the policy state, drawn per episode and updated "
      "from Q_l's Bellman errors (Eq. upper policy; policies.ConfidenceAdaptivePolicy with "
      "upper_network=Q_u).", above=0.0, below=1.0, lower_bound=1e-6, upper_bound=1 - 1e-6)
  explore_epsilon: float = setting(0.01, "Actors' epsilon, on top of the bounds policy.",
                                   lower_bound=0.0, upper_bound=1.0)
  num_grid_deltas: int = setting(8, "K of the exploration belief's grid (belief.delta_grid).",
                                 lower_bound=1)
  belief_temperature: float = setting(
      1.0, "Temperature T of the exploration belief's update (offline CCVL sets it from "
      "held-out data; fine-tuning: unset, the offline run's from its summary.json, 1 if it "
      "has none).", lower_bound=1e-12, upper_bound=1e12)


@dataclasses.dataclass(frozen=True)
class BoundsConfig(ExplorationConfig):
  """Settings of the upper bound and of the exploration policy: ExplorationConfig's and the
  pair reduction, when delta is redrawn, the reward clip and V_max."""
  pair_reduction: str = setting(
      "min", "upper_objective='regularized' only: 'min' (Eq. upper update's min over delta_1, "
      "delta_2) or 'max'.", enum_values=upper_losses.PAIR_REDUCTIONS)
  belief_resample: str = config_flags.redeclare(ccvl_agent.CCVLConfig, "belief_resample",
                                                "episode")
  reward_clip: Optional[float] = setting(
      None, "None or c > 0: rewards clipped to [-c, c] when scoring Bellman errors (the reward "
      "scale Q was trained on; 1.0 for Atari).", above=0.0)
  # min(Q_u, V_max) is still an upper bound of Q*.
  value_max: Optional[float] = setting(
      None, "None or a known upper limit of every return (r_max / (1 - gamma), or tighter when "
      "the MDP says so): the upper bound's bonus-form target is capped there.")

  def validate(self):
    if self.value_max is not None and not np.isfinite(self.value_max):
      raise ValueError(f"value_max must be None or finite, got {self.value_max!r}")
    config_flags.check(self)


class UpperBound:
  """The objective of the upper bound Q_u, Eq. (upper update), per bounds.upper_objective
  (what UpperCCVLAgent's tape calls in place of the lower bound's reading):

  'bonus' (default; upper_losses.ccvl_upper_bonus_loss): Q_u(s, a_D, delta) regressed on
    min(min_j y_j + alpha_u sqrt(log(1/delta) n(s)^-1), bounds.value_max), the targets y_j at
    delta_{j,2} with pair 0 at delta_2 = delta (the min over delta_1, delta_2 <= delta: the
    bonus is smallest at delta_1 = delta).
  'regularized' (upper_losses.ccvl_upper_loss):
    L^u_j = alpha_u sqrt(log(1/delta_{j,1}) n(s)^-1) R_u + TD(Q_u(s,a_D,delta) - y_j),
    loss  = mean_{B,N} min_j L^u_j   (bounds.pair_reduction; R_u per bounds.upper_regularizer)
    with the targets y_j at the sampled delta_{j,2} ~ U(0, delta) as drawn.

  plus c DR3, as the lower bound's. config.reading (the lower bound's reading) does not apply
  here but for the options outside the loss (count_weight, train_delta: the agent's
  confidences and n(s)^-1). The gap (the softmin gap R_u, only reported for 'bonus') is
  reported as 'upper_gap'.
  """

  def __init__(self, config: ccvl_agent.CCVLConfig, bounds: BoundsConfig):
    self.bounds = bounds
    self.alpha = config.alpha if bounds.upper_alpha is None else bounds.upper_alpha  # alpha_u

  def target_confidences(self, delta: tf.Tensor, delta_2: tf.Tensor) -> tf.Tensor:
    if self.bounds.upper_objective == "bonus":  # the min over delta_2 <= delta includes delta
      return readings.options.bootstrap_at_delta(delta, delta_2)  # [B, N, M]
    return delta_2  # [B, N, M]

  def objective(self, online, target, batch, delta, delta_1, delta_2, inverse_count_fn, config,
                training: bool = False) -> Dict[str, tf.Tensor]:
    """Eq. (upper update)'s loss (above) + c DR3 at sampled confidences delta [B, N],
    delta_1, delta_2 [B, N, M] (arguments and metrics as readings.options.Reading.objective)."""
    b = self.bounds
    out, next_phi, targets = readings.paper.q_and_targets(
        online, target, batch, delta, self.target_confidences(delta, delta_2), config.gamma,
        config.dr3_coef > 0, training)                  # [B, N, A] ..., y_j [B, N, M]
    inv_count = tf.stop_gradient(inverse_count_fn(batch["observation"], out["phi"]))  # [B]
    if b.upper_objective == "bonus":
      res = upper_losses.ccvl_upper_bonus_loss(out["q"], batch["action"], targets, delta,
                                               inv_count, self.alpha, config.td_loss,
                                               config.huber_kappa, b.value_max)
    else:
      res = upper_losses.ccvl_upper_loss(out["q"], batch["action"], targets, delta_1, inv_count,
                                         self.alpha, config.td_loss, config.huber_kappa,
                                         b.upper_regularizer, b.pair_reduction)
    return readings.options.with_dr3(res["loss"], res, out["phi"], next_phi, inv_count,
                                     config.dr3_coef, gap_metric="upper_gap")


class UpperCCVLAgent(ccvl_agent.CCVLAgent):
  """Q_u(s, a, delta): CCVLAgent with the objective of Eq. (upper update) (see module doc).

  Reuses CCVLAgent's guarded train step, counts, target updates, checkpoint, confidence
  sampling and n(s)^-1; only the objective its tape calls (`_step_reading`: UpperBound)
  differs. With the ordered delta heads ('monotone', 'cosine_monotone', 'quantized'), Q_u
  falls as delta rises (DELTA_SIGN).
  """

  DELTA_SIGN = -1.0

  def __init__(self, time_step_spec, action_spec, config=ccvl_agent.CCVLConfig(),
               network_config=networks.QNetworkConfig(), bounds=BoundsConfig(), **kwargs):
    bounds.validate()
    self._bounds = bounds
    kwargs.setdefault("name", "UpperCCVLAgent")
    # No support mask on the upper bound: where the data has no action, Q_u is optimistic
    # (BoundsConfig.value_max), which is what exploration needs, not a value ranked last.
    if isinstance(config.reading, readings.bonus.Bonus):
      config = dataclasses.replace(config, reading=dataclasses.replace(
          config.reading, support_threshold=0.0, bonus_counts="state"))
    super().__init__(time_step_spec, action_spec, config, network_config, **kwargs)

  def _step_reading(self) -> UpperBound:
    return UpperBound(self._config, self._bounds)

  @property
  def penalty_alpha(self) -> float:
    """alpha_u, the alpha of Q_u's weight w(s, delta)."""
    return self._reading.alpha


def exploration_belief_policy(time_step_spec, action_spec, lower_network, gamma: float,
                              bounds: BoundsConfig, seed: int, upper_network=None):
  """The policy that acts with delta ~ b(h) from a belief over `bounds.num_grid_deltas` grid
  confidences in its policy state, updated from Q_l's Bellman errors (Eq. delta_selection;
  policies.ConfidenceAdaptivePolicy): greedy in Q_l, or with `upper_network` Eq. upper
  policy (argmax Q_u over the safe set of Q_l at beta); with `bounds.explore_delta` set, the
  same at that fixed delta instead (FixedDeltaPolicy / BoundsPolicy)."""
  if bounds.explore_delta is None:
    return policies.ConfidenceAdaptivePolicy(
        time_step_spec, action_spec, lower_network, num_grid_deltas=bounds.num_grid_deltas,
        gamma=gamma, temperature=bounds.belief_temperature, seed=seed,
        reward_clip=bounds.reward_clip, upper_network=upper_network,
        beta=bounds.beta if upper_network is not None else None,
        resample=bounds.belief_resample)
  if upper_network is None:
    return policies.FixedDeltaPolicy(time_step_spec, action_spec, lower_network,
                                     delta=bounds.explore_delta)
  return policies.BoundsPolicy(time_step_spec, action_spec, lower_network, upper_network,
                               beta=bounds.beta, delta=bounds.explore_delta)


class LowerCCVLAgent(ccvl_agent.CCVLAgent):
  """CCVLAgent (Q_l only) for online fine-tuning without an upper bound: the actors explore
  with the confidence-adaptive policy over Q_l (delta ~ b(h), the belief in the policy state
  updated from Q_l's Bellman errors), epsilon-greedy at bounds.explore_epsilon -- the
  'CCVL (lower bound only)' arm of the Table 6 measurement (docs/online.md). Training, the
  checkpoint and the offline restore are CCVLAgent's."""

  def __init__(self, time_step_spec, action_spec, config=ccvl_agent.CCVLConfig(),
               network_config=networks.QNetworkConfig(), bounds: BoundsConfig = BoundsConfig(),
               dataset_size=None, inverse_count_fn=None, name="LowerCCVLAgent"):
    super().__init__(time_step_spec, action_spec, config, network_config,
                     dataset_size=dataset_size, inverse_count_fn=inverse_count_fn, name=name)
    bounds.validate()
    self._bounds = bounds
    self._belief_policy = exploration_belief_policy(
        time_step_spec, action_spec, self.q_network, config.gamma, bounds, config.seed)
    self._exploration_policy = policies.epsilon_greedy(self._belief_policy,
                                                       bounds.explore_epsilon)

  @property
  def bounds(self) -> BoundsConfig:
    return self._bounds

  @property
  def adaptive_policy(self):
    """The confidence-adaptive policy over Q_l that explores (without epsilon)."""
    return self._belief_policy

  @property
  def exploration_policy(self):
    return self._exploration_policy


class CCVLBoundsAgent(tf.Module):
  """Lower and upper confidence-conditioned bounds trained side by side (see module doc)."""

  def __init__(self, time_step_spec, action_spec,
               config: ccvl_agent.CCVLConfig = ccvl_agent.CCVLConfig(),
               network_config: networks.QNetworkConfig = networks.QNetworkConfig(),
               bounds: BoundsConfig = BoundsConfig(),
               dataset_size: Optional[float] = None,
               inverse_count_fn: Optional[Callable] = None, name: str = "CCVLBoundsAgent"):
    """Args as CCVLAgent's, plus `bounds` (BoundsConfig). Q_u uses seed config.seed + 1."""
    super().__init__(name=name)
    bounds.validate()
    self._bounds = bounds
    self.lower = ccvl_agent.CCVLAgent(
        time_step_spec, action_spec, config, network_config, dataset_size=dataset_size,
        inverse_count_fn=inverse_count_fn, name="lower")
    self.upper = UpperCCVLAgent(
        time_step_spec, action_spec, dataclasses.replace(config, seed=config.seed + 1),
        network_config, bounds, dataset_size=dataset_size, inverse_count_fn=inverse_count_fn,
        name="upper")
    self._time_step_spec, self._action_spec = time_step_spec, action_spec
    # Eq. upper policy with delta ~ b(h) (or at the fixed explore_delta).
    self.bounds_policy = exploration_belief_policy(
        time_step_spec, action_spec, self.lower.q_network, config.gamma, bounds, config.seed,
        upper_network=self.upper.q_network)
    self.exploration_policy = policies.epsilon_greedy(self.bounds_policy,
                                                      bounds.explore_epsilon)

  @property
  def bounds(self) -> BoundsConfig:
    return self._bounds

  @property
  def config(self) -> ccvl_agent.CCVLConfig:
    return self.lower.config

  @property
  def train_step_counter(self) -> tf.Variable:
    """The lower agent's counter (the upper one advances in lock step)."""
    return self.lower.train_step_counter

  @property
  def policy(self):
    """Fixed-delta greedy policy in Q_l (the safe policy)."""
    return self.lower.policy

  @property
  def q_network(self):
    return self.lower.q_network

  @property
  def upper_q_network(self):
    return self.upper.q_network

  @property
  def time_step_spec(self):
    return self._time_step_spec

  @property
  def action_spec(self):
    return self._action_spec

  # ---- the online extension (ccvl_tf.agents.learner.OnlineLearner); bounds_policy and
  # exploration_policy are attributes (see __init__) ---------------------------------------------
  def policy_variables(self) -> Dict[str, List[tf.Variable]]:
    """What actors need: the online weights of both bounds (tf.Variables)."""
    return {"lower": list(self.lower.online_variables),
            "upper": list(self.upper.online_variables)}

  def guarded_learners(self) -> Dict[str, ccvl_agent.CCVLAgent]:
    """{'': Q_l, 'upper/': Q_u}: both bounds, stepped in this order on each batch."""
    return {"": self.lower, "upper/": self.upper}

  def set_learning_rate(self, lr: float) -> None:
    """Adam learning rate of both bounds (e.g. a smaller one for online fine-tuning)."""
    for bound in self.guarded_learners().values():
      bound.set_learning_rate(lr)

  def restore_offline(self, path: str) -> str:
    """Restores an offline checkpoint: a CCVLBoundsAgent one (it has 'upper/' entries)
    restores both bounds; a plain CCVLAgent one (train_offline.py's) restores Q_l and starts
    Q_u as a copy of Q_l, at Q_l's train step. Returns which of the two it was."""
    names = [n for n, _ in tf.train.list_variables(path)]
    if any(n.startswith("upper/") for n in names):
      self.make_checkpoint().restore(path).assert_existing_objects_matched()
      return "lower and upper bounds"
    self.lower.make_checkpoint().restore(path).assert_existing_objects_matched()
    self.copy_lower_to_upper()
    self.upper.train_step_counter.assign(self.train_step_counter)
    return "lower bound only, Q_u <- Q_l"

  def copy_lower_to_upper(self) -> None:
    """Q_u <- Q_l (online and target weights) and Q_u's count statistics <- Q_l's (the
    offline feature moment C, |D| and the running mean that normalizes n(s)^-1): the start of
    Q_u when only Q_l was trained. Without the counts Q_u would start with no offline data in
    C and no normalization (n(s)^-1 divided by each batch's own mean, so its weight could not
    shrink as online data arrives). Call it before start_online_counts. With the monotone delta
    head Q_u's head falls with delta, so the copy starts Q_u as Q_l's family reflected,
    Q_l(0) + Q_l(1) - Q_l(delta) (networks.MonotoneDeltaHead): Q_u(0) = Q_l(1), Q_u(1) = Q_l(0)."""
    networks.copy_weights(self.lower.online_network, self.upper.online_network)
    networks.copy_weights(self.lower.online_network, self.upper.target_network)
    lower_counts, upper_counts = self.lower.counts, self.upper.counts
    if lower_counts is not None and upper_counts is not None:
      if lower_counts.online or upper_counts.online:
        raise ValueError("copy_lower_to_upper: the counts were already started online; copy "
                         "before start_online_counts")
      pairs = list(zip(lower_counts.variables, upper_counts.variables))
      if len(lower_counts.variables) != len(upper_counts.variables) or any(
          a.shape != b.shape for a, b in pairs):
        raise ValueError("copy_lower_to_upper: Q_l's and Q_u's count statistics differ in "
                         "layout")
      for src, dst in pairs:
        dst.assign(src)

  def make_checkpoint(self, **extra) -> tf.train.Checkpoint:
    """CCVLAgent layout for Q_l at the top level, plus `upper` (see module doc)."""
    return self.lower.make_checkpoint(upper=self.upper.make_checkpoint(), **extra)

  def train_on_batch(self, batch) -> Dict[str, tf.Tensor]:
    """One step of each bound on the same batch; metrics of Q_u are prefixed 'upper/'.

    Raises:
      NonFiniteLossError (FloatingPointError) from either bound (Q_l is stepped first: if only
      Q_u fails, Q_l has taken this step and the counters differ by one; stop and restore).
    """
    metrics = {}
    for prefix, bound in self.guarded_learners().items():
      metrics.update({prefix + k: v for k, v in bound.train_on_batch(batch).items()})
    return metrics
