"""The state a ConfidenceAdaptivePolicy carries (ccvl_tf.algorithm.policies): its keys, its
spec without the batch dimension, and the check of an initial log-belief b_0 over the K grid
deltas. No TensorFlow op runs here; the policy, its belief update and its export import these.
"""
from __future__ import annotations

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf

# Keys of the ConfidenceAdaptivePolicy state (a dict; each entry has a leading batch dim).
LOG_BELIEF = "log_belief"          # [B, K] float32, normalized log b over delta_grid(K)
PREV_OBSERVATION = "prev_observation"  # [B, *obs_shape], s of the last transition
PREV_ACTION = "prev_action"        # [B] action dtype, a of the last transition
HAS_PREV = "has_prev"              # [B] bool, whether (s, a) above is a real previous step
RNG = "rng"                        # [B, 2] int64, stateless seed for sampling delta ~ b
DELTA_INDEX = "delta_index"        # [B] int32, grid index of the delta acted with last
# The record of what the belief summed (never reset inside a run: a caller takes differences,
# e.g. per episode, as ccvl_tf.evaluation.rollouts.run_episodes does).
SQ_ERROR_SUM = "sq_error_sum"      # [B, K] float64, sum of the e(delta) that updated log b
SQ_ERROR_COUNT = "sq_error_count"  # [B] int64, number of transitions summed in sq_error_sum


def adaptive_state_spec(observation_spec, action_spec) -> dict:
  """The state of a ConfidenceAdaptivePolicy on `observation_spec` / `action_spec`, for any
  grid size K (no batch dimension)."""
  return {
      LOG_BELIEF: tf.TensorSpec([None], tf.float32, name=LOG_BELIEF),
      PREV_OBSERVATION: tf.TensorSpec(observation_spec.shape, observation_spec.dtype,
                                      name=PREV_OBSERVATION),
      PREV_ACTION: tf.TensorSpec((), action_spec.dtype, name=PREV_ACTION),
      HAS_PREV: tf.TensorSpec((), tf.bool, name=HAS_PREV),
      RNG: tf.TensorSpec([2], tf.int64, name=RNG),
      DELTA_INDEX: tf.TensorSpec((), tf.int32, name=DELTA_INDEX),
      SQ_ERROR_SUM: tf.TensorSpec([None], tf.float64, name=SQ_ERROR_SUM),
      SQ_ERROR_COUNT: tf.TensorSpec((), tf.int64, name=SQ_ERROR_COUNT),
  }


def checked_log_belief(log_belief, num_grid_deltas: int, name: str = "initial_log_belief",
                       tolerance: float = 1e-4) -> np.ndarray:
  """`log_belief` as a float32 log-belief [K] over the K = `num_grid_deltas` grid deltas; a
  ValueError of one line naming `name` unless it has K finite entries whose logsumexp is
  within `tolerance` of 0 (a normalized log-belief, e.g. `belief.informed_log_prior`'s or
  `belief.uniform_log_belief`'s; probabilities in place of their logs are refused so)."""
  try:
    x = np.asarray(log_belief, np.float64)
  except (TypeError, ValueError):
    x = None
  shown = (repr(log_belief) if x is None else np.array2string(
      x, separator=", ", max_line_width=10**9, threshold=12, precision=6))
  if x is None or x.shape != (int(num_grid_deltas),):
    raise ValueError(f"{name} must be a log-belief of {int(num_grid_deltas)} numbers (one per "
                     f"grid delta, K = num_grid_deltas), got {shown}")
  if not np.all(np.isfinite(x)):
    raise ValueError(f"{name} must be finite (a log-belief; -inf would rule a delta out "
                     f"forever), got {shown}")
  top = x.max()
  total = top + np.log(np.sum(np.exp(x - top)))
  if not abs(total) <= tolerance:
    raise ValueError(f"{name} must be normalized, logsumexp 0 (within {tolerance:g}): log "
                     f"probabilities (subtract their logsumexp; not probabilities), got {shown} "
                     f"with logsumexp {total:.6g}")
  return x.astype(np.float32)
