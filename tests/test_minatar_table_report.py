"""tools/minatar_table_report.py's own logic on hand-made inputs: which IQM CIs are separated,
and CCVL against another method (counts, mean difference, P(improvement))."""
import collections

import ccvl_tf  # noqa: F401

from ccvl_tf.experiments.compare import report as compare_report
from tools import minatar_table_report as tool

Cell = collections.namedtuple("Cell", ["value", "ci_low", "ci_high"])


def test_separated_pairs_are_those_whose_intervals_do_not_overlap():
  cells = {("REM", "1%"): Cell(10, 5, 15), ("CQL", "1%"): Cell(30, 16, 40),   # 16 > 15
           ("CCVL", "1%"): Cell(20, 15, 25),                                  # touches REM
           ("REM", "5%"): Cell(10, 0, 20), ("CQL", "5%"): Cell(12, 1, 21)}
  lines = tool.separated_lines(["1%", "5%"], ["REM", "CQL", "CCVL"], cells)
  assert lines[2:] == ["| 1% | CQL > REM |", "| 5% | none |"]


def test_improvement_lines_count_runs_and_give_p_of_improvement():
  # CCVL at or above CQL in every game and seed; differences
  # +10, +10, 0, +20 -> 3 higher, 1 same, 0 lower, mean +10.0 (by hand).
  rows = []
  for game, seed, ccvl, cql in [("A", 0, 60, 50), ("A", 1, 70, 60), ("B", 0, 40, 40),
                                ("B", 1, 50, 30)]:
    rows += [dict(method="CCVL", dataset="1%", game=game, seed=seed, normalized_score=ccvl),
             dict(method="CQL", dataset="1%", game=game, seed=seed, normalized_score=cql)]
  lines = compare_report.improvement_lines(rows, "CCVL", "CQL", reps=50)
  assert lines[0].endswith("| P(CCVL > CQL) [95% CI] |")
  cells = [c.strip() for c in lines[2].strip("|").split("|")]
  assert cells[:4] == ["1%", "4", "3 / 1 / 0", "+10.0"]
  # Per game, P(x > y) over seed pairs: A: all 4 pairs of (60, 70) vs (50, 60) but 60 vs 60
  # ties (1/2): (1 + 1 + 0.5 + 1) / 4 = 0.875; B: (40, 50) vs (40, 30): 0.5 + 1 + 1 + 1 = 0.875.
  assert cells[4].startswith("0.88 [")
