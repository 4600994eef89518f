"""Headroom of a CCVL family: can any fixed delta beat Fixed-CCVL on the same episodes?

The statistics of binaries/headroom.py (protocol: docs/headroom.md). Every policy plays the
same E = S x L episodes: S sequences (vector slots, one policy state each) of L episodes, so the
adaptive policy's belief is carried over the L episodes of a sequence. Episode e of an
evaluation is position e // S of sequence e % S (ccvl_tf/evaluation/atari_vector.py gives slot j
the episodes j, j + S, j + 2S, ...). Sequences, not episodes, are the independent units of the
paired CIs: the adaptive policy's episodes within one sequence share a belief.

Pure numpy (and rliable through score_stats for the bootstrap); no TensorFlow.
"""
from __future__ import annotations

import statistics
from typing import Dict, Mapping, Optional, Sequence

import numpy as np

from ccvl_tf.evaluation import score_stats


def as_sequences(values, sequences: int) -> np.ndarray:
  """[E] per-episode values in episode order -> [S, L]: row j is sequence (slot) j's episodes in
  the order it played them (episode e = position * S + sequence)."""
  x = np.asarray(values, np.float64).reshape(-1)
  s = int(sequences)
  if s < 1 or x.size == 0 or x.size % s:
    raise ValueError(f"{x.size} episodes do not split into {sequences!r} sequences of equal "
                     f"length")
  return x.reshape(x.size // s, s).T                              # [L, S] -> [S, L]


def split_half_oracle(grid_scores) -> Dict[str, object]:
  """The score of choosing a grid member on half of the sequences and playing it on the other
  half: the member of highest mean on sequences [0, S/2) scored on [S/2, S), and the reverse;
  the mean of the two held-out scores (an unbiased score of "pick the best delta on episodes",
  where the best member in hindsight is biased upward by the choice).

  Args:
    grid_scores: [K, S, L] scores of the K grid members; S even and >= 2.

  Returns:
    {'value', 'first_choice' (index chosen on the first half), 'second_choice' (on the second),
     'per_sequence' [S] (sequence j's mean score under the member chosen on the other half)}.
  """
  g = np.asarray(grid_scores, np.float64)
  if g.ndim != 3 or g.shape[1] < 2 or g.shape[1] % 2:
    raise ValueError(f"grid_scores must be [K, S, L] with S even and >= 2, got {g.shape}")
  half = g.shape[1] // 2
  first, second = g[:, :half].mean(axis=(1, 2)), g[:, half:].mean(axis=(1, 2))  # [K] each
  a, b = int(np.argmax(first)), int(np.argmax(second))            # ties: the first index
  per_sequence = np.concatenate([g[b, :half].mean(-1), g[a, half:].mean(-1)])  # [S]
  return {"value": float(per_sequence.mean()), "first_choice": a, "second_choice": b,
          "per_sequence": per_sequence.tolist()}


def paired_difference(a, b, reps: int = 2000, seed: int = 0) -> Dict[str, float]:
  """Mean of a - b over the same episodes ([S, L] each, or [S] per-sequence means) with a 95%
  CI by rliable's bootstrap over the S sequences (score_stats.aggregate_scores of the
  per-sequence mean differences), and the per-episode standard deviation of the difference
  (None for [S] inputs)."""
  x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
  if x.shape != y.shape or x.ndim not in (1, 2) or x.shape[0] < 1:
    raise ValueError(f"a and b must both be [S, L] or [S], got {x.shape} and {y.shape}")
  diff = x - y
  per_sequence = diff.mean(-1) if diff.ndim == 2 else diff        # [S]
  agg = score_stats.aggregate_scores(per_sequence[:, None], reps=reps, seed=seed)["mean"]
  sd = float(np.std(diff, ddof=1)) if diff.ndim == 2 and diff.size > 1 else None
  return {"mean": float(per_sequence.mean()), "ci_low": agg.ci_low, "ci_high": agg.ci_high,
          "sd_episode": sd}


def power(sd_difference: float, episodes: int, reference_mean: float, relative: float = 0.1,
          level: float = 0.05, target_power: float = 0.8) -> Dict[str, float]:
  """The normal-approximation power calculation of a paired difference of per-episode scores:
  the smallest mean difference `episodes` episodes resolve at a two-sided `level` with
  `target_power`, (z_{1-level/2} + z_power) sd / sqrt(E), and the episodes a difference of
  `relative` x |reference_mean| needs, ceil(((z_{1-level/2} + z_power) sd / d)^2)."""
  sd, e = float(sd_difference), int(episodes)
  if not (np.isfinite(sd) and sd >= 0 and e >= 1):
    raise ValueError(f"need a finite sd >= 0 and episodes >= 1, got {sd_difference!r}, "
                     f"{episodes!r}")
  z = statistics.NormalDist().inv_cdf(1 - level / 2) + statistics.NormalDist().inv_cdf(
      target_power)
  target = relative * abs(float(reference_mean))
  needed = float("inf") if target == 0 else float(np.ceil((z * sd / target) ** 2))
  return {"z_sum": z, "detectable_difference": z * sd / np.sqrt(e),
          "relative_difference": target, "episodes_for_relative": needed}


def settle_episode(entropies, threshold: float) -> Optional[int]:
  """The number of episodes after which a sequence's belief stays settled: the smallest n such
  that the entropy at the end of episode n and of every later episode is below `threshold`;
  None when the last episode's is not."""
  h = np.asarray(entropies, np.float64).reshape(-1)
  if h.size == 0 or not h[-1] < threshold:
    return None
  above = np.flatnonzero(~(h < threshold))
  return int(above[-1] + 2) if above.size else 1


def analyze(grid: Sequence[float], grid_scores, fixed_delta: float, adaptive,
            references: Optional[Mapping[str, object]] = None, belief_entropy=None,
            settle_threshold: Optional[float] = None, reps: int = 2000,
            seed: int = 0) -> Dict[str, object]:
  """docs/headroom.md's numbers of one run.

  Args:
    grid: the K grid deltas.
    grid_scores: [K, S, L] scores of each grid member's fixed-delta policy.
    fixed_delta: Fixed-CCVL's delta (a member of `grid`).
    adaptive: [S, L] the adaptive policy's scores on the same episodes.
    references: name -> [S, L] other policies on the same episodes (e.g. CQL).
    belief_entropy: [S, L] the adaptive belief's entropy after each episode (optional).
    settle_threshold: entropy below which a belief counts as settled (default 0.1 log K).
    reps, seed: the bootstrap's.
  """
  g = np.asarray(grid, np.float64).reshape(-1)
  scores = np.asarray(grid_scores, np.float64)
  ada = np.asarray(adaptive, np.float64)
  if scores.ndim != 3 or scores.shape[0] != g.size or ada.shape != scores.shape[1:]:
    raise ValueError(f"grid_scores must be [K={g.size}, S, L] and adaptive [S, L], got "
                     f"{scores.shape} and {ada.shape}")
  hits = np.flatnonzero(np.isclose(g, fixed_delta, rtol=0, atol=1e-6))
  if hits.size != 1:
    raise ValueError(f"fixed_delta {fixed_delta!r} is not one of the grid's deltas {g.tolist()}")
  fixed_i = int(hits[0])
  means = scores.mean(axis=(1, 2))                                 # [K]
  best = int(np.argmax(means))
  fixed = scores[fixed_i]
  split = split_half_oracle(scores)
  grid_mean = scores.mean(axis=0)                                  # [S, L] the uniform mixture
  out = {
      "grid": g.tolist(), "sequences": int(ada.shape[0]), "episodes_per_sequence":
      int(ada.shape[1]), "member_means": means.tolist(), "fixed_delta": float(g[fixed_i]),
      "fixed_mean": float(fixed.mean()), "adaptive_mean": float(ada.mean()),
      "grid_mean": float(means.mean()), "spread": float(means.max() - means.min()),
      "oracle_delta": float(g[best]), "oracle_mean": float(means[best]),
      "split_half_oracle": split,
      "oracle_minus_fixed": paired_difference(scores[best], fixed, reps, seed),
      "split_half_oracle_minus_fixed": paired_difference(
          np.asarray(split["per_sequence"]), fixed.mean(-1), reps, seed),
      "adaptive_minus_fixed": paired_difference(ada, fixed, reps, seed),
      "adaptive_minus_grid_mean": paired_difference(ada, grid_mean, reps, seed),
  }
  out["power"] = power(out["adaptive_minus_fixed"]["sd_episode"], ada.size, fixed.mean())
  for name, ref in (references or {}).items():
    r = np.asarray(ref, np.float64)
    if r.shape != ada.shape:
      raise ValueError(f"reference {name!r} has shape {r.shape}, expected {ada.shape}")
    out.setdefault("references", {})[name] = {
        "mean": float(r.mean()), "adaptive_minus": paired_difference(ada, r, reps, seed),
        "fixed_minus": paired_difference(fixed, r, reps, seed)}
  if belief_entropy is not None:
    h = np.asarray(belief_entropy, np.float64)
    if h.shape != ada.shape:
      raise ValueError(f"belief_entropy has shape {h.shape}, expected {ada.shape}")
    threshold = 0.1 * np.log(g.size) if settle_threshold is None else float(settle_threshold)
    settled = [settle_episode(row, threshold) for row in h]
    out["belief"] = {"settle_threshold": float(threshold), "settle_episode": settled,
                     "settled_sequences": int(sum(s is not None for s in settled)),
                     "entropy_after_first": float(h[:, 0].mean()),
                     "entropy_after_last": float(h[:, -1].mean())}
  return out
