# Over ~500 lines on purpose: the three diagnostics share the grid checks and summarize(),
# and split apart each would import the others.
"""Diagnostics of the confidence dimension: the delta family, the count estimate, the belief.

More in docs/agent.md "Module notes", `ccvl_tf/evaluation/diagnostics.py`.
"""
from __future__ import annotations

import csv
import math
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

from ccvl_tf.evaluation import rollouts

# An absolute slack per grid step for "V nondecreasing in delta": float32 noise on a family that
# really is monotone must not count as a violation, but it is tiny so that a flat family
# (V equal at every delta up to noise) cannot pass as monotone *with spread*; the strict count
# ('strictly_increasing_fraction') has no slack at all.
MONOTONE_ATOL = 1e-7

UNSEEN_KINDS = ("shuffled_pixels", "noise")


# ------------------------------------------------------------------------------ helpers
def _check_grid(grid) -> np.ndarray:
  """The confidence grid as float64 [K]: finite, each in (0, 1), strictly increasing."""
  g = np.asarray(grid, np.float64)
  if g.ndim != 1 or g.size < 1:
    raise ValueError(f"grid must be a non-empty 1-D array of deltas, got shape {g.shape}")
  if not np.all(np.isfinite(g)) or np.any(g <= 0.0) or np.any(g >= 1.0):
    raise ValueError(f"grid deltas must lie in (0, 1), got {g.tolist()}")
  if np.any(np.diff(g) <= 0.0):
    raise ValueError(f"grid must be sorted strictly increasing, got {g.tolist()}")
  return g


def _q_values(q_model, observations, grid32: np.ndarray) -> np.ndarray:
  """Q(s, a, delta) for observations [B, ...] at every grid delta -> float64 [B, K, A]."""
  b = int(observations.shape[0])
  k = int(grid32.shape[0])
  deltas = np.broadcast_to(grid32[np.newaxis, :], (b, k))  # [K] -> [1, K] -> [B, K]
  q = q_model({"observation": tf.convert_to_tensor(observations),
               "delta": tf.constant(deltas, tf.float32)}, training=False)
  q = np.asarray(q, np.float64)
  if q.ndim != 3 or q.shape[0] != b or q.shape[1] != k:
    raise ValueError(f"q_model must return Q [B, K, A] = [{b}, {k}, A] for {b} observations and "
                     f"{k} deltas, got shape {q.shape}")
  return q


def _float_list(x) -> List[float]:
  return [float(v) for v in np.asarray(x, np.float64).ravel()]


