"""Confidence-conditioned Q-networks Q(s, a, delta) in Keras 3 (paper Sec. "Practical Algorithm").

More in docs/agent.md "Module notes", `ccvl_tf/algorithm/networks.py`.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence, Tuple

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import numpy as np
from keras import ops

from ccvl_tf.algorithm.delta_heads import (  # noqa: F401  (part of this module's API)
    DEFAULT_DELTA_MEMBERS, KnotDeltas, MonotoneDeltaHead, QuantizedDeltaHead, check_grid,
    check_model_grid, member_index, quantized_members)
from ccvl_tf.algorithm.support import SupportMask, validate_threshold

NATURE_OBSERVATION_SHAPE = (84, 84, 4)
# The smallest frame the three Nature convolutions (8/4, 4/2, 3/1, 'valid') accept.
_NATURE_MIN_SIDE = 36
# 'minatar': MinAtar's conv 16-3/1 + dense torso for [10, 10, C] {0, 1} grids (added for the
# MinAtar suite of binaries/compare.py).
TORSOS = ("nature", "mlp", "minatar")


def _dopamine_initializer():
  """Dopamine's Atari initializer: variance scaling, scale 1/sqrt(3), fan_in, uniform."""
  return keras.initializers.VarianceScaling(
      scale=1.0 / math.sqrt(3.0), mode="fan_in", distribution="uniform")


@keras.saving.register_keras_serializable(package="ccvl_tf")
class CosineEmbedding(keras.layers.Layer):
  """e_i(delta) = cos(pi * i * delta) for i = 1..n_cos: [B, K] -> [B, K, n_cos] (no weights)."""

  def __init__(self, n_cos: int = 64, **kwargs):
    super().__init__(**kwargs)
    if int(n_cos) != n_cos or n_cos < 1:
      raise ValueError(f"n_cos must be an integer >= 1, got {n_cos!r}")
    self.n_cos = int(n_cos)

  def call(self, delta):
    delta = ops.cast(delta, "float32")
    # i = 1..n_cos, shape [n_cos]; pi * i as a constant.
    pi_i = ops.convert_to_tensor(
        np.pi * np.arange(1, self.n_cos + 1, dtype=np.float32))
    # [B, K, 1] * [n_cos] -> [B, K, n_cos]
    return ops.cos(ops.expand_dims(delta, -1) * pi_i)

  def compute_output_shape(self, input_shape):
    return tuple(input_shape) + (self.n_cos,)

  def get_config(self):
    return {**super().get_config(), "n_cos": self.n_cos}


@keras.saving.register_keras_serializable(package="ccvl_tf")
class ReferenceDelta(keras.layers.Layer):
  """A [B, 1] tensor filled with the constant `value`, batch size taken from the input."""

  def __init__(self, value: float = 0.5, **kwargs):
    super().__init__(**kwargs)
    self.value = float(value)

  def call(self, features):
    # features [B, ...] -> [B, 1] of `value`.
    return ops.ones_like(features[:, :1], dtype="float32") * self.value

  def compute_output_shape(self, input_shape):
    return (input_shape[0], 1)

  def get_config(self):
    return {**super().get_config(), "value": self.value}


@keras.saving.register_keras_serializable(package="ccvl_tf")
class FlatDense(keras.layers.Dense):
  """keras.layers.Dense that folds the leading axes into one before the matmul:
  [B, K, W] -> [B*K, W] -> [B*K, U] -> [B, K, U].

  The same function as Dense. On a rank-3 input Dense broadcasts its kernel in a batched
  matmul, whose kernel gradient is B batched matmuls plus a sum over B; folded, it is one
  [W, B*K] x [B*K, U] matmul (measured: the CCVL head's backward pass was ~15% of its step).
  """

  def call(self, inputs, training=None):
    shape = ops.shape(inputs)                                   # (B, K, W), B and K dynamic
    flat = ops.reshape(inputs, (-1, shape[-1]))                 # [B*K, W]
    out = super().call(flat, training=training)                 # [B*K, U]
    return ops.reshape(out, tuple(shape[:-1]) + (self.units,))  # [B, K, U]


