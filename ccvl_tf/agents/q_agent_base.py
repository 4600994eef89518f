"""Shared plumbing of every offline agent here.

More in docs/agent.md "Module notes", `ccvl_tf/agents/q_agent_base.py`.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Mapping, Optional

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import numpy as np
import tensorflow as tf
from tf_agents.agents import tf_agent
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import trajectory as trajectory_lib
from tf_agents.utils import common

from ccvl_tf.runtime import config_flags
from ccvl_tf.algorithm import fused_adam
from ccvl_tf.algorithm import losses
from ccvl_tf.algorithm import networks
from ccvl_tf.algorithm import policies
from ccvl_tf.algorithm import q_ensemble
from ccvl_tf.runtime.config_flags import setting

BATCH_KEYS = ("observation", "action", "reward", "next_observation", "terminal")


class NonFiniteLossError(FloatingPointError):
  """The loss or a gradient was NaN/inf at train step `step`; the update was NOT applied."""

  def __init__(self, agent: str, step: int, loss: float):
    self.step = int(step)
    self.loss = float(loss)
    super().__init__(
        f"non-finite {agent} loss ({self.loss}) or gradient at train step {self.step}; the "
        f"update was not applied and training should stop (keep the last good checkpoint)")


@dataclasses.dataclass(frozen=True)
class CommonQConfig:
  """Hyperparameters every agent of ccvl_tf/agents/ has (Dopamine offline defaults), each declared
  here once with its help and bounds (ccvl_tf/runtime/config_flags.py `setting`) and inherited
  (DQNConfig; through BaseQConfig, CQL / REM / AEVL / CCVL): gamma, Adam's step size and
  epsilon, the target period, the collect policy's epsilon and the seed."""
  gamma: float = setting(0.99, "gamma, the discount.", lower_bound=0.0, upper_bound=1.0)
  learning_rate: float = setting(
      5e-5, "Adam step size (paper: 5e-5 as Dopamine's offline agents).", above=0.0,
      lower_bound=1e-12)
  adam_epsilon: float = setting(3.125e-4, "Adam epsilon (paper: Dopamine's 3.125e-4).",
                                lower_bound=1e-16)
  target_update_period: int = setting(
      2000, "Steps between target-network copies (paper: 2000).", lower_bound=1)
  collect_epsilon: float = setting(0.01, "epsilon of the collect policy.", lower_bound=0.0,
                                   upper_bound=1.0)
  seed: int = setting(0, "Seed of the stateless per-step randomness (combined with the train "
                      "step).")

  def validate(self) -> None:
    validate_shared_settings(self)

  def record(self) -> Dict[str, object]:
    """The config flat, as runs record it (fingerprints, summary.json): every scalar setting."""
    return {k: v for k, v in dataclasses.asdict(self).items()
            if isinstance(v, (bool, int, float, str, type(None)))}

  def with_values(self, values: Mapping[str, object], **more):
    """This config with the values given in `values` (None: not given, the default stays)
    and `more` on top, by dataclasses.replace: how a run's settings become an agent's
    config (ccvl_tf/experiments/agent_registry.py AgentSpec.resolve)."""
    given = {k: v for k, v in values.items() if v is not None}
    return dataclasses.replace(self, **dict(given, **more))


@dataclasses.dataclass(frozen=True)
class BaseQConfig(CommonQConfig):
  """Hyperparameters shared by the baselines and CCVL: CommonQConfig's and the TD loss / DR3
  settings (Dopamine offline / DR3 setup defaults)."""
  td_loss: str = setting("huber", "TD loss: huber (Dopamine / DR3) or squared.",
                         enum_values=losses.TD_LOSS_TYPES)
  huber_kappa: float = setting(1.0, "Huber threshold.", above=0.0)
  dr3_coef: float = setting(
      0.0, "c, weight of the DR3 feature penalty mean |phi(s).phi(s')| (0 disables it; "
      "paper: 0.03).", lower_bound=0.0)