# ------------------------------------------------------------------------------ delta family
def delta_family(q_model, observations, grid, td_target_scale: Optional[float] = None,
                 batch_size: int = 256, value_max: Optional[float] = None) -> Dict[str, object]:
  """The delta family V(s, delta) = max_a Q(s, a, delta) on states [S, ...] and the grid [K].

  Args:
    q_model: the contract Q-model, q_model({'observation': [B, ...], 'delta': [B, K]})
      -> Q [B, K, A].
    observations: numpy array [S, ...] of (held-out dataset) observations, S >= 1; run through
      the model in batches of `batch_size`.
    grid: the policy's confidence grid, float [K], sorted increasing, each delta in (0, 1).
    td_target_scale: the scale that `spread` is relative to, normally `td_target_scale(...)`
      (mean |r + gamma max_a' Q(s', a', delta)|); None: the mean |V| over all entries.
    batch_size: states per model call.
    value_max: the largest possible return, when known (e.g. 1 / (1 - gamma) with rewards
      clipped to [-1, 1]); None omits the check against it.

  Returns:
    dict with
      'grid': list [K];
      'values': np.ndarray [S, K] float64, V(s, delta_k);
      'mean_value': list [K], mean over states of V(s, delta_k);
      'monotone_fraction': fraction of states with V(s, delta_{k+1}) >= V(s, delta_k) - 1e-7 at
        every step (Lemma 1: V nondecreasing in delta); nan when K = 1;
      'strictly_increasing_fraction': the same with strict > and no tolerance (a flat family
        scores 0 here); nan when K = 1;
      'spread_raw': mean over states of V(s, delta_K) - V(s, delta_1);
      'spread': spread_raw / spread_scale (nan if the scale is 0 or not finite);
      'spread_scale': the divisor used; 'spread_scale_kind': 'td_target' (the argument was
        given) or 'mean_abs_value' (mean |V| over all states and deltas);
      'action_gap': mean over states and deltas of max_a Q(s, a, delta) - min_a Q(s, a, delta);
      'end_ordered_fraction': fraction of states with V(s, delta_K) >= V(s, delta_1) - 1e-7;
      'v_max': the largest V(s, delta) over states and deltas;
      'value_max', 'above_value_max_fraction': the given bound and the fraction of states with
        some V(s, delta) above it (nan without value_max): no lower bound exceeds it.
  """
  g = _check_grid(grid)
  obs = np.asarray(observations)
  if obs.ndim < 1 or obs.shape[0] < 1:
    raise ValueError(f"observations must be an array [S, ...] with S >= 1, got shape {obs.shape}")
  if int(batch_size) != batch_size or batch_size < 1:
    raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
  if td_target_scale is not None and not (np.isfinite(td_target_scale) and td_target_scale >= 0):
    raise ValueError(f"td_target_scale must be None or a finite value >= 0, got "
                     f"{td_target_scale!r}")
  grid32 = g.astype(np.float32)
  values, gaps = [], []
  for start in range(0, obs.shape[0], int(batch_size)):
    q = _q_values(q_model, obs[start:start + int(batch_size)], grid32)  # [B, K, A]
    values.append(q.max(axis=-1))                                       # [B, K, A] -> [B, K]
    gaps.append(q.max(axis=-1) - q.min(axis=-1))                        # [B, K, A] -> [B, K]
  v = np.concatenate(values, axis=0)                                    # [S, K]
  gap = np.concatenate(gaps, axis=0)                                    # [S, K]

  if g.size >= 2:
    steps = np.diff(v, axis=1)                                          # [S, K] -> [S, K - 1]
    monotone = float(np.mean(np.all(steps >= -MONOTONE_ATOL, axis=1)))
    strict = float(np.mean(np.all(steps > 0.0, axis=1)))
    end_ordered = float(np.mean(v[:, -1] >= v[:, 0] - MONOTONE_ATOL))
  else:
    monotone = strict = end_ordered = math.nan
  if value_max is not None and not np.isfinite(value_max):
    raise ValueError(f"value_max must be None or finite, got {value_max!r}")
  above = (math.nan if value_max is None
           else float(np.mean(np.any(v > float(value_max), axis=1))))
  spread_raw = float(np.mean(v[:, -1] - v[:, 0]))
  if td_target_scale is None:
    scale, kind = float(np.mean(np.abs(v))), "mean_abs_value"
  else:
    scale, kind = float(td_target_scale), "td_target"
  spread = spread_raw / scale if (np.isfinite(scale) and scale > 0.0) else math.nan
  return {
      "grid": _float_list(g),
      "values": v,
      "mean_value": _float_list(v.mean(axis=0)),
      "monotone_fraction": monotone,
      "strictly_increasing_fraction": strict,
      "spread": float(spread),
      "spread_raw": spread_raw,
      "spread_scale": scale,
      "spread_scale_kind": kind,
      "action_gap": float(np.mean(gap)),
      "end_ordered_fraction": end_ordered,
      "v_max": float(np.max(v)),
      "value_max": math.nan if value_max is None else float(value_max),
      "above_value_max_fraction": above,
  }