@dataclasses.dataclass(frozen=True)
class QNetworkConfig:
  """Architecture of the confidence-conditioned Q-network.

  Attributes:
    torso: 'nature' (uint8 [84, 84, 4] frames, conv 32-8/4, 64-4/2, 64-3/1, dense 512, inputs
      scaled by 1/255), 'mlp' (rank-1 float vectors, e.g. one-hot gridworld states) or
      'minatar' ([10, 10, C] {0, 1} grids: conv 16-3/1, dense `torso_units`; MinAtar uses 128).
    mlp_units: widths of the MLP torso's ReLU layers (mlp only).
    torso_units: width of the Nature torso's dense layer (512 in the Nature DQN).
    n_cos: number of cosine features of delta (64 in IQN).
    hidden_units: width of a hidden ReLU layer of the head after the delta product
      (delta_entry='features' only; 0, the default = no hidden layer, Q = W_out (psi * eta) +
      b: the DQN network's depth, one linear layer on the torso, as CQL's). With a hidden
      layer the gradient reaching the torso is ~5x smaller at initialization (Dopamine's
      initializer), most of it below Adam's epsilon 3.125e-4, and at CQL's learning rate the
      network ends with one greedy action at every state (docs/ladder.md).
    delta_entry: 'features' (after the torso's last layer; default) or 'conv' (IQN placement,
      on the 3136-wide flattened conv features; Nature torso only).
    phi_delta: reference confidence at which phi(s) is read when delta_entry='conv'.
  """
  torso: str = "nature"
  mlp_units: Tuple[int, ...] = (256, 256)
  torso_units: int = 512
  n_cos: int = 64
  hidden_units: int = 0
  delta_entry: str = "features"
  phi_delta: float = 0.5

  def validate(self) -> None:
    if self.torso not in TORSOS:
      raise ValueError(f"torso must be one of {', '.join(TORSOS)}, got {self.torso!r}")
    if self.delta_entry not in ("features", "conv"):
      raise ValueError(
          f"delta_entry must be 'features' or 'conv', got {self.delta_entry!r}")
    if self.delta_entry == "conv" and self.torso != "nature":
      raise ValueError(
          f"delta_entry='conv' needs the Nature conv torso, got torso={self.torso!r}")
    if not 0.0 < self.phi_delta < 1.0:
      raise ValueError(f"phi_delta must be in (0, 1), got {self.phi_delta!r}")
    for name in ("n_cos", "hidden_units", "torso_units"):
      value = getattr(self, name)
      minimum = 0 if name == "hidden_units" else 1  # conv: the 3136 -> 512 layer is the hidden one
      if int(value) != value or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if self.torso == "mlp" and (not self.mlp_units or
                                any(int(u) != u or u < 1 for u in self.mlp_units)):
      raise ValueError(f"mlp_units must be positive integers, got {self.mlp_units!r}")


@dataclasses.dataclass
class CCVLNetwork:
  """The three functional models over one set of layers (see the module notes)."""
  q_model: keras.Model
  phi_model: keras.Model
  q_and_phi_model: keras.Model
  config: QNetworkConfig
  observation_shape: Tuple[int, ...]
  observation_dtype: str
  num_actions: int
  phi_dim: int
  # The network split at the torso (None for hand-built test networks: then learners fall back
  # to separate passes over s and s').
  torso_model: Optional[keras.Model] = None
  head_model: Optional[keras.Model] = None
  # The head's phi without delta (delta_entry='conv': the hidden layer at phi_delta); None when
  # phi is the torso output itself (delta_entry='features').
  features_phi_model: Optional[keras.Model] = None
  # tau of the data-support mask (ccvl_tf/algorithm/support.py); 0: no support head. With it,
  # q_and_phi_model and head_model also output 'q_raw' (before the mask) and 'support_logits'.
  support_threshold: float = 0.0

  @property
  def trainable_variables(self):
    return self.q_and_phi_model.trainable_variables

  @property
  def variables(self):
    return self.q_and_phi_model.variables

  def phi_of_features(self, features, training: bool = False):
    """phi [B, D] from torso features psi [B, W] (the identity for delta_entry='features')."""
    if self.features_phi_model is None:
      return features
    return self.features_phi_model({"features": features}, training=training)


