"""The ordered delta heads: Q(s, a, delta) ordered in delta by construction (Lemma 1).

Keras 3 layers with no weights of their own, used by
`ccvl_tf.algorithm.networks.build_ccvl_network` with `delta_head='monotone'` (the increments
from the state features alone), `'cosine_monotone'` (the increments from IQN's cosine
embedding of each knot delta times the state features, `KnotDeltas`) and `'quantized'` (one
member per bin of delta, each its own layers on the state features, `QuantizedDeltaHead`),
and the check that a policy's delta grid is the quantized head's members (`check_grid`);
docs/agent.md "The confidence family" explains the choice.
"""
from __future__ import annotations

from typing import Optional

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


# K of the quantized head by default (CCVLConfig.delta_members): the policies' grid of 8
# deltas (run_settings.num_grid_deltas' default), one member per grid delta.
DEFAULT_DELTA_MEMBERS = 8


def member_index(delta, members: int):
  """The member (bin) of each confidence: k(delta) = min(floor(K delta), K - 1), clipped at 0,
  int32 of delta's shape. Bins are half-open, [k / K, (k + 1) / K): a bin edge k / K belongs to
  member k, delta = 1 to member K - 1; the grid deltas (k + 0.5) / K of belief.delta_grid(K)
  are member k's."""
  k = float(members)
  return ops.cast(ops.clip(ops.floor(ops.cast(delta, "float32") * k), 0.0, k - 1.0), "int32")


@keras.saving.register_keras_serializable(package="ccvl_tf")
class QuantizedDeltaHead(keras.layers.Layer):
  """Q(s, a, delta) piecewise constant in delta: K members, one per quantized confidence (paper
  Sec. 5, "fix quantized values of delta, and model our Q-function as an ensemble where each
  ensemble member corresponds to one fixed delta"), ordered in delta by construction (Lemma 1).

  Member k holds the bin [k / K, (k + 1) / K) of (0, 1) (`member_index`), whose midpoint is the
  grid delta (k + 0.5) / K. Each member j has one output x_j(s, a) from its own layers on the
  shared torso psi(s); member 0's is the base, the others' are nonnegative steps:

      u_j(s, a) = softplus(x_j(s, a)) / K >= 0,                     j = 1..K-1
      Q_k(s, a) = x_0(s, a) + sum_{j=1..k} u_j(s, a)                (sign = +1, the lower bound)
      Q_k(s, a) = x_0(s, a) + sum_{j=k+1..K-1} u_j(s, a)            (sign = -1, the upper bound)
      Q(s, a, delta) = Q_{k(delta)}(s, a).

  So Q is nondecreasing in delta (sign +1) or nonincreasing (sign -1) for every state, action
  and weight; adjacent members differ by u_j > 0 (equal only in the limit x_j -> -inf). As in
  MonotoneDeltaHead the steps are scaled by 1/K, so softplus(x_j) is the rise per unit delta
  and Q(1) - Q(0) starts near softplus(0) whatever K. With sign -1 a Q_u that copies Q_l's
  weights is Q_l's family reflected, Q_u(delta) = Q_l(0) + Q_l(1) - Q_l(delta). The price of
  the ordering: Q_k depends on the layers of the base and of the steps on the way to it, so a
  delta in bin k trains member 0's layers and those of members 1..k (sign +1; k+1..K-1 for
  sign -1), never the others'.

  Inputs: x [B, K, A] (member j's outputs in row j) and delta [B, D]; output [B, D, A]. No
  weights of its own.
  """

  def __init__(self, num_actions: int, members: int = 8, sign: float = 1.0, **kwargs):
    super().__init__(**kwargs)
    if int(members) != members or members < 1:
      raise ValueError(f"members must be an integer >= 1, got {members!r}")
    if sign not in (1.0, -1.0, 1, -1):
      raise ValueError(f"sign must be +1 or -1, got {sign!r}")
    self.num_actions, self.members, self.sign = int(num_actions), int(members), float(sign)

  def member_values(self, raw):
    """Q_k(s, a) of every member: x [B, K, A] -> [B, K, A] (the formulas above)."""
    # In float32 also under a mixed-precision policy (the steps are summed in float32).
    raw = ops.cast(raw, "float32")
    base = raw[:, :1, :]                                        # x_0 [B, 1, A]
    steps = ops.softplus(raw[:, 1:, :]) / self.members          # u_1..u_{K-1} [B, K-1, A]
    if self.sign > 0:  # sum_{j <= k} u_j: [0, u_1, u_1 + u_2, ...]
      rise = ops.concatenate([ops.zeros_like(base), ops.cumsum(steps, axis=1)], axis=1)
    else:  # sum_{j > k} u_j: [u_1 + ... + u_{K-1}, ..., u_{K-1}, 0], summed from the top
      rise = ops.concatenate(
          [ops.flip(ops.cumsum(ops.flip(steps, axis=1), axis=1), axis=1),
           ops.zeros_like(base)], axis=1)
    return base + rise                                          # [B, 1, A] + [B, K, A]

  def call(self, inputs):
    raw, delta = inputs
    values = self.member_values(raw)                            # [B, K, A]
    # The member of each delta as a one-hot row [B, D] -> [B, D, K]; its product with the
    # member values selects Q_{k(delta)} and sends no gradient to the members not selected.
    one_hot = ops.one_hot(member_index(delta, self.members), self.members)
    return ops.einsum("bdk,bka->bda", one_hot, values)          # [B, D, A]

  def compute_output_shape(self, input_shape):
    raw_shape, delta_shape = input_shape
    return (raw_shape[0], delta_shape[1], self.num_actions)

  def get_config(self):
    return {**super().get_config(), "num_actions": self.num_actions, "members": self.members,
            "sign": self.sign}


def quantized_members(q_model) -> Optional[int]:
  """K, the members of the QuantizedDeltaHead in the Keras model `q_model` (searched through
  nested models); None when it has none (another delta head, a hand-built contract model)."""
  for layer in getattr(q_model, "layers", ()):
    if isinstance(layer, QuantizedDeltaHead):
      return layer.members
    inner = quantized_members(layer) if isinstance(layer, keras.Model) else None
    if inner is not None:
      return inner
  return None


def check_grid(delta_members: int, num_grid_deltas: int) -> None:
  """A one-line ValueError when the K = `delta_members` members of a quantized delta head are
  not the grid deltas (k + 0.5) / K of a policy's grid of `num_grid_deltas`: the head is
  constant on each of its K bins, so another grid would act with some members twice and
  never with others."""
  if int(num_grid_deltas) != int(delta_members):
    raise ValueError(
        f"num_grid_deltas must be {int(delta_members)}, the delta_members of "
        f"delta_head='quantized' (one member per grid delta (k + 0.5) / K), got "
        f"{int(num_grid_deltas)}")


def check_model_grid(q_model, num_grid_deltas: int) -> None:
  """`check_grid` for the quantized head in the Keras model `q_model`, if it has one."""
  members = quantized_members(q_model)
  if members is not None:
    check_grid(members, num_grid_deltas)
