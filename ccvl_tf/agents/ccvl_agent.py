"""CCVLAgent: confidence-conditioned value learning as a TF-Agents agent (paper Algorithm 1).

More in docs/agent.md "Module notes", `ccvl_tf/agents/ccvl_agent.py`.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import numpy as np
import tensorflow as tf
from tf_agents.policies import epsilon_greedy_policy
from tf_agents.utils import common

from ccvl_tf.algorithm import belief
from ccvl_tf.runtime import config_flags
from ccvl_tf.algorithm import counts as counts_lib
from ccvl_tf.algorithm import losses
from ccvl_tf.algorithm import networks
from ccvl_tf.algorithm import policies
from ccvl_tf.algorithm import readings
from ccvl_tf.runtime.config_flags import setting
from ccvl_tf.algorithm.readings import paper

from ccvl_tf.agents import q_agent_base

@dataclasses.dataclass(frozen=True)
class CCVLConfig(q_agent_base.BaseQConfig):
  """Hyperparameters of CCVL, named after the paper's symbols: N (`num_deltas`), M
  (`num_pairs`), alpha, c (`dr3_coef`), lambda (`count_ridge`), and the reading of the update
  (`reading`: a variant of ccvl_tf/algorithm/readings/, the paper's Algorithm 1 by default);
  each declared here once with its help and bounds (ccvl_tf/runtime/config_flags.py `setting`).
  The shared ones are BaseQConfig's, with DR3 on by default here (dr3_coef 0.03), td_loss
  'squared' being the paper's 1/2 x^2 and seed seeding the delta samples. docs/agent.md
  explains the readings and the count estimate."""
  num_deltas: int = setting(8, "N, confidences delta ~ U(0, 1) sampled per transition.",
                            lower_bound=1, parse_bounds=False)
  num_pairs: int = setting(
      2, "M, pairs (delta_1, delta_2) ~ U(0, delta) per delta; the loss takes max_j L_j.",
      lower_bound=1, upper_bound=1024, parse_bounds=False)
  alpha: float = setting(0.1, "alpha: the weight of the count-weighted CQL regularizer "
                         "(reading 'bonus': the target lowered by alpha sqrt(log(1/delta) "
                         "n(s)^-1)).", lower_bound=0.0, parse_bounds=False)
  dr3_coef: float = config_flags.redeclare(q_agent_base.BaseQConfig, "dr3_coef", 0.03)
  # The paper's neural update, Eq. (cql update) as Algorithm 1 writes it (readings.paper.Paper),
  # the one reading that learned the demo's development data at CQL's settings (with the
  # monotone head, the linear n(s)^-1 normalized over the batch: docs/ladder.md, chosen by a
  # rule committed before the runs). The flags --reading and its options choose another
  # (readings.from_options); the gridworld keeps Eq. (update)'s bonus with exact counts.
  reading: readings.Reading = dataclasses.field(default=paper.Paper())
  # cosine_monotone: chosen by docs/headroom.md's rule (committed first) on development data,
  # within 2 points of the monotone head's score and first in the rule's order.
  delta_head: str = setting(
      "cosine_monotone", "how delta enters Q(s, a, delta): 'cosine' (the IQN cosine embedding), "
      "'monotone' (nonnegative increments over delta from the state features: Q nondecreasing "
      "in delta, Lemma 1), 'cosine_monotone' (those increments from the cosine embedding) or "
      "'quantized' (paper Sec. 5: one member per grid delta, each its own output layers on the "
      "shared torso, ordered in delta as Lemma 1 asks; delta_members of them).",
      enum_values=networks.DELTA_HEADS)
  delta_members: int = setting(
      networks.DEFAULT_DELTA_MEMBERS, "K of delta_head='quantized': its members, one per bin "
      "[k / K, (k + 1) / K) of delta, whose midpoint is the grid delta (k + 0.5) / K; must "
      "equal the policies' grid (num_grid_deltas).", lower_bound=1, upper_bound=1024,
      parse_bounds=False)
  count_ridge: float = setting(
      1e-3, "lambda of the linear n(s)^-1 estimate ('absolute'), or its multiple of the mean "
      "eigenvalue trace(|D| C) / D ('relative').", above=0.0)
  count_ridge_mode: str = setting("relative", "'absolute' or 'relative' (see count_ridge).",
                                  enum_values=counts_lib.RIDGE_MODES)
  count_normalization: str = setting(
      "batch", "'batch' (n(s)^-1 divided by its mean over the training batch), 'mean' (by its "
      "running mean over the batches) or 'none' (as estimated, capped at 1).",
      enum_values=counts_lib.NORMALIZATIONS)
  count_decay: Optional[float] = setting(
      0.999, "None (cumulative mean of phi phi^T) or its EMA decay in (0, 1).")
  count_refresh_period: int = setting(
      100, "Recompute (|D| C + lambda I)^-1 every this many steps.", lower_bound=1)
  count_gram: str = setting(
      "running", "where Phi^T Phi comes from: 'running' (|D| x the running or EMA mean of phi "
      "phi^T over training batches) or 'exact' (summed over the dataset's states at every "
      "refresh; needs count_normalization='none'; docs/exact_gram.md).",
      enum_values=counts_lib.GRAM_SOURCES)
  count_gram_states: int = setting(
      0, "count_gram='exact': 0 sums Phi^T Phi over every dataset state; k > 0 over a fixed "
      "uniform subsample of k of them (drawn once from the run's seed), scaled by |D| / k.",
      lower_bound=0)
  policy_delta: float = setting(0.5, "delta of the greedy fixed-delta policy evaluated "
                                "during training.", above=0.0, below=1.0)
  belief_resample: str = setting(
      "episode", "when the confidence-adaptive policy draws delta from its belief: 'episode' "
      "(at the first step of each episode, held for the episode) or 'step'.",
      enum_values=("episode", "step"))
  jit_compile: bool = setting(False, "XLA-compile the loss-and-gradient computation.")

  def validate(self) -> None:
    losses.validate_num_samples(self.num_deltas, self.num_pairs)  # names them N and M
    config_flags.check(self)
    readings.validate(self.reading)
    if self.delta_head != "quantized" and self.delta_members != networks.DEFAULT_DELTA_MEMBERS:
      raise ValueError(
          f"delta_members takes effect only with delta_head='quantized' (got delta_head="
          f"{self.delta_head!r}, delta_members={self.delta_members!r}): leave it out or set "
          f"delta_head='quantized'")
    if self.count_gram == "exact" and self.count_normalization != "none":
      raise ValueError(
          f"count_gram='exact' rescales n(s)^-1 once by its dataset mean and takes no other "
          f"normalization: set count_normalization='none' (got {self.count_normalization!r})")

  def with_values(self, values: Mapping[str, object], **more):
    """This config with the values given (None: not given); the reading's flags
    (readings.FLAGS: --reading, --objective and the readings' options) make the reading by
    readings.from_options, on top of this config's reading when they name none."""
    given = {k: v for k, v in values.items() if v is not None}
    choice = {k: given.pop(k) for k in list(given) if k in readings.FLAGS}
    if choice and not {"reading", "objective"} & set(choice) and not isinstance(
        self.reading, paper.Paper):
      choice = {"reading": self.reading.NAME, **dataclasses.asdict(self.reading), **choice}
    if choice:
      given["reading"] = readings.from_options(choice)
    return super().with_values(given, **more)

  # Settings added after runs were first recorded: written only when they differ from their
  # default, so that the fingerprint of a run stored before them still matches on resume.
  _RECORDED_WHEN_SET = ("count_gram", "count_gram_states", "delta_members")

  def record(self) -> Dict[str, object]:
    """The config flat, as runs record it (fingerprints, summary.json): its scalar settings
    (those of _RECORDED_WHEN_SET only when not at their default) and the reading's options
    (readings.to_options: 'objective', 'gap', ...)."""
    defaults = {f.name: f.default for f in dataclasses.fields(self)
                if f.name in self._RECORDED_WHEN_SET}
    flat = {k: v for k, v in super().record().items()
            if k not in defaults or v != defaults[k]}
    return {**flat, **readings.to_options(self.reading)}


class CCVLAgent(q_agent_base.GuardedLearner):
  """Confidence-conditioned value learning (lower bound Q(s, a, delta)), Algorithm 1.

  The guarded step, checkpoint, accessors and Trajectory input are
  `ccvl_tf.agents.q_agent_base.GuardedLearner`'s; this class adds the delta-conditioned network, the
  n(s)^-1 estimate (updated after each applied step, `_update_hook`) and Algorithm 1's objective.
  """

  AGENT_NAME = "CCVL"
  # The direction of the monotone delta head: Q_l rises with delta (UpperCCVLAgent: -1).
  DELTA_SIGN = 1.0

  def __init__(self, time_step_spec, action_spec,
               config: CCVLConfig = CCVLConfig(),
               network_config: networks.QNetworkConfig = networks.QNetworkConfig(),
               dataset_size: Optional[float] = None,
               inverse_count_fn: Optional[Callable[[tf.Tensor], tf.Tensor]] = None,
               train_step_counter: Optional[tf.Variable] = None,
               dataset_observations: Optional[Callable[[], Iterable]] = None,
               name: str = "CCVLAgent"):
    """
    Args:
      time_step_spec: TF-Agents TimeStep spec; its observation spec must suit the torso.
      action_spec: scalar bounded integer action spec (A = max - min + 1; actions are indices
        min + a; the batch's 'action' holds the same values).
      config: CCVLConfig (validated: N, M >= 1, alpha >= 0, policy delta in (0, 1), ...).
      network_config: networks.QNetworkConfig.
      dataset_size: |D|, scales the running E[phi phi^T] to Phi^T Phi for the linear n(s)^-1.
        Required unless `inverse_count_fn` is given.
      inverse_count_fn: optional observation [B, ...] -> n(s)^-1 [B] (e.g. the tabular
        counts_lib.ExactInverseCounts(...).inverse_count_one_hot); replaces the linear one.
      train_step_counter: optional int64 scalar variable.
      dataset_observations: count_gram='exact' only (required there): () -> a fresh finite
        iterable of observation batches [B_i, ...] holding the dataset's states (all of them,
        or the fixed subsample of count_gram_states), each state once; `refresh_exact_counts`
        passes them through the online torso at every refresh.
    """
    obs_spec = self._begin_setup(config, time_step_spec, action_spec, name, "CCVLAgent")
    head = dict(delta_head=config.delta_head, delta_sign=self.DELTA_SIGN,
                support_threshold=config.reading.support_threshold,
                delta_members=config.delta_members)
    self._online = networks.build_ccvl_network(
        obs_spec.shape, obs_spec.dtype, self._num_actions, network_config, name="ccvl_online",
        **head)
    self._target = networks.build_ccvl_network(
        obs_spec.shape, obs_spec.dtype, self._num_actions, network_config, name="ccvl_target",
        **head)
    networks.copy_weights(self._online, self._target)

    if inverse_count_fn is None:
      if dataset_size is None or not dataset_size > 0:
        raise ValueError(
            f"dataset_size (|D|, for the linear n(s)^-1 estimate) must be > 0 when no "
            f"inverse_count_fn is given, got {dataset_size!r}")
      if config.count_gram == "exact" and dataset_observations is None:
        raise ValueError("count_gram='exact' sums Phi^T Phi over the dataset's states: pass "
                         "dataset_observations (a callable giving their observation batches)")
      self._counts = counts_lib.LinearInverseCounts(
          self._online.phi_dim, dataset_size, ridge=config.count_ridge,
          decay=config.count_decay, ridge_mode=config.count_ridge_mode,
          normalization=config.count_normalization, gram_source=config.count_gram)
    else:
      self._counts = None
    self._inverse_count_fn = inverse_count_fn
    self._dataset_observations = dataset_observations
    # phi(s) of one observation batch through the online torso, traced once per batch shape.
    self._phi_fn = common.function(lambda obs: self._online.phi_model({"observation": obs}))

    # What the tape calls (`loss_and_grads`): the reading's own `objective`.
    self._reading = self._step_reading()

    policy = policies.FixedDeltaPolicy(time_step_spec, action_spec, self._online.q_model,
                                       delta=config.policy_delta)
    collect_policy = epsilon_greedy_policy.EpsilonGreedyPolicy(
        policy, epsilon=config.collect_epsilon, info_fields_to_inherit_from_greedy=("delta",))
    self._init_learner(time_step_spec, action_spec, policy, collect_policy, train_step_counter,
                       jit_compile=config.jit_compile)

  # ---- accessors (config, online_network, target_network, optimizer: GuardedLearner) ----
  @property
  def q_network(self) -> keras.Model:
    """The contract Q-model {'observation', 'delta'} -> Q [B, K, A] (online weights)."""
    return self._online.q_model

  @property
  def counts(self) -> Optional[counts_lib.LinearInverseCounts]:
    return self._counts

  def _checkpoint_items(self):
    items = super()._checkpoint_items()
    if self._counts is not None:
      items["counts"] = self._counts
    return items

  def q_values(self, observation, delta) -> tf.Tensor:
    """Q(s, ., delta) [B, K, A] at deltas [B, K] (or a float / [K] broadcast to the batch)."""
    delta = losses.validate_delta(delta)
    observation = tf.convert_to_tensor(observation)
    batch = tf.shape(observation)[0]
    if delta.ndim < 2:
      delta = tf.tile(tf.reshape(delta, [1, -1]), [batch, 1])  # [] or [K] -> [B, K]
    return self._online.q_model({"observation": observation, "delta": delta})

  def _inverse_counts(self, observation, phi) -> tf.Tensor:
    if self._inverse_count_fn is not None:
      return tf.stop_gradient(tf.cast(self._inverse_count_fn(observation), tf.float32))
    return self._counts.inverse_count(phi)

  @property
  def penalty_alpha(self) -> float:
    """The alpha of this agent's weight w(s, delta) (alpha; alpha_u for Q_u)."""
    return self._config.alpha

  def regularizer_weight(self, observation, delta: float = 0.5) -> tf.Tensor:
    """w(s, delta) = alpha sqrt(log(1/delta) n(s)^-1) at states [B, ...] -> [B], as this
    agent's objective weighs them now: n(s)^-1 from phi(s) of the online network and the
    current counts (normalized as in training; 1 with count_weight='off'; the exact function
    when given), alpha of its objective (alpha_u for Q_u). No gradient, no variable change."""
    delta = float(losses.validate_delta(delta))
    observation = tf.convert_to_tensor(observation)
    if self._counts is None:
      inv = self._inverse_counts(observation, None)                 # [B]
    else:
      inv = self._counts.inverse_count(self._online.phi_model({"observation": observation}))
      if self._config.reading.count_weight == "off":
        inv = tf.ones_like(inv)                                     # [B]
    return tf.stop_gradient(self.penalty_alpha * tf.sqrt(np.log(1.0 / delta) * inv))

  def start_online_counts(self, online_rows: int, samples_per_insert: float) -> bool:
    """Online fine-tuning: n(s)^-1 follows the data from now on (|D| grows with the online
    transitions, C accumulates their features, the normalization is frozen at its offline
    value: counts_lib.LinearInverseCounts.start_online), and the traced train step is rebuilt
    so that its count update takes the online rule. Call it after the offline restore and
    before restoring an online checkpoint (ccvl_tf/experiments/online/penalty.py). Returns
    False (nothing to do) with an exact inverse_count_fn."""
    if self._counts is None:
      return False
    self._counts.start_online(online_rows, samples_per_insert)
    self._train_on_batch_fn = common.function(self._train_batch)
    return True

  @property
  def exact_gram(self) -> bool:
    """Whether n(s)^-1 uses the dataset's exact Phi^T Phi (count_gram='exact')."""
    return self._counts is not None and self._counts.gram_source == "exact"

  def refresh_exact_counts(self) -> Dict[str, float]:
    """count_gram='exact': Phi^T Phi over the dataset's states (`dataset_observations`) through
    the current online torso, no gradient, and the precision from it
    (counts_lib.LinearInverseCounts.refresh_exact; m_0 set at the first call). Eager.
    Returns its {'rows', 'mean_raw', 'first_mean'}."""
    if not self.exact_gram:
      raise ValueError("refresh_exact_counts needs count_gram='exact'")
    phis = (self._phi_fn(tf.convert_to_tensor(obs)) for obs in self._dataset_observations())
    return self._counts.refresh_exact(phis)

  def train_on_batch(self, batch) -> Dict[str, tf.Tensor]:
    """One guarded step (GuardedLearner.train_on_batch); with count_gram='exact', the exact
    refresh runs first whenever the step counter is a multiple of count_refresh_period (step 0
    included: the first update already weighs states by the exact counts)."""
    if self.exact_gram and int(self.train_step_counter.numpy()) % \
        self._config.count_refresh_period == 0:
      self.refresh_exact_counts()
    return super().train_on_batch(batch)

  # ---- the objective -------------------------------------------------------------------------
  def _step_reading(self):
    """What this agent's step minimizes: an object whose `objective(online, target, batch,
    delta, delta_1, delta_2, inverse_count_fn, config, training)` is the step objective
    (readings.options.Reading.objective): the lower bound's reading, config.reading
    (UpperCCVLAgent overrides this only: Eq. upper update's)."""
    return self._config.reading

  def _objective_inputs(self, batch, seed):
    """What the reading's objective takes besides the networks, the batch and the config:
    Algorithm 1's confidences delta ~ U(0, 1) [B, N] (all at the reading's train_delta when
    set), delta_1, delta_2 ~ U(0, delta) [B, N, M] from the stateless `seed`
    (losses.sample_confidences), and inverse_count_fn(observation, phi) -> n(s)^-1 [B] (from
    the linear estimate, normalized; 1 with count_weight='off'; or the exact function given),
    with the dict in which it leaves the raw n(s)^-1 'n_inv' [B] for the count update."""
    cfg = self._config
    b = tf.shape(batch["observation"])[0]
    delta, delta_1, delta_2 = losses.sample_confidences(
        b, cfg.num_deltas, cfg.num_pairs, seed,
        fixed_delta=cfg.reading.train_delta)                     # [B, N], [B, N, M], [B, N, M]
    raw = {}

    def inverse_counts(observation, phi):
      if self._counts is None:
        return self._inverse_counts(observation, phi)
      raw["n_inv"] = self._counts.raw_inverse_count(phi)           # [B], reused by the update
      if cfg.reading.count_weight == "off":
        return tf.ones_like(raw["n_inv"])                          # [B]: no count weighting
      return self._counts.normalize(raw["n_inv"])

    return delta, delta_1, delta_2, inverse_counts, raw

  def _with_diagnostics(self, metrics, raw) -> Dict[str, tf.Tensor]:
    """The objective's metrics with the features' (q_agent_base.feature_metrics of phi(s))
    and the raw n(s)^-1 [B] the count update takes ('raw_inverse_count', when counted)."""
    metrics = {**q_agent_base.feature_metrics(metrics["phi"]), **metrics}
    if "n_inv" in raw:
      metrics["raw_inverse_count"] = raw["n_inv"]
    return metrics

  def loss_and_grads(self, batch, seed):
    """The tape around the reading's objective (readings/paper.py `objective`, Eq. (cql
    update) and Algorithm 1 line 6, by default) at this step's confidences: (its metrics,
    gradients w.r.t. the online network's trainable variables); no variable changes."""
    delta, delta_1, delta_2, inverse_counts, raw = self._objective_inputs(batch, seed)
    with tf.GradientTape() as tape:
      metrics = self._reading.objective(self._online, self._target, batch, delta, delta_1,
                                        delta_2, inverse_counts, self._config, training=True)
      metrics = self._with_diagnostics(metrics, raw)
      loss = self.scaled_loss(metrics["loss"])
    grads = tape.gradient(loss, self._online.trainable_variables)
    return metrics, grads

  def _objective(self, batch, seed, training: bool) -> Dict[str, tf.Tensor]:
    """The metrics of `loss_and_grads` without the tape (TFAgent's `_loss`)."""
    delta, delta_1, delta_2, inverse_counts, raw = self._objective_inputs(batch, seed)
    metrics = self._reading.objective(self._online, self._target, batch, delta, delta_1,
                                      delta_2, inverse_counts, self._config, training=training)
    return self._with_diagnostics(metrics, raw)

  def _update_hook(self, metrics):
    """phi(s) [B, D] (and its raw n(s)^-1 [B]) leave the metrics; after an applied step they
    update the counts."""
    phi = metrics.pop("phi")
    raw = metrics.pop("raw_inverse_count", None)
    return lambda: self.update_counts(phi, raw)

  def update_counts(self, phi, raw_inverse_count=None) -> None:
    """After an applied update: phi(s) [B, D] into the running E[phi phi^T] (and the raw
    n(s)^-1 [B] the objective computed, if given, into its running mean); the inverse is
    refreshed right after the first update (step 0), then every count_refresh_period steps.
    (A no-op with an exact inverse_count_fn.)"""
    if self._counts is None:
      return
    cfg = self._config
    self._counts.update(phi, raw_inverse_count)
    if self.exact_gram:
      return        # refreshed from the dataset before the step (train_on_batch)
    if cfg.count_refresh_period == 1:
      self._counts.refresh()
    else:
      def refresh():
        self._counts.refresh()
        return tf.constant(True)
      tf.cond(tf.equal(self.train_step_counter % cfg.count_refresh_period, 0), refresh,
              lambda: tf.constant(False))


# ---- Fixed-CCVL: choose one delta by held-out Bellman error ------------------------------------
def bellman_errors_on_grid(q_model, batches: Iterable[Dict], deltas: Sequence[float],
                           gamma: float, action_minimum: int = 0,
                           target_q_model=None) -> np.ndarray:
  """Mean squared Bellman error of Q(., ., delta) on held-out transitions for each grid delta.

  e(delta) = mean over transitions of (Q(s,a,delta) - r - gamma (1-terminal) max_a' Q'(s',a',delta))^2
  with Q' = Q, the same network on both sides (Bellman consistency, as the belief of Eq.
  delta_selection; ccvl_tf.algorithm.belief.bellman_sq_errors), or Q' = `target_q_model`
  (the target network: the TD error offline training minimizes, at delta_2 = delta).

  Args:
    q_model: contract Q-model.
    batches: iterable of contract transition dicts (e.g. a finite tf.data.Dataset).
    deltas: the grid, each in (0, 1).
    gamma: discount.
    action_minimum: subtracted from the batch actions to get indices.
    target_q_model: None (Q' = q_model) or the contract Q-model of the bootstrap.

  Returns:
    float64 [K] mean errors.
  """
  errors = bellman_errors_both(q_model, batches, deltas, gamma, action_minimum, target_q_model)
  return errors["consistency"] if target_q_model is None else errors["target"]


def bellman_errors_both(q_model, batches: Iterable[Dict], deltas: Sequence[float],
                        gamma: float, action_minimum: int = 0,
                        target_q_model=None, with_count: bool = False) -> Dict[str, np.ndarray]:
  """bellman_errors_on_grid's errors in one pass over `batches`: {'consistency': [K]} (Q' = Q)
  and, with `target_q_model`, 'target': [K] (Q' = the target network), each float64; with
  `with_count`, also 'count': the number of transitions each is the mean over. Q(s) and
  Q(s') of the online network come from one forward pass over [s; s'], the target network's
  Q'(s') from one more."""
  grid = losses.validate_delta(np.asarray(deltas, np.float32).reshape(-1), "deltas")
  k = grid.shape[0]
  totals = {"consistency": np.zeros([k], np.float64)}
  if target_q_model is not None:
    totals["target"] = np.zeros([k], np.float64)
  count = 0
  for batch in batches:
    obs = tf.convert_to_tensor(batch["observation"])
    b = int(obs.shape[0])
    d = tf.tile(tf.constant(grid)[None], [b, 1])                  # [K] -> [B, K]
    next_obs = tf.convert_to_tensor(batch["next_observation"])
    both = tf.concat([obs, next_obs], 0)                          # [2B, ...]
    q_both = q_model({"observation": both, "delta": tf.concat([d, d], 0)})  # [2B, K, A]
    q, next_q = q_both[:b], q_both[b:]                            # [B, K, A] each
    actions = tf.cast(batch["action"], tf.int32) - action_minimum  # [B]
    q_sa = tf.gather(q, actions, axis=2, batch_dims=1)            # [B, K]
    reward = tf.cast(batch["reward"], tf.float32)                 # [B]
    discount = gamma * (1.0 - tf.cast(batch["terminal"], tf.float32))  # [B]
    bootstraps = {"consistency": next_q}
    if target_q_model is not None:
      bootstraps["target"] = target_q_model({"observation": next_obs, "delta": d})  # [B, K, A]
    for name, boot in bootstraps.items():
      err = belief.bellman_sq_errors(q_sa, reward, discount, tf.reduce_max(boot, -1))  # [B, K]
      totals[name] += tf.reduce_sum(err, 0).numpy()
    count += b
  if count == 0:
    raise ValueError("bellman_errors_on_grid got no held-out transitions")
  out = {name: total / count for name, total in totals.items()}
  if with_count:
    out["count"] = count
  return out


def select_fixed_delta(q_model, batches: Iterable[Dict], deltas: Sequence[float],
                       gamma: float, action_minimum: int = 0,
                       target_q_model=None) -> Tuple[float, np.ndarray]:
  """Fixed-CCVL: the grid delta with the lowest mean held-out Bellman error
  (bellman_errors_on_grid; with `target_q_model` the TD error of offline training).

  Returns:
    (delta, errors [K]); ties go to the first grid entry.
  """
  errors = bellman_errors_on_grid(q_model, batches, deltas, gamma, action_minimum,
                                  target_q_model)
  grid = np.asarray(deltas, np.float32).reshape(-1)
  return float(grid[int(np.argmin(errors))]), errors
