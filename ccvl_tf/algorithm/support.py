"""The data's support in Q(s, a, delta): actions the data does not take at a state get no value.

Eq. (update) bounds Q*(s, a) from below only where the data has taken a at s; an action it never
takes there has no lower bound, so a lower-bound policy must not choose it (exactly:
`ccvl_tf.tabular.learners.ccvl_bonus_gap_q(support_threshold=tau)` gives it -inf). With the
state count n(s) the neural agents use, the bonus carries no per-action information, so the
network learns the data's policy pi_beta^(a | s) from the same torso features (a
behaviour-cloning head, as discrete BCQ does, Fujimoto et al. 2019) and `SupportMask` ranks an
action below every supported one where

    pi_beta^(a | s) < tau max_a' pi_beta^(a' | s).

The masked value is min_a Q(s, a, delta) - SUPPORT_MARGIN: strictly below every supported
action, in the network's own range (a float32 -inf or -1e9 would swamp the Bellman errors of
the belief and of Fixed-CCVL's choice, which average over every held-out transition), and still
nondecreasing in delta wherever Q is (a min of nondecreasing functions), so Lemma 1 is kept.
Every user of the Q-model (policies, belief, Fixed-CCVL, diagnostics, exported SavedModels)
sees the masked family; training regresses the unmasked Q on the data's actions.
"""
from __future__ import annotations

import math

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
from keras import ops

from ccvl_tf.algorithm.constants import SUPPORT_MARGIN  # one margin for the exact and the network


def validate_threshold(threshold: float) -> None:
  if not (isinstance(threshold, (int, float)) and 0.0 < threshold < 1.0):
    raise ValueError(f"support_threshold must be in (0, 1) (or 0: no support head), got "
                     f"{threshold!r}")


class SupportMask(keras.layers.Layer):
  """Q [B, K, A] and behaviour logits [B, A] -> Q with unsupported actions at
  min_a Q - SUPPORT_MARGIN (module notes); tau = `threshold` in (0, 1). No weights."""

  def __init__(self, threshold: float, **kwargs):
    super().__init__(**kwargs)
    validate_threshold(threshold)
    self.threshold = float(threshold)

  def call(self, inputs):
    q, logits = inputs
    log_pi = ops.log_softmax(logits, axis=-1)                            # [B, A]
    # pi(a) >= tau max pi  <=>  log pi(a) >= max log pi + log tau
    supported = log_pi >= ops.max(log_pi, axis=-1, keepdims=True) + math.log(self.threshold)
    floor = ops.min(q, axis=-1, keepdims=True) - SUPPORT_MARGIN          # [B, K, 1]
    return ops.where(ops.expand_dims(supported, 1), q, floor)            # [B, K, A]

  def compute_output_shape(self, input_shape):
    return input_shape[0]

  def get_config(self):
    return {**super().get_config(), "threshold": self.threshold}