def td_target_scale(q_model, batches: Iterable[Mapping[str, object]], grid,
                    gamma: float) -> float:
  """Mean |TD target| = mean over transitions and grid deltas of
  |r + gamma (1 - terminal) max_a' Q(s', a', delta)|, with the same network (no target net).

  Args:
    q_model: the contract Q-model (see `delta_family`).
    batches: iterable of contract batches, dicts with 'observation', 'action', 'reward' [B],
      'next_observation' [B, ...] and 'terminal' [B] (1.0 at a true episode end); only
      reward, next_observation and terminal are used.
    grid: the confidence grid [K] (see `delta_family`).
    gamma: the discount, in [0, 1].

  Raises:
    ValueError: a bad grid or gamma, a batch without the needed keys, or no transitions.
  """
  g = _check_grid(grid)
  if not 0.0 <= gamma <= 1.0:
    raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
  grid32 = g.astype(np.float32)
  total, count = 0.0, 0
  for i, batch in enumerate(batches):
    missing = [key for key in ("reward", "next_observation", "terminal") if key not in batch]
    if missing:
      raise ValueError(f"batches[{i}] lacks {missing}; a contract batch has observation, action, "
                       f"reward, next_observation, terminal")
    reward = np.asarray(batch["reward"], np.float64).reshape(-1)        # [B]
    terminal = np.asarray(batch["terminal"], np.float64).reshape(-1)    # [B]
    next_obs = np.asarray(batch["next_observation"])
    if reward.shape[0] != next_obs.shape[0] or terminal.shape[0] != next_obs.shape[0]:
      raise ValueError(f"batches[{i}]: reward {reward.shape}, terminal {terminal.shape} and "
                       f"next_observation {next_obs.shape} disagree on the batch size")
    if reward.shape[0] == 0:
      continue
    next_v = _q_values(q_model, next_obs, grid32).max(axis=-1)        # [B, K, A] -> [B, K]
    # [B] -> [B, 1], broadcast against [B, K].
    target = reward[:, np.newaxis] + gamma * (1.0 - terminal[:, np.newaxis]) * next_v
    total += float(np.sum(np.abs(target)))
    count += target.size
  if count == 0:
    raise ValueError("batches held no transitions: td_target_scale needs at least one")
  return total / count


def plot_delta_family(path: str, result: Mapping[str, object], num_states: int = 8) -> None:
  """PNG of V(s, delta) against delta for the first `num_states` states, plus the mean curve.

  Args:
    path: output .png path.
    result: the dict `delta_family` returns (uses 'grid', 'values', 'mean_value').
    num_states: how many individual state curves to draw (>= 0).
  """
  if int(num_states) != num_states or num_states < 0:
    raise ValueError(f"num_states must be an integer >= 0, got {num_states!r}")
  # Here: matplotlib (~250 ms to import) only when a figure is drawn.
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  grid = np.asarray(result["grid"], np.float64)
  values = np.asarray(result["values"], np.float64)                     # [S, K]
  fig, ax = plt.subplots(figsize=(6, 4))
  for s in range(min(int(num_states), values.shape[0])):
    ax.plot(grid, values[s], marker=".", alpha=0.6, linewidth=1, label=f"state {s}")
  ax.plot(grid, np.asarray(result["mean_value"], np.float64), color="black", linewidth=2.5,
          label=f"mean over {values.shape[0]} states")
  ax.set_xlabel("confidence delta")
  ax.set_ylabel("V(s, delta) = max_a Q(s, a, delta)")
  title = "delta family V(s, delta)"
  if "monotone_fraction" in result and "spread" in result:
    title += (f"\nnondecreasing at {result['monotone_fraction']:.0%} of states, "
              f"spread {result['spread']:.3g}")
  ax.set_title(title, fontsize="medium")
  ax.grid(alpha=0.3)
  ax.legend(fontsize="x-small", ncol=2)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


# ------------------------------------------------------------------------------ count estimate
def _finite_1d(x, name: str) -> np.ndarray:
  a = np.asarray(x, np.float64).reshape(-1)                             # [...] -> [N]
  if a.size == 0:
    raise ValueError(f"{name} must be non-empty")
  if not np.all(np.isfinite(a)):
    raise ValueError(f"{name} must be finite, got {int(np.sum(~np.isfinite(a)))} non-finite "
                     f"value(s)")
  return a