def minatar_network_config() -> QNetworkConfig:
  """The MinAtar network of the comparison and of MinAtar fine-tuning (one definition): conv
  16-3/1, dense 128, 64 cosine features of delta and, as the Atari default, no hidden layer
  after the delta product (MinAtar's DQN depth: one linear layer on the torso)."""
  return QNetworkConfig(torso="minatar", torso_units=128, n_cos=64, hidden_units=0)


def q_phi_and_next_phi(net: CCVLNetwork, observation, next_observation, delta,
                       training: bool = False):
  """Q(s, ., delta) [B, K, A], phi(s) [B, D] and phi(s') [B, D] with one torso pass.

  The torso runs once over the 2B frames [s; s'] (DR3 needs phi(s') with gradients); the head
  (the K-delta part) runs only on s. Equal, up to float reduction order, to
  `q_and_phi_model` on s plus `phi_model` on s' (tests/test_networks.py). Networks without the
  split (`torso_model` None) take those two passes.
  """
  out, next_phi = outputs_and_next_phi(net, observation, next_observation, delta, training)
  return out["q"], out["phi"], next_phi


def outputs_and_next_phi(net: CCVLNetwork, observation, next_observation, delta,
                         training: bool = False):
  """(the head's outputs on s, phi(s') [B, D]) with one torso pass, as `q_phi_and_next_phi`;
  the outputs are q_and_phi_model's dict ('q', 'phi', and with a support head 'q_raw' and
  'support_logits')."""
  if net.torso_model is None or net.head_model is None:
    out = net.q_and_phi_model({"observation": observation, "delta": delta}, training=training)
    next_phi = net.phi_model({"observation": next_observation}, training=training)
    return out, next_phi
  b = ops.shape(observation)[0]
  both = ops.concatenate([observation, next_observation], axis=0)      # [2B, ...]
  features = net.torso_model({"observation": both}, training=training)  # [2B, W]
  out = net.head_model({"features": features[:b], "delta": delta},
                       training=training)                               # q [B, K, A], phi [B, D]
  next_phi = net.phi_of_features(features[b:], training=training)     # [B, D]
  return out, next_phi


def validate_observation_spec(observation_shape: Sequence[int], observation_dtype,
                              torso: str) -> Tuple[Tuple[int, ...], str]:
  """Checks that the torso can take observations of this shape/dtype; returns them normalized.

  Raises:
    ValueError naming the offending shape or dtype.
  """
  try:
    shape = tuple(int(d) for d in observation_shape)
  except (TypeError, ValueError) as e:
    raise ValueError(
        f"observation shape must be a sequence of ints, got {observation_shape!r}") from e
  dtype = np.dtype(getattr(observation_dtype, "as_numpy_dtype", observation_dtype)).name
  if torso == "nature":
    if len(shape) != 3:
      raise ValueError(
          f"the Nature torso takes [H, W, C] frames (e.g. {NATURE_OBSERVATION_SHAPE}), "
          f"got observation shape {shape}")
    if min(shape[0], shape[1]) < _NATURE_MIN_SIDE or shape[2] < 1:
      raise ValueError(
          f"the Nature torso needs frames at least {_NATURE_MIN_SIDE}x{_NATURE_MIN_SIDE} with "
          f">= 1 channel, got observation shape {shape}")
    if dtype != "uint8":
      raise ValueError(
          f"the Nature torso takes uint8 frames (it scales by 1/255), got dtype {dtype}")
  elif torso == "mlp":
    if len(shape) != 1 or shape[0] < 1:
      raise ValueError(
          f"the MLP torso takes rank-1 vectors [D] (e.g. one-hot states), got observation "
          f"shape {shape}")
    if not (np.issubdtype(np.dtype(dtype), np.floating) or
            np.issubdtype(np.dtype(dtype), np.integer)):
      raise ValueError(f"the MLP torso takes numeric vectors, got dtype {dtype}")
  elif torso == "minatar":
    if len(shape) != 3 or min(shape[0], shape[1]) < 3 or shape[2] < 1:
      raise ValueError(
          f"the MinAtar torso takes [H, W, C] grids at least 3x3 (e.g. (10, 10, 4)), got "
          f"observation shape {shape}")
  else:
    raise ValueError(f"torso must be one of {', '.join(TORSOS)}, got {torso!r}")
  return shape, dtype