def validate_shared_settings(cfg) -> None:
  """ValueError naming the field outside its declared bounds or choices (config_flags.check):
  gamma, learning_rate, adam_epsilon, target_update_period, collect_epsilon and (where the
  config has them) td_loss, huber_kappa, dr3_coef."""
  config_flags.check(cfg)


def tf_variables(variables):
  """Keras 3 variables -> the underlying tf.Variables (what tf.Module / Checkpoint track)."""
  return [v.value if isinstance(v, keras.Variable) else v for v in variables]


def all_finite(loss: tf.Tensor, grads) -> tf.Tensor:
  """True iff the loss and every (non-None) gradient are finite (a bool scalar)."""
  finite = tf.math.is_finite(loss)
  for g in grads:
    if g is not None:
      finite = tf.logical_and(finite, tf.reduce_all(tf.math.is_finite(g)))
  return finite


def guarded_update(metrics: Dict[str, tf.Tensor], grads, variables, optimizer,
                   step: tf.Variable, online_vars, target_vars, target_update_period: int,
                   before_step: Optional[Callable[[], None]] = None) -> Dict[str, tf.Tensor]:
  """The guarded update every agent shares (inside a tf.function; in cross-replica context
  under a tf.distribute strategy).

  Only when `metrics['loss']` and every gradient are finite: Adam applies `grads` to
  `variables`, `before_step()` runs (CCVL: the n(s)^-1 statistics), `step` += 1, and the
  target variables are copied from the online ones when the new step is a multiple of
  `target_update_period`. Otherwise nothing changes.

  With a keras.optimizers.LossScaleOptimizer (float16 mixed precision) `grads` are the
  gradients of the scaled loss: only the loss is guarded here; the optimizer unscales them and
  skips Adam on a step whose gradients overflow (halving its loss scale), a step that still
  counts.

  Returns `metrics` with 'finite' (bool) and 'step' (the 0-based step the metrics belong to,
  i.e. the counter before this call) added.
  """
  if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
    finite = tf.math.is_finite(metrics["loss"])
  else:
    finite = all_finite(metrics["loss"], grads)

  def apply():
    fused_adam.apply(optimizer, grads, variables)  # = apply_gradients, one kernel per variable
    if before_step is not None:
      before_step()
    new_step = step.assign_add(1)

    def update_target():
      for s, t in zip(online_vars, target_vars):
        t.assign(s)
      return tf.constant(True)

    tf.cond(tf.equal(new_step % target_update_period, 0), update_target,
            lambda: tf.constant(False))
    return tf.constant(True)

  tf.cond(finite, apply, lambda: tf.constant(False))
  metrics["finite"] = finite
  metrics["step"] = tf.identity(step) - tf.cast(finite, tf.int64)
  return metrics


def feature_metrics(phi: tf.Tensor) -> Dict[str, tf.Tensor]:
  """How alive the features phi(s) are on a batch (a collapsed representation gives
  Q(s, ., delta) = the head's bias, one greedy action everywhere, and n(s)^-1 = 0).

  Args:
    phi: phi(s) [B, D] or [B, E, D] (ensembles: members folded into the batch axis).

  Returns:
    'phi_dead_fraction': share of the D units that are exactly 0 at every state of the batch
      (dead ReLUs); 'phi_zero_states': share of states whose whole phi is 0; 'phi_sq_norm':
      mean_B |phi(s)|^2. No gradient.
  """
  phi = tf.stop_gradient(tf.cast(phi, tf.float32))
  phi = tf.reshape(phi, [-1, tf.shape(phi)[-1]])                      # [B(*E), D]
  nonzero = tf.not_equal(phi, 0.0)                                     # [B, D]
  unit_alive = tf.reduce_any(nonzero, axis=0)                         # [D]
  state_alive = tf.reduce_any(nonzero, axis=1)                        # [B]
  return {"phi_dead_fraction": 1.0 - tf.reduce_mean(tf.cast(unit_alive, tf.float32)),
          "phi_zero_states": 1.0 - tf.reduce_mean(tf.cast(state_alive, tf.float32)),
          "phi_sq_norm": tf.reduce_mean(tf.reduce_sum(tf.square(phi), axis=-1))}