def roc_auc(scores_negative, scores_positive) -> float:
  """ROC AUC of a score classifying positive (unseen) against negative (seen) examples.

  AUC = P(score_pos > score_neg) + 0.5 P(score_pos = score_neg) over independent pairs, computed
  as the Mann-Whitney U statistic with average ranks for ties:
      AUC = (sum of the positives' ranks - n_pos (n_pos + 1) / 2) / (n_pos n_neg).
  1.0: every positive scores above every negative; 0.5: no separation.

  Raises:
    ValueError: an empty input or non-finite values.
  """
  neg = _finite_1d(scores_negative, "scores_negative")
  pos = _finite_1d(scores_positive, "scores_positive")
  both = np.concatenate([neg, pos])                                     # [N + P]
  uniq, inverse, tie_counts = np.unique(both, return_inverse=True, return_counts=True)
  # Average (1-based) rank of each distinct value: ranks below it plus the mean of its block.
  below = np.cumsum(tie_counts) - tie_counts
  avg_rank = below + (tie_counts + 1) / 2.0                             # [U]
  ranks = avg_rank[inverse.reshape(-1)]                                 # [N + P]
  n_neg, n_pos = neg.size, pos.size
  u = float(np.sum(ranks[n_neg:])) - n_pos * (n_pos + 1) / 2.0
  return u / (n_pos * n_neg)


def _summary(x: np.ndarray) -> Dict[str, float]:
  """mean, median, p10, p90 (tfp.stats.percentile, linear interpolation), min, max, n."""
  pct = tfp.stats.percentile(tf.constant(x, tf.float64), [10.0, 50.0, 90.0],
                             interpolation="linear").numpy()
  return {"mean": float(np.mean(x)), "median": float(pct[1]), "p10": float(pct[0]),
          "p90": float(pct[2]), "min": float(np.min(x)), "max": float(np.max(x)),
          "n": int(x.size)}


def count_separation(inv_seen, inv_unseen) -> Dict[str, object]:
  """How well n(s)^-1 separates dataset states from states the data does not cover.

  Args:
    inv_seen: n(s)^-1 on (held-out) dataset states, [N].
    inv_unseen: n(s)^-1 on unseen states (e.g. from `unseen_observations`), [M].

  Returns:
    {'auc': roc_auc(inv_seen, inv_unseen) (1.0 when every unseen state has a larger n(s)^-1
     than every seen one, as the estimate should), 'seen': summary, 'unseen': summary}, each
    summary {'mean', 'median', 'p10', 'p90', 'min', 'max', 'n'} (percentiles by
    tfp.stats.percentile with linear interpolation, as numpy's default).
  """
  seen = _finite_1d(inv_seen, "inv_seen")
  unseen = _finite_1d(inv_unseen, "inv_unseen")
  return {"auc": roc_auc(seen, unseen), "seen": _summary(seen), "unseen": _summary(unseen)}


def _ridge_of(counts) -> float:
  """The ridge lambda the precision (|D| C + lambda I)^-1 uses: counts.effective_ridge() when
  the estimator has it (e.g. a ridge relative to the feature scale), else counts.ridge."""
  fn = getattr(counts, "effective_ridge", None)
  ridge = fn() if callable(fn) else counts.ridge
  return float(np.asarray(ridge))


