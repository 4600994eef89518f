"""The monotone delta head: Q(s, a, delta) ordered in delta by construction (Lemma 1).

Keras 3 layers with no weights of their own, used by
`ccvl_tf.algorithm.networks.build_ccvl_network` with `delta_head='monotone'` (the increments
from the state features alone) and `'cosine_monotone'` (the increments from IQN's cosine
embedding of each knot delta times the state features, `KnotDeltas`); docs/agent.md "The
confidence family" explains the choice.
"""
from __future__ import annotations

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import numpy as np
from keras import ops


@keras.saving.register_keras_serializable(package="ccvl_tf")
class MonotoneDeltaHead(keras.layers.Layer):
  """Q(s, a, delta) monotone in delta by construction: a base value plus nonnegative increments
  on J equal pieces of (0, 1),

      Q(s, a, delta) = b(s, a) + sum_j u_j(s, a) * ramp_j(delta),
      ramp_j(delta) = clip(J * delta - (j - 1), 0, 1),   u_j(s, a) = softplus(x_j(s, a)) / J >= 0,

  i.e. the linear interpolation of the knot values b, b + u_1, b + u_1 + u_2, ... at
  delta = 0, 1/J, ..., 1: nondecreasing in delta (sign = +1, the lower bound, Lemma 1). With
  sign = -1 every ramp is replaced by 1 - ramp_j(delta): nonincreasing (the upper bound Q_u),
  from b + sum_j u_j at delta = 0 down to b at delta = 1, so a Q_u that copies Q_l's weights
  starts as Q_l's family reflected, Q_u(delta) = Q_l(0) + Q_l(1) - Q_l(delta). Inputs: params
  [B, (J + 1) * A] (b and x per action from the state features) and delta [B, K]; output
  [B, K, A]. No weights of its own.
  """

  def __init__(self, num_actions: int, pieces: int = 16, sign: float = 1.0, **kwargs):
    super().__init__(**kwargs)
    if int(pieces) != pieces or pieces < 1:
      raise ValueError(f"pieces must be an integer >= 1, got {pieces!r}")
    if sign not in (1.0, -1.0, 1, -1):
      raise ValueError(f"sign must be +1 or -1, got {sign!r}")
    self.num_actions, self.pieces, self.sign = int(num_actions), int(pieces), float(sign)

  def call(self, inputs):
    params, delta = inputs
    j, a = self.pieces, self.num_actions
    # In float32 also under a mixed-precision policy (the knots and ramps are float32).
    params = ops.cast(params, "float32")
    params = ops.reshape(params, (-1, j + 1, a))                 # [B, (J+1)*A] -> [B, J+1, A]
    base = params[:, 0, :]                                        # b(s, a) [B, A]
    inc = ops.softplus(params[:, 1:, :]) / j                      # u_j(s, a) >= 0 [B, J, A]
    knots = ops.convert_to_tensor(np.arange(j, dtype=np.float32))  # [J]
    # ramp_j(delta) = clip(J delta - j, 0, 1), j = 0..J-1: [B, K, 1] - [J] -> [B, K, J]
    ramps = ops.clip(ops.expand_dims(ops.cast(delta, "float32"), -1) * j - knots, 0.0, 1.0)
    rise = ops.einsum("bkj,bja->bka", ramps, inc)                 # [B, K, A]
    if self.sign < 0:  # sum_j u_j (1 - ramp_j) = sum_j u_j - rise
      return ops.expand_dims(base + ops.sum(inc, axis=1), 1) - rise  # [B, 1, A] - [B, K, A]
    return ops.expand_dims(base, 1) + rise                        # [B, 1, A] + [B, K, A]

  def compute_output_shape(self, input_shape):
    params_shape, delta_shape = input_shape
    return (params_shape[0], delta_shape[1], self.num_actions)

  def get_config(self):
    return {**super().get_config(), "num_actions": self.num_actions, "pieces": self.pieces,
            "sign": self.sign}


@keras.saving.register_keras_serializable(package="ccvl_tf")
class KnotDeltas(keras.layers.Layer):
  """The J + 1 knot deltas 0, 1/J, ..., 1 of MonotoneDeltaHead for every row of the batch:
  features [B, ...] -> [B, J + 1]. With delta_head='cosine_monotone' each knot's value comes
  from psi(s) * eta(knot), IQN's cosine embedding at the knot.

  The knots are a non-trainable weight [J + 1]: the cosine head has the same trainable layers
  (the embedding and the output), so without it a cosine head's checkpoint or pushed weights
  would fit this network unnoticed; with it, restoring one (assert_existing_objects_matched)
  or a Reverb 'variables' table of the other head fails."""

  def __init__(self, pieces: int = 16, **kwargs):
    super().__init__(**kwargs)
    if int(pieces) != pieces or pieces < 1:
      raise ValueError(f"pieces must be an integer >= 1, got {pieces!r}")
    self.pieces = int(pieces)

  def build(self, input_shape):
    self.knots = self.add_weight(
        shape=(self.pieces + 1,), trainable=False, name="knots",
        initializer=keras.initializers.Constant(
            np.linspace(0.0, 1.0, self.pieces + 1, dtype=np.float32)))

  def call(self, features):
    knots = ops.expand_dims(ops.cast(self.knots, "float32"), 0)      # [1, J+1]
    return ops.ones_like(features[:, :1], dtype="float32") * knots  # [B, 1] * [1, J+1]

  def compute_output_shape(self, input_shape):
    return (input_shape[0], self.pieces + 1)

  def get_config(self):
    return {**super().get_config(), "pieces": self.pieces}