def check_finite(agent_name: str, metrics) -> None:
  """Raises NonFiniteLossError (eager mode) when a guarded step was skipped."""
  if tf.executing_eagerly() and not bool(metrics["finite"]):
    raise NonFiniteLossError(agent_name, int(metrics["step"]), float(metrics["loss"]))


def num_actions_of(action_spec, agent_name: str):
  """(minimum, A) of a scalar bounded integer action spec; ValueError otherwise."""
  if (not tensor_spec.is_bounded(action_spec) or action_spec.shape.rank != 0
      or not action_spec.dtype.is_integer):
    raise ValueError(f"{agent_name} needs a scalar bounded integer action spec, got "
                     f"{action_spec}")
  minimum = int(np.asarray(action_spec.minimum))
  return minimum, int(np.asarray(action_spec.maximum)) - minimum + 1


def as_transition_batch(experience, action_minimum: int = 0) -> Dict[str, tf.Tensor]:
  """A contract batch dict (or a Trajectory [B, 2, ...]) -> dict with action indices 0..A-1."""
  if isinstance(experience, dict):
    missing = [k for k in BATCH_KEYS if k not in experience]
    if missing:
      raise ValueError(f"transition batch is missing keys {missing}; it needs {BATCH_KEYS}")
    batch = {k: tf.convert_to_tensor(experience[k]) for k in BATCH_KEYS}
  elif isinstance(experience, trajectory_lib.Trajectory):
    time_steps, policy_steps, next_time_steps = trajectory_lib.to_transition(experience)
    squeeze = lambda t: tf.nest.map_structure(lambda x: tf.squeeze(x, 1), t)  # noqa: E731
    time_steps, policy_steps, next_time_steps = (
        squeeze(time_steps), squeeze(policy_steps), squeeze(next_time_steps))
    batch = dict(observation=time_steps.observation, action=policy_steps.action,
                 reward=next_time_steps.reward, next_observation=next_time_steps.observation,
                 terminal=tf.cast(tf.equal(next_time_steps.discount, 0.0), tf.float32))
  else:
    raise TypeError(f"experience must be a transition dict or a Trajectory, got "
                    f"{type(experience).__name__}")
  batch["action"] = tf.cast(batch["action"], tf.int32) - action_minimum
  batch["reward"] = tf.cast(batch["reward"], tf.float32)
  batch["terminal"] = tf.cast(batch["terminal"], tf.float32)
  return batch