def count_spectrum(counts) -> Dict[str, object]:
  """The spectrum of the data term |D| C of a LinearInverseCounts against its ridge lambda
  (with gram_source='exact', of the dataset's Phi^T Phi of the last refresh).

  With lambda_i the eigenvalues of |D| C (C = E_D[phi phi^T], the running second moment):
      effective_rank = sum_i lambda_i / (lambda_i + lambda)
  which, by the trace identity, equals |D| E_D[phi^T (|D| C + lambda I)^-1 phi] when phi is
  drawn from the same data that formed C (compare `mean_inverse_count_times_size`). Directions
  with lambda_i << lambda are governed by the ridge, not by visitation. C is read live while
  inverse_count uses the precision cached at the last refresh(): call counts.refresh() first so
  that both describe the same C (and, for a ridge relative to C, the same lambda).

  Args:
    counts: a LinearInverseCounts (second_moment [D, D], dataset_size, ridge or
      effective_ridge()).

  Returns:
    {'eigenvalues': list [D], descending (float64 np.linalg.eigvalsh of |D| C, symmetrized),
     'ridge': lambda, 'num_above_ridge': #{i: lambda_i > lambda},
     'effective_rank': sum_i max(lambda_i, 0) / (max(lambda_i, 0) + lambda),
     'trace': trace(|D| C), 'top_eigenvalues': the first 10, 'feature_dim': D}.
  """
  for attr in ("second_moment", "dataset_size"):
    if not hasattr(counts, attr):
      raise ValueError(f"counts must be a LinearInverseCounts (with {attr}), got "
                       f"{type(counts).__name__}")
  c = np.asarray(counts.second_moment, np.float64)
  if c.ndim != 2 or c.shape[0] != c.shape[1]:
    raise ValueError(f"counts.second_moment must be square [D, D], got shape {c.shape}")
  # The estimator's own Phi^T Phi when it has one (gram_source='exact': the dataset's Gram of
  # the last refresh, not |D| C, which it leaves at 0), else |D| C.
  fn = getattr(counts, "gram", None)
  g = (np.asarray(fn(), np.float64) if callable(fn)
       else float(counts.dataset_size) * c)
  gram = 0.5 * (g + g.T)                                                # symmetrized
  eig = np.sort(np.linalg.eigvalsh(gram))[::-1]                         # [D], descending
  ridge = _ridge_of(counts)
  pos = np.maximum(eig, 0.0)  # C is PSD; clip float round-off below 0
  return {
      "eigenvalues": _float_list(eig),
      "ridge": ridge,
      "num_above_ridge": int(np.sum(eig > ridge)),
      "effective_rank": float(np.sum(pos / (pos + ridge))),
      "trace": float(np.trace(gram)),
      "top_eigenvalues": _float_list(eig[:10]),
      "feature_dim": int(c.shape[0]),
  }


def mean_inverse_count_times_size(counts, phi) -> float:
  """|D| * mean over the rows of phi [N, D] of n(s)^-1 = min(1, phi^T (|D| C + lambda I)^-1 phi).

  Uses counts.raw_inverse_count (the estimate before any count normalization, which would
  rescale it) when the estimator has one, else counts.inverse_count. On the data that formed C
  this equals count_spectrum(counts)['effective_rank'] (trace identity) provided the precision
  is fresh (counts.refresh() after the last update) and no estimate hits the cap at 1.
  """
  phi = np.asarray(phi, np.float32)
  if phi.ndim != 2 or phi.shape[0] < 1:
    raise ValueError(f"phi must be features [N, D] with N >= 1, got shape {phi.shape}")
  fn = getattr(counts, "raw_inverse_count", None)
  fn = fn if callable(fn) else counts.inverse_count
  inv = np.asarray(fn(tf.constant(phi)), np.float64)                   # [N]
  return float(counts.dataset_size) * float(np.mean(inv))


def unseen_observations(observations, rng, kind: str = "shuffled_pixels") -> np.ndarray:
  """Observations the data does not cover, made from data observations [S, ...].

  kinds:
    'shuffled_pixels': for frames [S, H, W] or [S, H, W, C], permutes the H*W spatial positions
      of each frame with its own random permutation (the same one for all C channels of that
      frame). Every frame keeps its multiset of pixel values per channel (so occupancy and
      intensity statistics match the data) while its spatial structure is destroyed.
    'noise': independent random values in the data's range with the same dtype. Binary data
      (integer or bool with values in {0, 1}, e.g. MinAtar's uint8 grids) draws Bernoulli
      pixels with the data's mean occupancy per channel (last axis of [S, H, W, C]; one mean
      for other shapes); other integer data draws uniform integers in [min, max] of the data;
      float data draws uniform floats in [min, max).

  Args:
    observations: numpy array [S, ...] of data observations (uint8, bool or float).
    rng: np.random.Generator (or a seed for np.random.default_rng).
    kind: one of UNSEEN_KINDS.

  Returns:
    an array with the shape and dtype of `observations`.
  """
  obs = np.asarray(observations)
  if kind not in UNSEEN_KINDS:
    raise ValueError(f"kind must be one of {UNSEEN_KINDS}, got {kind!r}")
  if obs.ndim < 2 or obs.shape[0] < 1:
    raise ValueError(f"observations must be an array [S, ...] with S >= 1, got shape "
                     f"{obs.shape}")
  rng = np.random.default_rng(rng)
  if kind == "shuffled_pixels":
    if obs.ndim not in (3, 4):
      raise ValueError(f"kind='shuffled_pixels' needs frames [S, H, W] or [S, H, W, C], got "
                       f"observations of shape {obs.shape}")
    s, h, w = obs.shape[:3]
    flat = obs.reshape(s, h * w, -1)                                    # [S, H, W, (C)] -> [S, HW, C]
    perm = np.argsort(rng.random((s, h * w)), axis=1)                   # [S, HW], one per frame
    shuffled = np.take_along_axis(flat, perm[:, :, np.newaxis], axis=1)  # [S, HW, C]
    return shuffled.reshape(obs.shape)                                  # [S, HW, C] -> [S, H, W, (C)]

  # kind == 'noise'
  is_int = np.issubdtype(obs.dtype, np.integer) or obs.dtype == np.bool_
  if is_int and np.all((obs == 0) | (obs == 1)):
    if obs.ndim == 4:
      occupancy = obs.reshape(-1, obs.shape[-1]).astype(np.float64).mean(axis=0)  # [C]
    else:
      occupancy = np.float64(obs.astype(np.float64).mean())                       # scalar
    draws = rng.random(obs.shape) < occupancy                          # broadcast over the last axis
    return draws.astype(obs.dtype)
  lo, hi = obs.min(), obs.max()
  if is_int:
    return rng.integers(int(lo), int(hi), size=obs.shape, endpoint=True).astype(obs.dtype)
  return rng.uniform(float(lo), float(hi), size=obs.shape).astype(obs.dtype)


