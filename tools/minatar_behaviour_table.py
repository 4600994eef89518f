"""Did the MinAtar method table's learners learn their data? Each learner's score against the
behaviour policy's score of the data it trained on.

  .venv/bin/python tools/minatar_behaviour_table.py --data_dir=/work/minatar_data \
      [--rows=docs/method_table_rows_minatar.csv] [--methods=BC,CQL,Fixed-CCVL,CCVL] \
      [--datasets=1%,5%] [--seed=0] [--output=behaviour_table.md] \
      [--behaviour_csv=docs/method_table_behaviour_minatar.csv]
  .venv/bin/python tools/minatar_behaviour_table.py \
      --behaviour_from=docs/method_table_behaviour_minatar.csv     # the same, without the data

For every learner x game x data of the per-run rows (the method table's, written by
binaries/compare.py): the raw score of each seed and their mean, the behaviour policy's score
of that game's data (ccvl_tf.data.minatar_behaviour.behaviour_score on the dataset under
--data_dir, run --seed: per checkpoint, the mean raw return of the logged training episodes
the subset loads a transition of, averaged over the checkpoints), the ratio mean / behaviour,
and which seeds reach it; then per learner how many cells (mean) and seeds reach it, and how
many cells reach the two other readings of the behaviour score (episodes pooled over the
checkpoints; per transition), a sensitivity check. Printed as markdown (and written to
--output); --behaviour_csv also writes the behaviour scores, which --behaviour_from reads
instead of the datasets. A game of the rows without a finished dataset under --data_dir is
left out, and the output says so. No training, no evaluation: the learners' scores are the
rows'.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import sys
from typing import Dict, List, Sequence, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import ccvl_tf  # noqa: E402,F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.data import minatar_behaviour  # noqa: E402
from ccvl_tf.data import minatar_datasets  # noqa: E402
from ccvl_tf.experiments.compare import config as compare_config  # noqa: E402
from ccvl_tf.experiments.compare import report as compare_report  # noqa: E402

DEFAULT_ROWS = os.path.join(ROOT, "docs", "method_table_rows_minatar.csv")


def behaviour_scores(data_dir: str, games: Sequence[str], datasets: Sequence[str], seed: int
                     ) -> Dict[Tuple[str, str], minatar_behaviour.BehaviourScore]:
  """{(game, data kind): its behaviour score} for the games with a finished dataset."""
  return {(g, d): minatar_behaviour.behaviour_score(data_dir, g, compare_config.SUBSET_OF_KIND[d],
                                                     seed)
          for g in games if minatar_datasets.is_complete(data_dir, g, seed) for d in datasets}


def cells(rows: Sequence[dict], behaviour: Dict[Tuple[str, str], object],
          methods: Sequence[str], datasets: Sequence[str]) -> List[dict]:
  """One dict per learner x data x game with a behaviour score: the seeds' scores (by seed),
  their mean, the behaviour score, ratio, and which seeds / whether the mean reach it."""
  out = []
  for method in methods:
    for dataset in datasets:
      for game in sorted({g for g, d in behaviour if d == dataset}):
        runs = sorted((r["seed"], r["score"]) for r in rows
                      if (r["method"], r["dataset"], r["game"]) == (method, dataset, game))
        if not runs:
          raise ValueError("the rows hold no run of {} on {} {}".format(method, dataset, game))
        b = behaviour[(game, dataset)]
        scores = [s for _, s in runs]
        mean = float(np.mean(scores))
        out.append(dict(method=method, dataset=dataset, game=game, seeds=[s for s, _ in runs],
                        scores=scores, mean=mean, behaviour=b.score,
                        ratio=mean / b.score if b.score else float("nan"),
                        seeds_reaching=sum(s >= b.score for s in scores),
                        reached=mean >= b.score, reached_pooled=mean >= b.episode_mean,
                        reached_transition_weighted=mean >= b.transition_weighted))
  return out


def behaviour_lines(behaviour: Dict[Tuple[str, str], minatar_behaviour.BehaviourScore]
                    ) -> List[str]:
  lines = ["| Game | Data | behaviour score +- se | episodes pooled | per transition "
           "| checkpoints | episodes | transitions | in the cut-off episode |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
  for (game, dataset), b in sorted(behaviour.items()):
    lines.append("| {} | {} | {:.2f} +- {:.2f} | {:.2f} | {:.2f} | {} | {} | {} | {} |".format(
        game, dataset, b.score, b.score_se, b.episode_mean, b.transition_weighted,
        b.checkpoints, b.episodes, b.transitions, b.cut_off))
  return lines


def cell_lines(table: Sequence[dict]) -> List[str]:
  lines = ["| Learner | Data | Game | score, seeds {} | mean | behaviour | ratio | seeds "
           "reaching |".format(" / ".join(str(s) for s in table[0]["seeds"])),
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
  for c in table:
    mean = "**{:.2f}**".format(c["mean"]) if c["reached"] else "{:.2f}".format(c["mean"])
    lines.append("| {} | {} | {} | {} | {} | {:.2f} | {:.2f} | {} of {} |".format(
        c["method"], c["dataset"], c["game"], " / ".join("{:.2f}".format(s) for s in c["scores"]),
        mean, c["behaviour"], c["ratio"], c["seeds_reaching"], len(c["scores"])))
  return lines


def count_lines(table: Sequence[dict], methods: Sequence[str]) -> List[str]:
  lines = ["| Learner | cells reaching the behaviour score (mean >= it) | seeds reaching it "
           "| cells reaching the pooled-episode reading | cells reaching the per-transition "
           "reading |", "| --- | --- | --- | --- | --- |"]
  for method in methods:
    mine = [c for c in table if c["method"] == method]
    lines.append("| {} | {} of {} | {} of {} | {} of {} | {} of {} |".format(
        method, sum(c["reached"] for c in mine), len(mine),
        sum(c["seeds_reaching"] for c in mine), sum(len(c["scores"]) for c in mine),
        sum(c["reached_pooled"] for c in mine), len(mine),
        sum(c["reached_transition_weighted"] for c in mine), len(mine)))
  return lines


BEHAVIOUR_COLUMNS = ("game", "dataset") + tuple(
    f.name for f in dataclasses.fields(minatar_behaviour.BehaviourScore))


def write_behaviour_csv(path: str, behaviour: Dict[Tuple[str, str], object]) -> None:
  """The behaviour scores as rows (floats at full precision), so the doc's tables recompute
  without the datasets (tests/test_results_tables.py)."""
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(BEHAVIOUR_COLUMNS)
    for (game, dataset), b in sorted(behaviour.items()):
      w.writerow([game, dataset] + [repr(v) for v in dataclasses.astuple(b)])


def read_behaviour_csv(path: str) -> Dict[Tuple[str, str], minatar_behaviour.BehaviourScore]:
  """write_behaviour_csv's file back; ValueError naming the file if its columns differ."""
  with open(path, newline="") as f:
    reader = csv.DictReader(f)
    if tuple(reader.fieldnames or ()) != BEHAVIOUR_COLUMNS:
      raise ValueError("{}: columns {} are not {}".format(path, reader.fieldnames,
                                                          list(BEHAVIOUR_COLUMNS)))
    types = {f.name: f.type for f in dataclasses.fields(minatar_behaviour.BehaviourScore)}
    return {(r["game"], r["dataset"]): minatar_behaviour.BehaviourScore(
        **{k: (int(r[k]) if types[k] in (int, "int") else float(r[k])) for k in types})
            for r in reader}


