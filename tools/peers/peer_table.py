"""The peer comparison's outputs: episodes.csv (one row per evaluation episode) and the table
made from it with the demo table's statistics (ccvl_tf.experiments.offline.demo_report:
mean raw score and its 95% bootstrap CI over episodes, rliable). Imported by peers.py and by
tests/test_results_tables.py, which recomputes the committed table and the docs' peer numbers
from the committed episodes.csv."""
from __future__ import annotations

import csv
from typing import List, Sequence

EPISODE_COLUMNS = ("policy", "algo", "train_seed", "episode", "env_seed", "raw_score", "length")


def write_episodes(path: str, rows: Sequence[dict]) -> None:
  with open(path, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=EPISODE_COLUMNS)
    w.writeheader()
    for r in rows:
      w.writerow({k: r[k] for k in EPISODE_COLUMNS})


def read_episodes(path: str) -> List[dict]:
  """episodes.csv back (episode, env_seed, length int; raw_score float)."""
  with open(path, newline="") as f:
    return [dict(r, episode=int(r["episode"]), env_seed=int(r["env_seed"]),
                 raw_score=float(r["raw_score"]), length=int(r["length"]))
            for r in csv.DictReader(f)]


def table_rows(episodes: Sequence[dict]) -> List[dict]:
  """One row per policy (in order of appearance): demo_report.score_row of its episodes."""
  from ccvl_tf.experiments.offline import demo_report  # pylint: disable=g-import-not-at-top
  names = list(dict.fromkeys(r["policy"] for r in episodes))
  return [demo_report.score_row(n, [r["raw_score"] for r in episodes if r["policy"] == n])
          for n in names]


def render_table(episodes: Sequence[dict], game: str, note: str) -> str:
  from ccvl_tf.experiments.offline import demo_report  # pylint: disable=g-import-not-at-top
  return demo_report.render(table_rows(episodes), game, note)