# ------------------------------------------------------------------------------ belief
def belief_trace(records: Sequence[object], grid) -> List[Dict[str, float]]:
  """The belief b(h) over the grid at the end of each evaluation episode.

  Args:
    records: EpisodeRecords (ccvl_tf.evaluation.rollouts); those without a log_belief are skipped.
    grid: the policy's confidence grid [K] (the belief's support).

  Returns:
    one dict per record with a log_belief, in order: {'run', 'episode',
    'expected_delta' (sum_k b_k delta_k), 'entropy' (nats, of b), 'map_delta' (argmax_k b_k's
    delta), 'mean_acted_delta' (mean of record.deltas, nan when it is empty)}; b is
    tfp.distributions.Categorical(logits=log_belief), so an unnormalized log-belief is fine.
    A record whose belief recorded the squared Bellman errors it summed in the episode
    (EpisodeRecord.sq_error_sum) adds 'sq_error_count' and, per grid delta, its
    'sq_error_sum@<delta>' (rollouts.sq_error_columns).
  """
  g = _check_grid(grid)
  columns = rollouts.sq_error_columns(g)
  out = []
  for i, rec in enumerate(records):
    log_belief = getattr(rec, "log_belief", None)
    if log_belief is None:
      continue
    logits = np.asarray(log_belief, np.float64).reshape(-1)             # [K] (or [1, K]) -> [K]
    if logits.size != g.size:
      raise ValueError(f"records[{i}].log_belief has {logits.size} entries but grid has "
                       f"{g.size} deltas")
    dist = tfp.distributions.Categorical(logits=tf.constant(logits, tf.float64))
    probs = dist.probs_parameter().numpy()                              # [K]
    deltas = list(getattr(rec, "deltas", []) or [])
    entry = {
        "run": int(getattr(rec, "run", 0)),
        "episode": int(rec.episode),
        "expected_delta": float(np.sum(probs * g)),
        "entropy": float(dist.entropy().numpy()),
        "map_delta": float(g[int(dist.mode().numpy())]),
        "mean_acted_delta": float(np.mean(deltas)) if deltas else math.nan,
    }
    sums = getattr(rec, "sq_error_sum", None)
    if sums is not None:
      sums = np.asarray(sums, np.float64).reshape(-1)
      if sums.size != g.size:
        raise ValueError(f"records[{i}].sq_error_sum has {sums.size} entries but grid has "
                         f"{g.size} deltas")
      entry["sq_error_count"] = int(rec.sq_error_count)
      entry.update({c: float(v) for c, v in zip(columns, sums)})
    out.append(entry)
  return out