class GuardedLearner(tf_agent.TFAgent):
  """What every offline agent here shares (CCVLAgent, UpperCCVLAgent, CQL, REM, AEVL).

  A subclass builds `self._config` (with learning_rate, adam_epsilon, target_update_period,
  seed), `self._online` / `self._target` (networks with `trainable_variables` and
  `variables`) and `self._action_min`, implements `_objective(batch, seed, training) ->
  metrics with 'loss'`, and then calls `_init_learner(...)`, which adds the Adam optimizer,
  the checkpointable variable lists, the train step counter, the policies and the guarded step:
  `train_on_batch(batch)` / `train(experience)` apply Adam, `_update_hook`'s callback (CCVL:
  the n(s)^-1 statistics), the counter and the periodic target copy only when the loss and
  every gradient are finite (`guarded_update`), and raise `NonFiniteLossError` otherwise.

  It implements `ccvl_tf.agents.learner.Learner` and `OnlineLearner`. The pieces of the guarded step
  are public for the step under a tf.distribute strategy (experiments/online/distributed.py) and
  the benchmark: `prepare_batch`, `step_seed`, `loss_and_grads`, `apply_update`,
  `step_loss_and_grads`, `update_hook`, `check_finite` and `compiled_train_step`.

  Built under a keras mixed-precision policy (experiments/compute.py `precision_policy`), the
  networks compute in float16 / bfloat16 with float32 variables; under 'mixed_float16' the
  optimizer is Adam inside a keras.optimizers.LossScaleOptimizer (dynamic loss scale:
  `loss_and_grads` differentiates the scaled loss, the optimizer unscales).
  """

  AGENT_NAME = "Q"

  def _begin_setup(self, config, time_step_spec, action_spec, name: str, label: str):
    """Validates `config`, initializes the tf.Module, checks the specs; returns the
    observation spec (the first step of a subclass's `__init__`)."""
    config.validate()
    tf.Module.__init__(self, name=name)
    self._config = config
    obs_spec = time_step_spec.observation
    if not isinstance(obs_spec, tf.TypeSpec):
      raise ValueError(f"{label} needs a single observation spec, got {obs_spec}")
    self._action_min, self._num_actions = num_actions_of(action_spec, label)
    return obs_spec

  def _init_learner(self, time_step_spec, action_spec, policy, collect_policy,
                    train_step_counter: Optional[tf.Variable], jit_compile: bool = False):
    cfg = self._config
    self._optimizer = keras.optimizers.Adam(learning_rate=cfg.learning_rate,
                                            epsilon=cfg.adam_epsilon)
    if keras.mixed_precision.global_policy().name == "mixed_float16":
      self._optimizer = keras.optimizers.LossScaleOptimizer(self._optimizer)
    self._optimizer.build(self._online.trainable_variables)
    # tf.Module / tf.train.Checkpoint see tf.Variables in attributes; Keras 3 ones are wrapped.
    self._online_vars = tf_variables(self._online.variables)
    self._target_vars = tf_variables(self._target.variables)
    self._optimizer_vars = tf_variables(self._optimizer.variables)
    if train_step_counter is None:
      train_step_counter = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")
    self.set_jit_compile(jit_compile)
    tf_agent.TFAgent.__init__(self, time_step_spec, action_spec, policy, collect_policy,
                              train_sequence_length=2, train_step_counter=train_step_counter)
    self._train_on_batch_fn = common.function(self._train_batch)

  def set_jit_compile(self, jit_compile: bool) -> None:
    """XLA-compiles the loss-and-gradient computation of the guarded step (`loss_and_grads`)
    or not; takes effect from the next trace, so call it before the first step."""
    self._jit_compile = bool(jit_compile)
    self._grads_fn = common.function(self.loss_and_grads, jit_compile=self._jit_compile)

  @property
  def jit_compile(self) -> bool:
    return self._jit_compile

  @property
  def step_loss_and_grads(self) -> Callable:
    """`loss_and_grads` as the guarded step runs it: a tf.function, XLA-compiled when
    `jit_compile` (the step under a tf.distribute strategy calls it per replica)."""
    return self._grads_fn

  def scaled_loss(self, loss: tf.Tensor) -> tf.Tensor:
    """What `loss_and_grads` differentiates: the loss, times the dynamic loss scale under a
    LossScaleOptimizer (float16 mixed precision). Call it inside the tape."""
    if isinstance(self._optimizer, keras.optimizers.LossScaleOptimizer):
      return self._optimizer.scale_loss(loss)
    return loss

  # ---- to implement ----------------------------------------------------------------------------
  def _objective(self, batch, seed, training: bool) -> Dict[str, tf.Tensor]:
    raise NotImplementedError

  def _update_hook(self, metrics: Dict[str, tf.Tensor]) -> Optional[Callable[[], None]]:
    """Called with the step's metrics before the guarded update; may pop non-scalar entries
    and return a callback run right after Adam (only on a finite step). Default: none."""
    del metrics
    return None

  # ---- accessors ---------------------------------------------------------------------------------
  @property
  def config(self):
    return self._config

  @property
  def online_network(self):
    return self._online

  @property
  def target_network(self):
    return self._target

  @property
  def optimizer(self):
    return self._optimizer

  @property
  def online_variables(self) -> List[tf.Variable]:
    """Every tf.Variable of the online network (what actors pull, checkpoint item 'online')."""
    return self._online_vars

  @property
  def target_variables(self) -> List[tf.Variable]:
    """Every tf.Variable of the target network (checkpoint item 'target')."""
    return self._target_vars

  def _checkpoint_items(self) -> Dict[str, object]:
    return dict(online=self._online_vars, target=self._target_vars,
                optimizer=self._optimizer_vars, train_step=self.train_step_counter)

  def make_checkpoint(self, **extra) -> tf.train.Checkpoint:
    """A tf.train.Checkpoint of everything a restart needs (networks, Adam state, train step,
    and the subclass's extras such as CCVL's counts)."""
    return tf.train.Checkpoint(**self._checkpoint_items(), **extra)

  def _initialize(self):
    """TFAgent API: target <- online (already done at construction; idempotent)."""
    for s, t in zip(self._online_vars, self._target_vars):
      t.assign(s)

  def prepare_batch(self, experience) -> Dict[str, tf.Tensor]:
    """A contract transition dict (or a Trajectory [B, 2, ...]) -> the batch the step takes
    (tensors; actions as indices 0..A-1)."""
    return as_transition_batch(experience, self._action_min)

  # ---- the online extension (ccvl_tf.agents.learner.OnlineLearner) ------------------------------------
  @property
  def exploration_policy(self):
    """What online actors run: the collect policy (greedy, epsilon-greedy at
    config.collect_epsilon)."""
    return self.collect_policy

  @property
  def bounds_policy(self):
    """None: one bound, no Eq. upper policy (CCVLBoundsAgent has one)."""
    return None

  def policy_variables(self) -> Dict[str, List[tf.Variable]]:
    """What actors pull: {'q': the online network's variables}."""
    return {"q": list(self._online_vars)}

  def set_learning_rate(self, lr: float) -> None:
    """Adam's learning rate (e.g. a smaller one for online fine-tuning)."""
    self._optimizer.learning_rate.assign(lr)

  def restore_offline(self, path: str) -> str:
    """Restores a checkpoint of this agent's layout (`make_checkpoint`) from `path`."""
    self.make_checkpoint().restore(path).assert_existing_objects_matched()
    return f"{self.AGENT_NAME} learner"

  def guarded_learners(self) -> Dict[str, "GuardedLearner"]:
    """{'': self}: the one guarded learner stepped on each batch (metrics unprefixed)."""
    return {"": self}

  # ---- the guarded step ---------------------------------------------------------------------------
  def step_seed(self) -> tf.Tensor:
    """The stateless seed of this step's randomness: (config.seed, train step) [2] int64."""
    return tf.stack([tf.constant(self._config.seed, tf.int64),
                     tf.cast(self.train_step_counter, tf.int64)])

  def loss_and_grads(self, batch, seed):
    """The tape around `_objective` on a prepared batch: (its metrics, gradients w.r.t. the
    online network's trainable variables, of the scaled loss under float16: `scaled_loss`);
    no variable changes. (CCVLAgent's calls its reading's objective here instead.)"""
    with tf.GradientTape() as tape:
      metrics = self._objective(batch, seed, training=True)
      loss = self.scaled_loss(metrics["loss"])
    grads = tape.gradient(loss, self._online.trainable_variables)
    return metrics, grads

  def update_hook(self, metrics: Dict[str, tf.Tensor]) -> Optional[Callable[[], None]]:
    """The callback the guarded update runs right after Adam (CCVL: the n(s)^-1 statistics
    from phi(s)); pops the metrics' non-scalar entries it takes (`_update_hook`)."""
    return self._update_hook(metrics)

  def apply_update(self, metrics: Dict[str, tf.Tensor], grads,
                   after_adam: Optional[Callable[[], None]] = None) -> Dict[str, tf.Tensor]:
    """`guarded_update` on this agent's variables: Adam, `after_adam()`, step counter and the
    periodic target copy, only when the loss and every gradient are finite."""
    return guarded_update(metrics, grads, self._online.trainable_variables, self._optimizer,
                          self.train_step_counter, self._online_vars, self._target_vars,
                          self._config.target_update_period, before_step=after_adam)

  @property
  def compiled_train_step(self) -> Callable[[Dict[str, tf.Tensor]], Dict[str, tf.Tensor]]:
    """The tf.function of one guarded step on a `prepare_batch` batch; returns the metrics
    with 'finite' and 'step' (does not raise: see `check_finite`)."""
    return self._train_on_batch_fn

  def check_finite(self, metrics) -> None:
    """Raises NonFiniteLossError (eager mode) when the step of `metrics` was skipped."""
    check_finite(self.AGENT_NAME, metrics)

  def _loss(self, experience, weights=None, training=False):
    """TFAgent API: LossInfo(loss, extra=metrics) without changing any variable."""
    del weights  # uniform transition weights (offline sampling is uniform)
    metrics = dict(self._objective(self.prepare_batch(experience), self.step_seed(),
                                   training=training))
    self._update_hook(metrics)  # drops non-scalar entries; its callback is not run
    return tf_agent.LossInfo(loss=metrics["loss"], extra=metrics)

  def _train(self, experience, weights=None):
    """TFAgent API (wrapped in tf.function by TFAgent), as DqnAgent's `_train`: the loss
    under the tape (`loss_and_grads`, the agent's objective; XLA-compiled with jit_compile),
    then the guarded update (`apply_update`)."""
    del weights
    batch = self.prepare_batch(experience)
    metrics, grads = self._grads_fn(batch, self.step_seed())
    metrics = dict(metrics)
    metrics = self.apply_update(metrics, grads, after_adam=self._update_hook(metrics))
    return tf_agent.LossInfo(loss=metrics["loss"], extra=metrics)

  def _train_batch(self, batch) -> Dict[str, tf.Tensor]:
    """`_train`'s step on a prepared batch (inside tf.function): its metrics."""
    metrics, grads = self._grads_fn(batch, self.step_seed())
    metrics = dict(metrics)
    return self.apply_update(metrics, grads, after_adam=self._update_hook(metrics))

  # ---- public entry points ---------------------------------------------------------------------
  def train_on_batch(self, batch) -> Dict[str, tf.Tensor]:
    """Trains on one contract transition batch; returns the metrics dict.

    Raises:
      NonFiniteLossError: NaN/inf loss or gradient; no variable was changed (eager mode).
    """
    metrics = self._train_on_batch_fn(self.prepare_batch(batch))
    self.check_finite(metrics)
    return metrics

  def train(self, experience, weights=None, **kwargs):
    """TFAgent.train on a Trajectory [B, 2, ...] or a contract dict; raises on NaN/inf."""
    loss_info = super().train(experience, weights=weights, **kwargs)
    self.check_finite(loss_info.extra)
    return loss_info