def render(rows: Sequence[dict], behaviour: Dict[Tuple[str, str], object],
           methods: Sequence[str], datasets: Sequence[str], source: str) -> str:
  """The markdown: behaviour scores, the learner table and the counts; the rows' games that
  have no behaviour score are named as left out."""
  if not behaviour:
    raise ValueError("no behaviour score from {}".format(source))
  missing = sorted({r["game"] for r in rows} - {g for g, _ in behaviour})
  table = cells(rows, behaviour, methods, datasets)
  parts = ["Behaviour policy's score of each subset (raw points; {}):".format(source), ""]
  parts += behaviour_lines(behaviour)
  parts += ["", "Learners (raw points; bold: the mean reaches the behaviour score):", ""]
  parts += cell_lines(table) + ["", "Counts:", ""] + count_lines(table, methods)
  if missing:
    parts += ["", "Left out (no finished dataset in {}): {}".format(source, ", ".join(missing))]
  return "\n".join(parts) + "\n"


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  src = p.add_mutually_exclusive_group(required=True)
  src.add_argument("--data_dir", help="root of the MinAtar datasets")
  src.add_argument("--behaviour_from", help="behaviour scores written by --behaviour_csv "
                   "(instead of the datasets)")
  p.add_argument("--rows", default=DEFAULT_ROWS, help="per-run rows (compare.py's scores.csv)")
  p.add_argument("--methods", default="BC,CQL,Fixed-CCVL,CCVL")
  p.add_argument("--datasets", default="1%,5%")
  p.add_argument("--seed", type=int, default=0, help="the datasets' run (build seed)")
  p.add_argument("--output", default="", help="also write the markdown here")
  p.add_argument("--behaviour_csv", default="", help="also write the behaviour scores here")
  args = p.parse_args(argv)
  rows = compare_report.read_scores_csv(args.rows)
  datasets = args.datasets.split(",")
  if args.data_dir:
    games = sorted({r["game"] for r in rows})
    behaviour = behaviour_scores(args.data_dir, games, datasets, args.seed)
    source = "{}, run {}".format(args.data_dir, args.seed)
  else:
    behaviour = read_behaviour_csv(args.behaviour_from)
    source = args.behaviour_from
  text = render(rows, behaviour, args.methods.split(","), datasets, source)
  sys.stdout.write(text)
  if args.output:
    with open(args.output, "w") as f:
      f.write(text)
  if args.behaviour_csv:
    write_behaviour_csv(args.behaviour_csv, behaviour)


if __name__ == "__main__":
  main()