def belief_movement(trace: Sequence[Mapping[str, float]], grid,
                    initial_log_belief=None) -> Dict[str, float]:
  """How far the belief moved from its prior b_0 over an evaluation.

  Args:
    trace: `belief_trace` output (non-empty), in episode order.
    grid: the confidence grid [K].
    initial_log_belief: log b_0 [K] the policy started from (its `initial_log_belief`);
      None: the uniform prior. A constant one (the uniform prior the policy holds when given
      none) is measured as None is, exactly: mean of the grid, log K.

  Returns:
    {'prior_expected_delta': the prior's mean delta (uniform: the mean of the grid),
     'final_expected_delta': the last entry's expected delta,
     'max_abs_shift': max over entries of |expected_delta - prior mean|,
     'prior_entropy': the prior's (uniform: log K), 'final_entropy', 'min_entropy',
     'episodes': len(trace)}.
  """
  g = _check_grid(grid)
  if not trace:
    raise ValueError("trace is empty: no episode carried a log_belief (is the policy adaptive?)")
  expected = np.array([t["expected_delta"] for t in trace], np.float64)  # [E]
  entropy = np.array([t["entropy"] for t in trace], np.float64)          # [E]
  logits = (None if initial_log_belief is None else
            np.asarray(initial_log_belief, np.float64).reshape(-1))     # [K]
  if logits is not None and logits.size != g.size:
    raise ValueError(f"initial_log_belief has {logits.size} entries but grid has {g.size} "
                     f"deltas")
  if logits is None or np.all(logits == logits[0]):
    # The uniform prior in closed form (the rounding of the general route below would move a
    # uniform-prior run's numbers in their last bits).
    prior_mean, prior_entropy = float(np.mean(g)), float(np.log(g.size))
  else:
    prior = tfp.distributions.Categorical(logits=tf.constant(logits, tf.float64))
    prior_mean = float(np.sum(prior.probs_parameter().numpy() * g))
    prior_entropy = float(prior.entropy().numpy())
  return {
      "prior_expected_delta": prior_mean,
      "final_expected_delta": float(expected[-1]),
      "max_abs_shift": float(np.max(np.abs(expected - prior_mean))),
      "prior_entropy": prior_entropy,
      "final_entropy": float(entropy[-1]),
      "min_entropy": float(np.min(entropy)),
      "episodes": int(len(trace)),
  }


_BELIEF_COLUMNS = ("run", "episode", "expected_delta", "entropy", "map_delta",
                   "mean_acted_delta")


def write_belief_csv(path: str, trace: Sequence[Mapping[str, float]]) -> None:
  """CSV with one row per `belief_trace` entry: run, episode, expected_delta, entropy,
  map_delta, mean_acted_delta; where the entries have them, then sq_error_count and the
  summed squared Bellman errors of each grid delta, 'sq_error_sum@<delta>' (to full
  precision; empty in a row without them)."""
  more = [c for c in dict.fromkeys(k for t in trace for k in t)
          if c == "sq_error_count" or c.startswith(rollouts.SQ_ERROR_SUM_COLUMN)]
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(_BELIEF_COLUMNS + tuple(more))
    for t in trace:
      w.writerow([int(t.get("run", 0)), int(t["episode"])] +
                 [f"{float(t[c]):.6g}" for c in _BELIEF_COLUMNS[2:]] +
                 ["" if t.get(c) is None else repr(t[c]) for c in more])


def plot_belief(path: str, trace: Sequence[Mapping[str, float]]) -> None:
  """PNG with two panels against the episode: the belief's expected delta and its entropy
  (one line per run)."""
  if not trace:
    raise ValueError("trace is empty: nothing to plot")
  # Here: matplotlib (~250 ms to import) only when a figure is drawn.
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, (ax_d, ax_h) = plt.subplots(2, 1, figsize=(6, 5.5), sharex=True)
  runs = sorted({int(t.get("run", 0)) for t in trace})
  for run in runs:
    rows = [t for t in trace if int(t.get("run", 0)) == run]
    x = [t["episode"] for t in rows]
    ax_d.plot(x, [t["expected_delta"] for t in rows], marker=".", label=f"seed {run}")
    ax_h.plot(x, [t["entropy"] for t in rows], marker=".", label=f"seed {run}")
  ax_d.set_ylabel("E_b[delta]")
  ax_d.set_title("belief over the confidence grid, end of each episode", fontsize="medium")
  ax_h.set_ylabel("entropy of b (nats)")
  ax_h.set_xlabel("episode")
  for ax in (ax_d, ax_h):
    ax.grid(alpha=0.3)
  if 1 < len(runs) <= 10:
    ax_d.legend(fontsize="small")
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