class OfflineQAgent(GuardedLearner):
  """Base of BCAgent, CQLAgent, REMAgent, AEVLAgent (see the module notes).

  A subclass names its config class (`CONFIG`) and implements `_objective`; the constructor
  builds one network of `_num_heads(config)` heads and the greedy policy on its contract view
  (`_make_policy`). AEVL, an ensemble with its own policy, overrides both and calls `_setup`.
  """

  AGENT_NAME = "Q"
  CONFIG: type = None  # the agent's config dataclass; its defaults when no config is given

  def __init__(self, time_step_spec, action_spec, config: Optional["BaseQConfig"] = None,
               network_config: networks.QNetworkConfig = networks.QNetworkConfig(),
               train_step_counter: Optional[tf.Variable] = None, name: Optional[str] = None):
    """config: an instance of CONFIG (None: its defaults); name: the variables' prefix
    (default '<AGENT_NAME>Agent', e.g. 'CQLAgent')."""
    config = self.CONFIG() if config is None else config
    self._setup(time_step_spec, action_spec, config, network_config, num_members=1,
                num_heads=self._num_heads(config), contract_mode="mean",
                train_step_counter=train_step_counter,
                name=f"{self.AGENT_NAME}Agent" if name is None else name)

  def _num_heads(self, config) -> int:
    """Heads of the one network (REM: config.num_heads)."""
    del config
    return 1

  def _setup(self, time_step_spec, action_spec, config: BaseQConfig,
             network_config: networks.QNetworkConfig, num_members: int, num_heads: int,
             contract_mode: str, train_step_counter: Optional[tf.Variable], name: str):
    obs_spec = self._begin_setup(config, time_step_spec, action_spec, name, self.AGENT_NAME)
    prefix = name.lower()
    self._online = q_ensemble.build_q_ensemble(
        obs_spec.shape, obs_spec.dtype, self._num_actions, network_config,
        num_members=num_members, num_heads=num_heads, name=f"{prefix}_online")
    self._target = q_ensemble.build_q_ensemble(
        obs_spec.shape, obs_spec.dtype, self._num_actions, network_config,
        num_members=num_members, num_heads=num_heads, name=f"{prefix}_target")
    q_ensemble.copy_ensemble_weights(self._online, self._target)
    self._contract = q_ensemble.contract_q_model(self._online, contract_mode,
                                               name=f"{prefix}_contract")
    policy = self._make_policy(time_step_spec, action_spec)
    self._init_learner(time_step_spec, action_spec, policy,
                       policies.epsilon_greedy(policy, config.collect_epsilon),
                       train_step_counter)

  def _make_policy(self, time_step_spec, action_spec):
    """Greedy in the contract view's Q (the mean of REM's heads, BC's logits); the contract
    model ignores delta (0.5 is only what PolicyInfo shows)."""
    return policies.FixedDeltaPolicy(time_step_spec, action_spec, self._contract, delta=0.5)

  # ---- accessors ---------------------------------------------------------------------------------
  @property
  def q_network(self) -> keras.Model:
    """Contract view {'observation', 'delta'} -> Q [B, K, A] of the online network."""
    return self._contract

  def evaluation_policy(self, **unused):
    """The policy to evaluate / export (greedy; AEVL: adaptive over members)."""
    return self.policy

  # ---- shared pieces of the objectives ----------------------------------------------------------
  def _forward(self, batch, training: bool):
    """Online Q(s) [B, E, H, A], phi(s) [B, E, D], target Q(s') [B, E, H, A] (no grad) and,
    with DR3 on, phi(s') [B, E, D] with gradients (else None).

    With DR3 the online network runs once over the 2B frames [s; s'] (one torso pass; the
    Dense(H*A) head on s' is the only extra work); its Q(s') is not used.
    """
    obs = batch["observation"]
    if self._config.dr3_coef > 0:
      b = tf.shape(obs)[0]
      both = tf.concat([obs, batch["next_observation"]], 0)                 # [2B, ...]
      out = self._online.q_and_phi_model({"observation": both}, training=training)
      q, phi, next_phi = out["q"][:b], out["phi"][:b], out["phi"][b:]
    else:
      out = self._online.q_and_phi_model({"observation": obs}, training=training)
      q, phi, next_phi = out["q"], out["phi"], None
    next_q = tf.stop_gradient(self._target.q_model({"observation": batch["next_observation"]}))
    return q, phi, next_q, next_phi

  def _dr3(self, phi, next_phi):
    """DR3 over members: mean over B and E of |phi_e(s) . phi_e(s')| (0 when DR3 is off)."""
    if next_phi is None:
      return tf.zeros([])
    d = tf.shape(phi)[-1]
    return losses.dr3_penalty(tf.reshape(phi, [-1, d]), tf.reshape(next_phi, [-1, d]))