def _float32(x):
  """`x` as float32 under a mixed-precision policy (float16 / bfloat16 compute, e.g.
  experiments/compute.py `precision_policy`): the models' outputs, which the losses, counts and
  policies take in float32; `x` itself under the default float32 policy."""
  if keras.mixed_precision.global_policy().compute_dtype == "float32":
    return x
  return keras.tree.map_structure(lambda t: ops.cast(t, "float32"), x)


def _torso(observation, config: QNetworkConfig, name: str, init):
  """The state torso psi(s) on a Keras input: (torso output, the Nature dense layer or None).

  With delta_entry='conv' (Nature only) the output is the 3136-wide conv features and the
  returned dense layer is *not* applied (build_ccvl_network uses it as the head's hidden
  layer). Layer names are `{name}_conv1..3`, `{name}_torso_dense`, `{name}_mlp{i}`.
  """
  torso_dense = None
  if config.torso == "nature":
    x = keras.layers.Rescaling(1.0 / 255.0, name=f"{name}_scale")(observation)
    x = keras.layers.Conv2D(32, 8, strides=4, activation="relu", kernel_initializer=init(),
                            name=f"{name}_conv1")(x)
    x = keras.layers.Conv2D(64, 4, strides=2, activation="relu", kernel_initializer=init(),
                            name=f"{name}_conv2")(x)
    x = keras.layers.Conv2D(64, 3, strides=1, activation="relu", kernel_initializer=init(),
                            name=f"{name}_conv3")(x)
    conv_features = keras.layers.Flatten(name=f"{name}_flatten")(x)  # [B, 3136] for 84x84
    # With delta_entry='conv' this layer also runs per delta on [B, K, 3136] (FlatDense).
    dense_cls = FlatDense if config.delta_entry == "conv" else keras.layers.Dense
    torso_dense = dense_cls(config.torso_units, activation="relu", kernel_initializer=init(),
                            name=f"{name}_torso_dense")
    if config.delta_entry == "features":
      torso_out = torso_dense(conv_features)  # [B, 512]
    else:
      torso_out = conv_features  # [B, 3136]; the 512 layer becomes the head's hidden layer
  elif config.torso == "minatar":
    # MinAtar's DQN (Young & Tian 2019): conv 16 3x3 stride 1 ('valid'), dense torso_units
    # (128 in MinAtar). Observations are {0, 1} channels: no rescaling.
    x = ops.cast(observation, "float32")
    x = keras.layers.Conv2D(16, 3, strides=1, activation="relu", kernel_initializer=init(),
                            name=f"{name}_conv1")(x)
    x = keras.layers.Flatten(name=f"{name}_flatten")(x)  # [B, 8 * 8 * 16] for 10x10
    torso_out = keras.layers.Dense(config.torso_units, activation="relu",
                                   kernel_initializer=init(), name=f"{name}_torso_dense")(x)
  else:
    x = ops.cast(observation, "float32")  # one-hot / vector states, any numeric dtype
    for i, units in enumerate(config.mlp_units):
      x = keras.layers.Dense(int(units), activation="relu", kernel_initializer=init(),
                             name=f"{name}_mlp{i}")(x)
    torso_out = x  # [B, mlp_units[-1]]
  return torso_out, torso_dense


# Over 80 lines with its docstring: one functional graph (torso, delta embedding, head) and
# its feature models, built together so that they share layers.
DELTA_HEADS = ("cosine", "monotone", "cosine_monotone", "quantized")
MONOTONE_PIECES = 16  # J of MonotoneDeltaHead: pieces of width 1/16 (the belief grid has 8 bins)