# The diagnostics that compare V(s, delta) across the grid (delta_family's and summarize's keys):
# undefined (NaN) with a grid of one delta.
ACROSS_DELTA_KEYS = ("monotone_fraction", "strictly_increasing_fraction", "end_ordered_fraction",
                     "lemma1_fraction", "lemma1_end_fraction")


def undefined_notes(num_grid_deltas: int) -> Dict[str, str]:
  """Why a diagnostic of a grid of `num_grid_deltas` deltas is NaN, by key: the notes written
  beside its null in the JSON files (ccvl_tf.runtime.strict_json)."""
  if int(num_grid_deltas) >= 2:
    return {}
  return {k: "undefined: one grid delta (K = 1), so V(s, delta) cannot be compared across "
             "delta" for k in ACROSS_DELTA_KEYS}


# ------------------------------------------------------------------------------ summary
def summarize(family: Optional[Mapping[str, object]] = None,
              separation: Optional[Mapping[str, object]] = None,
              spectrum: Optional[Mapping[str, object]] = None,
              movement: Optional[Mapping[str, object]] = None,
              mean_inv_count_x_size: Optional[float] = None) -> Dict[str, float]:
  """The headline numbers as one flat dict of plain floats (for summary.json / TensorBoard).

  Args (each may be None, which omits its keys):
    family: `delta_family` -> 'family_spread', 'family_spread_raw', 'lemma1_fraction'
      (monotone_fraction: V nondecreasing at every grid step), 'lemma1_end_fraction'
      (end_ordered_fraction: V(delta_K) >= V(delta_1)), 'action_gap', 'v_max' and, when the
      family was checked against a largest return, 'v_above_value_max_fraction'.
    separation: `count_separation` -> 'count_auc', 'inv_count_seen_median',
      'inv_count_unseen_median'.
    spectrum: `count_spectrum` -> 'effective_rank' (and 'mean_inv_count_x_size' if the
      spectrum dict carries that key, e.g. set by the caller).
    movement: `belief_movement` -> 'belief_max_shift', 'belief_final_entropy',
      'belief_prior_entropy'.
    mean_inv_count_x_size: `mean_inverse_count_times_size` -> 'mean_inv_count_x_size'.
  """
  out: Dict[str, float] = {}
  if family is not None:
    out["family_spread"] = float(family["spread"])
    out["family_spread_raw"] = float(family["spread_raw"])
    out["lemma1_fraction"] = float(family["monotone_fraction"])
    if "end_ordered_fraction" in family:
      out["lemma1_end_fraction"] = float(family["end_ordered_fraction"])
    out["action_gap"] = float(family["action_gap"])
    if "v_max" in family:
      out["v_max"] = float(family["v_max"])
    if np.isfinite(family.get("above_value_max_fraction", math.nan)):
      out["v_above_value_max_fraction"] = float(family["above_value_max_fraction"])
  if separation is not None:
    out["count_auc"] = float(separation["auc"])
    out["inv_count_seen_median"] = float(separation["seen"]["median"])
    out["inv_count_unseen_median"] = float(separation["unseen"]["median"])
  if spectrum is not None:
    out["effective_rank"] = float(spectrum["effective_rank"])
    if "mean_inv_count_x_size" in spectrum:
      out["mean_inv_count_x_size"] = float(spectrum["mean_inv_count_x_size"])
  if mean_inv_count_x_size is not None:
    out["mean_inv_count_x_size"] = float(mean_inv_count_x_size)
  if movement is not None:
    out["belief_max_shift"] = float(movement["max_abs_shift"])
    out["belief_final_entropy"] = float(movement["final_entropy"])
    out["belief_prior_entropy"] = float(movement["prior_entropy"])
  return out
