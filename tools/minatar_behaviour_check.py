"""Checks the behaviour policy's score of a built MinAtar dataset's prefix subsets ("1%", "5%")
against a plain loop over its records: ccvl_tf.data.minatar_behaviour.behaviour_score must give
the same counts and means.

  .venv/bin/python tools/minatar_behaviour_check.py --data_dir=DIR [--games=Breakout,...] \
      [--subsets=1%,5%] [--seed=0]

DIR is a root of binaries/make_minatar_datasets.py (the method table's data: 100,000 steps per
game, 20 checkpoints of 5,001 slots, "1%" = the first 50 slots of each). One line per game and
subset, OK or what differs; exit status 1 if any differs or a game has no finished dataset.
tests/test_minatar_behaviour.py runs the same check on a small dataset it builds; this tool is
for the real data, which CI does not have.

The plain loop reads only summary.json. The run logs env step t as add t of the writer, and
checkpoint k is logged after add (k + 1) C - 1 (C slots; the last one at the run's end), so the
first slots j of checkpoint k hold steps C k + j; a prefix subset of R slots loads the
transitions of slots 0 .. R - 2 (slot R - 1 is only the last one's next state). Each step's
episode is found by walking the recorded episode lengths; a step after the last complete episode
is the cut-off one (in no mean).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import ccvl_tf  # noqa: E402,F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.data import minatar_behaviour  # noqa: E402
from ccvl_tf.data import minatar_datasets  # noqa: E402

PREFIX_SUBSETS = ("1%", "5%")


def plain_loop(data_dir: str, game: str, subset: str, seed: int = 0) -> Dict[str, float]:
  """The behaviour score's fields (minatar_behaviour.BehaviourScore) of prefix subset `subset`
  of a finished dataset, from its summary.json alone (the module docstring)."""
  with open(os.path.join(minatar_datasets.run_dir(data_dir, game, seed),
                         minatar_datasets.SUMMARY_FILENAME)) as f:
    summary = json.load(f)
  steps, capacity = summary["settings"]["steps"], summary["checkpoint_capacity"]
  checkpoints = summary["settings"]["num_checkpoints"]
  rows = summary["subsets"][subset][0]
  lengths, returns = summary["train_episode_lengths"], summary["train_episode_returns"]
  if rows is None or rows >= capacity - 1 or capacity * (checkpoints - 1) + rows > steps:
    raise ValueError(f"{subset!r} of {game} is not a prefix that every checkpoint holds "
                     f"whole ({rows} of {capacity} slots, {steps} steps)")
  starts, t = [], 0
  for n in lengths:
    starts.append(t)
    t += n

  def episode(step):
    for e in range(len(starts) - 1, -1, -1):
      if starts[e] <= step:
        return e if step < starts[e] + lengths[e] else None
    return None

  means: List[float] = []
  pooled, per_transition, transitions, cut_off = set(), [], 0, 0
  for k in range(checkpoints):
    mine = set()
    for step in range(capacity * k, capacity * k + rows - 1):
      transitions += 1
      e = episode(step)
      if e is None:
        cut_off += 1
        continue
      mine.add(e)
      per_transition.append(returns[e])
    if mine:
      means.append(sum(returns[e] for e in mine) / len(mine))
    pooled |= mine
  mean = sum(means) / len(means)
  se = (math.sqrt(sum((m - mean) ** 2 for m in means) / (len(means) - 1) / len(means))
        if len(means) > 1 else float("nan"))
  return dict(score=mean, score_se=se,
              episode_mean=sum(returns[e] for e in pooled) / len(pooled),
              transition_weighted=sum(per_transition) / len(per_transition),
              checkpoints=len(means), episodes=len(pooled), transitions=transitions,
              cut_off=cut_off)


def differences(data_dir: str, game: str, subset: str, seed: int = 0) -> List[str]:
  """What behaviour_score gives otherwise than the plain loop ([] when they agree: counts
  exactly, means to 1e-9 relative)."""
  want = plain_loop(data_dir, game, subset, seed)
  got = minatar_behaviour.behaviour_score(data_dir, game, subset, seed)
  out = []
  for name, value in want.items():
    mine = getattr(got, name)
    same = (mine == value if isinstance(value, int) else
            (math.isnan(mine) and math.isnan(value))
            or math.isclose(mine, value, rel_tol=1e-9, abs_tol=1e-12))
    if not same:
      out.append(f"{name}: behaviour_score {mine!r}, plain loop {value!r}")
  return out


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--data_dir", required=True,
                 help="a root of binaries/make_minatar_datasets.py")
  p.add_argument("--games", default="Breakout", help="comma-separated")
  p.add_argument("--subsets", default=",".join(PREFIX_SUBSETS), help="prefix subsets")
  p.add_argument("--seed", type=int, default=0)
  args = p.parse_args(argv)
  bad = 0
  for game in [g.strip() for g in args.games.split(",") if g.strip()]:
    if not minatar_datasets.is_complete(args.data_dir, game, args.seed):
      print(f"{game}: no finished dataset under {args.data_dir} (seed {args.seed})")
      bad += 1
      continue
    for subset in [s.strip() for s in args.subsets.split(",") if s.strip()]:
      found = differences(args.data_dir, game, subset, args.seed)
      bad += bool(found)
      print(f"{game} {subset}: " + ("; ".join(found) if found else "OK"))
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main())