def build_ccvl_network(observation_shape: Sequence[int], observation_dtype, num_actions: int,
                       config: QNetworkConfig = QNetworkConfig(),
                       name: str = "ccvl_q", delta_head: str = "cosine",
                       delta_sign: float = 1.0, support_threshold: float = 0.0,
                       delta_members: int = DEFAULT_DELTA_MEMBERS) -> CCVLNetwork:
  """Builds Q(s, a, delta) and its feature models phi(s) (see the module notes).

  Args:
    observation_shape: per-state observation shape, e.g. (84, 84, 4) or (S,).
    observation_dtype: uint8 for the Nature torso; any numeric dtype for the MLP torso.
    num_actions: A, the number of discrete actions.
    config: QNetworkConfig.
    name: prefix of the model and layer names (use distinct names for online and target).
    delta_head: 'cosine' (IQN: psi(s) * eta(delta), then the hidden layer and the output, per
      delta), 'monotone' (MonotoneDeltaHead on psi(s), through the hidden layer when
      hidden_units > 0: Q monotone in delta for every state and action) or 'cosine_monotone'
      (MonotoneDeltaHead whose base and increments at the J + 1 knots delta_j = j / J are the
      cosine head's outputs at the knots, psi(s) * eta(delta_j) through the hidden layer and
      the output: IQN's embedding, and Q monotone in delta by construction) or 'quantized'
      (paper Sec. 5's ensemble of fixed deltas: K = `delta_members` members on psi(s), member
      k with its own hidden layer when hidden_units > 0 and its own output Dense, named
      `{name}_m{k}_hidden`, `{name}_m{k}_q`; a delta in (0, 1) acts with the member of its
      bin [k / K, (k + 1) / K), so Q is piecewise constant in delta and the grid deltas
      (k + 0.5) / K of belief.delta_grid(K) are the members; QuantizedDeltaHead orders the
      members by construction). The heads but 'cosine' need delta_entry 'features', and phi(s)
      is then the torso output psi(s). One of DELTA_HEADS.
    delta_sign: +1 (Q nondecreasing in delta, the lower bound) or -1 (nonincreasing, the upper
      bound); used by the monotone and quantized heads.
    support_threshold: tau in (0, 1): a behaviour-cloning head on the torso features and
      Q masked outside the data's support (ccvl_tf/algorithm/support.py); 0: neither.
    delta_members: K of the quantized head (CCVLConfig.delta_members; the adaptive policy's
      grid must have K deltas, `check_grid`); unused by the other heads.

  Raises:
    ValueError: a config value, num_actions or the observation spec the torso cannot take.
  """
  config.validate()
  if int(num_actions) != num_actions or num_actions < 1:
    raise ValueError(f"num_actions must be an integer >= 1, got {num_actions!r}")
  if delta_head not in DELTA_HEADS:
    raise ValueError(f"delta_head must be one of {', '.join(DELTA_HEADS)}, got {delta_head!r}")
  if delta_head != "cosine" and config.delta_entry != "features":
    raise ValueError(f"delta_head={delta_head!r} needs delta_entry='features', got "
                     f"{config.delta_entry!r}")
  if delta_head == "quantized" and (isinstance(delta_members, bool)
                                    or int(delta_members) != delta_members or delta_members < 1):
    raise ValueError(f"delta_members must be an integer >= 1 (K, one member per grid delta), "
                     f"got {delta_members!r}")
  if support_threshold:
    validate_threshold(support_threshold)
  num_actions = int(num_actions)
  shape, dtype = validate_observation_spec(observation_shape, observation_dtype, config.torso)
  # A factory, called once per layer: one Keras 3 initializer instance reused across layers
  # gives same-shaped layers identical initial weights.
  init = _dopamine_initializer

  observation = keras.Input(shape=shape, dtype=dtype, name="observation")
  delta = keras.Input(shape=(None,), dtype="float32", name="delta")  # [B, K]

  # ---- torso psi(s): computed once per state --------------------------------------------
  torso_out, torso_dense = _torso(observation, config, name, init)
  width = int(torso_out.shape[-1])

  # ---- confidence embedding eta(delta) and the head --------------------------------------
  cosine = CosineEmbedding(config.n_cos, name=f"{name}_cos")
  embed = FlatDense(width, activation="relu", kernel_initializer=init(),
                    name=f"{name}_delta_embed")
  if config.delta_entry == "conv":
    hidden = torso_dense  # IQN: 3136 -> 512 applied to psi(s) * eta(delta), once per delta
  elif config.hidden_units:
    hidden = FlatDense(config.hidden_units, activation="relu", kernel_initializer=init(),
                       name=f"{name}_hidden")
  else:
    hidden = None  # hidden_units=0: Q = W_out (psi(s) * eta(delta)) + b
  output = FlatDense(num_actions, kernel_initializer=init(), name=f"{name}_q")

  if delta_head == "monotone":
    mono_hidden = (keras.layers.Dense(config.hidden_units, activation="relu",
                                      kernel_initializer=init(), name=f"{name}_hidden")
                   if config.hidden_units else None)
    mono_params = keras.layers.Dense((MONOTONE_PIECES + 1) * num_actions,
                                     kernel_initializer=init(), name=f"{name}_q")
    mono = MonotoneDeltaHead(num_actions, MONOTONE_PIECES, delta_sign, name=f"{name}_monotone")
  elif delta_head == "cosine_monotone":
    knots = KnotDeltas(MONOTONE_PIECES, name=f"{name}_knots")
    mono = MonotoneDeltaHead(num_actions, MONOTONE_PIECES, delta_sign, name=f"{name}_monotone")
  elif delta_head == "quantized":
    # Member k's own layers on psi(s): a fresh initializer each, so the members start apart.
    member_hidden = [keras.layers.Dense(config.hidden_units, activation="relu",
                                        kernel_initializer=init(), name=f"{name}_m{k}_hidden")
                     for k in range(int(delta_members))] if config.hidden_units else None
    member_out = [keras.layers.Dense(num_actions, kernel_initializer=init(),
                                     name=f"{name}_m{k}_q") for k in range(int(delta_members))]
    quantized = QuantizedDeltaHead(num_actions, int(delta_members), delta_sign,
                                   name=f"{name}_quantized")

  def head(features, deltas):
    # features [B, W]; deltas [B, K] -> (Q [B, K, A], penultimate [B, K, H]).
    if delta_head == "monotone":  # delta enters only through the monotone ramps
      hidden_out = features if mono_hidden is None else mono_hidden(features)  # [B, H]
      return mono([mono_params(hidden_out), deltas]), None                     # [B, K, A]
    if delta_head == "cosine_monotone":  # the cosine head at the knots, made monotone
      eta_knots = embed(cosine(knots(features)))         # [B, J+1] -> [B, J+1, W]
      mixed = ops.expand_dims(features, 1) * eta_knots   # [B, 1, W] * [B, J+1, W]
      at_knots = output(mixed if hidden is None else hidden(mixed))  # [B, J+1, A]
      # [B, J+1, A] -> [B, (J+1)*A]: knot 0 the base b(s, a), knots 1..J the increments' x_j.
      params = ops.reshape(at_knots, (-1, (MONOTONE_PIECES + 1) * num_actions))
      return mono([params, deltas]), None                # [B, K, A]
    if delta_head == "quantized":  # delta picks a member; each member its own layers on psi
      raw = [out(features if member_hidden is None else member_hidden[k](features))
             for k, out in enumerate(member_out)]      # K_members x [B, A]
      stacked = ops.stack(raw, axis=1)                   # K_members x [B, A] -> [B, K_members, A]
      return quantized([stacked, deltas]), None          # [B, K, A]
    eta = embed(cosine(deltas))  # [B, K, n_cos] -> [B, K, W]
    # [B, W] -> [B, 1, W], broadcast against [B, K, W]: the torso is shared by the K deltas.
    mixed = ops.expand_dims(features, 1) * eta
    penultimate = mixed if hidden is None else hidden(mixed)  # [B, K, H]
    return output(penultimate), penultimate  # [B, K, A], [B, K, H]

  if support_threshold:
    support_dense = keras.layers.Dense(num_actions, kernel_initializer=init(),
                                       name=f"{name}_support")
    support_mask = SupportMask(support_threshold, name=f"{name}_support_mask")

  def outputs(q_raw, features, phi_value):
    # The q_and_phi dict: Q masked to the data's support when there is a support head.
    if not support_threshold:
      return {"q": q_raw, "phi": phi_value}
    logits = support_dense(features)                                   # [B, A]
    return {"q": support_mask([q_raw, logits]), "phi": phi_value, "q_raw": q_raw,
            "support_logits": logits}

  q, _ = head(torso_out, delta)
  if config.delta_entry == "features":
    phi = torso_out  # [B, D=W]
  else:
    ref = ReferenceDelta(config.phi_delta, name=f"{name}_phi_delta")(torso_out)  # [B, 1]
    _, pen_ref = head(torso_out, ref)  # [B, 1, H]
    phi = ops.squeeze(pen_ref, 1)  # [B, 1, H] -> [B, H]

  main, phi = _float32(outputs(q, torso_out, phi)), _float32(phi)
  q_and_phi_model = keras.Model({"observation": observation, "delta": delta},
                                main, name=f"{name}_q_and_phi")
  q_model = keras.Model({"observation": observation, "delta": delta}, main["q"], name=name)
  phi_model = keras.Model({"observation": observation}, phi, name=f"{name}_phi")

  # ---- the same layers split at the torso (one torso pass over [s; s'] in the learners) ----
  torso_model = keras.Model({"observation": observation}, _float32(torso_out),
                            name=f"{name}_torso")
  features = keras.Input(shape=(width,), dtype="float32", name="features")  # psi [B, W]
  head_q, _ = head(features, delta)
  if config.delta_entry == "features":
    head_phi, features_phi_model = features, None
  else:
    ref_f = ReferenceDelta(config.phi_delta, name=f"{name}_phi_delta_f")(features)  # [B, 1]
    _, pen_f = head(features, ref_f)                                  # [B, 1, H]
    head_phi = ops.squeeze(pen_f, 1)                                  # [B, H]
    features_phi_model = keras.Model({"features": features}, _float32(head_phi),
                                     name=f"{name}_features_phi")
  head_model = keras.Model({"features": features, "delta": delta},
                           _float32(outputs(head_q, features, head_phi)), name=f"{name}_head")
  return CCVLNetwork(q_model=q_model, phi_model=phi_model, q_and_phi_model=q_and_phi_model,
                     config=config, observation_shape=shape, observation_dtype=dtype,
                     num_actions=num_actions, phi_dim=int(phi.shape[-1]),
                     torso_model=torso_model, head_model=head_model,
                     features_phi_model=features_phi_model,
                     support_threshold=float(support_threshold))


def _q_variables(net: CCVLNetwork):
  """The network's variables without its support head's (ccvl_tf/algorithm/support.py)."""
  return [v for v in net.variables if "_support" not in getattr(v, "path", v.name)]


def copy_weights(source: CCVLNetwork, target: CCVLNetwork) -> None:
  """target <- source, variable by variable (same config; used for the target network). When
  only one of them has a support head (a lower bound Q_l with one copied into the upper bound
  Q_u without), the Q(s, a, delta) variables are copied and the head is left out."""
  src, dst = source.variables, target.variables
  if bool(source.support_threshold) != bool(target.support_threshold):
    src, dst = _q_variables(source), _q_variables(target)
  if len(src) != len(dst):
    raise ValueError(f"networks differ: {len(src)} vs {len(dst)} variables")
  for s, d in zip(src, dst):
    if tuple(s.shape) != tuple(d.shape):
      raise ValueError(f"networks differ: variable {getattr(s, 'path', s.name)} has shape "
                       f"{tuple(s.shape)}, its counterpart {tuple(d.shape)}")
    d.assign(s)
