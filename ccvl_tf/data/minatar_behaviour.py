"""The behaviour policy's score of a subset of a MinAtar dataset: how well the policy that
logged the transitions a subset loads played, from the dataset's own records.

Why: an offline learner that imitates or improves on its data should at least reach the
score of the policy that generated that data; this is the yardstick for "did it learn its
data". More in docs/minatar.md, "The behaviour policy's score of a subset".

Which env step a slot holds. The DQN of :mod:`ccvl_tf.data.minatar_dqn` adds env step ``t``
(0-based; one transition per step, no padding with stack size 1) to the writer as its add
number ``t``; add ``t`` goes to slot ``t mod C`` (C the checkpoint capacity), and checkpoint
``k`` is logged when the add count reaches ``A_k = (k + 1) C - 1``, except the last, logged
by ``close`` after all ``N`` steps (``A_k = N``): so ``A_k = min((k + 1) C - 1, N)``, and slot
``j`` of checkpoint ``k`` holds the newest step ``t < A_k`` with ``t = j (mod C)``
(:func:`slot_steps`). Which slots a subset loads is what the frame store loads
(``replay_plan.load_plan`` of the subset's plan). Every call checks this mapping against the
data: each loaded slot's terminal flag must be 1 exactly when its step ends a logged
training episode (ValueError naming the directory and checkpoint otherwise).

Which episode a step belongs to: ``summary.json`` records the raw (unclipped) return and the
length of every complete training episode in order, so episode ``e`` covers steps
``[L_0 + .. + L_{e-1}, L_0 + .. + L_e)``; steps after the last complete episode belong to
the run's cut-off last episode, whose return is not recorded (:func:`episode_of_steps`).
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import List, Sequence

import numpy as np

from ccvl_tf.data import minatar_datasets
from ccvl_tf.data import replay_plan


@dataclasses.dataclass(frozen=True)
class BehaviourScore:
  """The behaviour policy's score of one subset of one dataset (raw game points).

  ``score`` (the yardstick of the tables): per checkpoint, the mean raw return of the complete
  logged training episodes of which the subset loads at least one transition from that
  checkpoint; then the mean over the checkpoints that have one. Why per checkpoint: the
  subset's transitions come from K snapshots of the logging DQN (one window of consecutive
  steps per checkpoint, the same number of transitions from each), so its behaviour policy is
  the equal mixture of those snapshots, and each snapshot's return is estimated by the
  episodes it was playing in its window. ``score_se``: the standard error of that mean over
  the checkpoints (sample std / sqrt(checkpoints)).

  Two other readings, as sensitivity checks: ``episode_mean``, every episode the subset
  touches counted once, pooled over checkpoints (weights the snapshots by how many episodes
  their windows hold: early, near-random snapshots play short episodes and get more weight);
  ``transition_weighted``, the mean over the loaded transitions of their episode's return
  (long episodes weighted by their share of the transitions).

  Counts: ``checkpoints`` in ``score``, distinct ``episodes``, loaded ``transitions``, and
  ``cut_off``, the loaded transitions of the run's cut-off last episode (its return is not
  recorded: in no mean).
  """
  score: float
  score_se: float
  episode_mean: float
  transition_weighted: float
  checkpoints: int
  episodes: int
  transitions: int
  cut_off: int


def slot_steps(capacity: int, num_steps: int, index: int) -> np.ndarray:
  """int64 [capacity]: the env step (0-based) whose transition slot ``j`` of checkpoint
  ``index`` holds, -1 for a slot never written, for a run of ``num_steps`` steps logged into
  checkpoints of ``capacity`` slots (the module docstring derives it)."""
  if capacity < 2 or num_steps < 1 or index < 0:
    raise ValueError("need capacity >= 2, num_steps >= 1 and index >= 0, got {}, {}, "
                     "{}".format(capacity, num_steps, index))
  adds = min((index + 1) * capacity - 1, num_steps)
  if index * capacity > adds:
    raise ValueError("a run of {} steps has no checkpoint {} of {} slots".format(
        num_steps, index, capacity))
  j = np.arange(capacity, dtype=np.int64)
  steps = j + capacity * np.floor_divide(adds - 1 - j, capacity)
  return np.where(steps >= 0, steps, -1)


def episode_of_steps(lengths: Sequence[int], steps: np.ndarray) -> np.ndarray:
  """int64 like ``steps``: the index of the complete episode (lengths in order) containing
  each step, -1 for a step after the last complete episode (the cut-off one)."""
  ends = np.cumsum(np.asarray(lengths, np.int64))     # episode e covers [ends[e-1], ends[e])
  steps = np.asarray(steps, np.int64)
  if steps.size and steps.min() < 0:
    raise ValueError("steps must be >= 0, got {}".format(int(steps.min())))
  episode = np.searchsorted(ends, steps, side="right")
  return np.where(episode < len(ends), episode, -1)


def score_of_windows(windows: Sequence[np.ndarray], returns: Sequence[float],
                     lengths: Sequence[int]) -> BehaviourScore:
  """:class:`BehaviourScore` of a subset that loads, from each checkpoint, the transitions at
  the env steps of one entry of ``windows``, in a run whose complete episodes had these raw
  ``returns`` and ``lengths``. ValueError if no step lies in a complete episode."""
  if len(returns) != len(lengths):
    raise ValueError("{} episode returns but {} lengths".format(len(returns), len(lengths)))
  rets = np.asarray(returns, np.float64)
  episodes = [episode_of_steps(lengths, w) for w in windows]
  inside = [e[e >= 0] for e in episodes]
  window_means = [rets[np.unique(e)].mean() for e in inside if e.size]
  if not window_means:
    raise ValueError("none of the {} steps lies in a complete episode".format(
        sum(e.size for e in episodes)))
  pooled = np.concatenate(inside)
  se = (float(np.std(window_means, ddof=1) / np.sqrt(len(window_means)))
        if len(window_means) > 1 else float("nan"))
  return BehaviourScore(
      score=float(np.mean(window_means)), score_se=se,
      episode_mean=float(rets[np.unique(pooled)].mean()),
      transition_weighted=float(rets[pooled].mean()), checkpoints=len(window_means),
      episodes=int(np.unique(pooled).size), transitions=int(sum(e.size for e in episodes)),
      cut_off=int(sum((e < 0).sum() for e in episodes)))


def subset_steps(replay_dir: str, subset: str, capacity: int, num_steps: int,
                 lengths: Sequence[int]) -> List[np.ndarray]:
  """Per checkpoint of ``subset``'s plan, int64 [M_k]: the env steps of the transitions the
  frame store loads from it for ``subset`` of ``replay_dir``, after checking each one's
  terminal flag against the episode ``lengths``."""
  ends = np.cumsum(np.asarray(lengths, np.int64))
  if ends.size and ends[-1] > num_steps:
    raise ValueError("{}: the summary's episodes last {} steps, more than the run's {}".format(
        replay_dir, int(ends[-1]), num_steps))
  info, plan = replay_plan.select_plan(replay_dir, subset)
  loaded = replay_plan.load_plan(info, plan)
  episode_last = np.zeros(num_steps, bool)
  episode_last[ends - 1] = True
  out = []
  for chunk in loaded.chunks:
    slots = chunk.slots if chunk.order is None else chunk.order[chunk.slots]
    steps = slot_steps(capacity, num_steps, chunk.suffix)[slots]
    flags = chunk.terminal[chunk.slots] != 0
    if (steps < 0).any() or (flags != episode_last[np.maximum(steps, 0)]).any():
      raise ValueError(
          "{}, checkpoint {}: its terminal flags do not match the episode ends of the run's "
          "summary ({} steps, {} slots per checkpoint); the slot-to-step mapping of "
          "ccvl_tf/data/minatar_behaviour.py does not describe this dataset".format(
              replay_dir, chunk.suffix, num_steps, capacity))
    out.append(steps)
  return out


def behaviour_score(output_dir: str, game: str, subset: str, seed: int = 0) -> BehaviourScore:
  """:class:`BehaviourScore` of ``subset`` ("1%", "5%", "initial10%", "all") of the finished
  dataset of ``game`` and ``seed`` under ``output_dir`` (the layout of
  binaries/make_minatar_datasets.py). FileNotFoundError naming the directory if it is not
  finished (no COMPLETE marker)."""
  rdir = minatar_datasets.run_dir(output_dir, game, seed)
  if not minatar_datasets.is_complete(output_dir, game, seed):
    raise FileNotFoundError("{} holds no finished dataset (no {} marker); build it with "
                            "binaries/make_minatar_datasets.py".format(
                                rdir, minatar_datasets.COMPLETE_FILENAME))
  with open(os.path.join(rdir, minatar_datasets.SUMMARY_FILENAME)) as f:
    summary = json.load(f)
  lengths = summary["train_episode_lengths"]
  num_steps = int(summary["settings"]["steps"])
  windows = subset_steps(minatar_datasets.replay_dir(output_dir, game, seed), subset,
                         int(summary["checkpoint_capacity"]), num_steps, lengths)
  return score_of_windows(windows, summary["train_episode_returns"], lengths)

