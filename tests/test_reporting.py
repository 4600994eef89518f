"""Tests for ccvl_tf/evaluation/reporting.py: the results CSV and the paper's tables as markdown."""
import io

import ccvl_tf  # noqa: F401

import numpy as np
import pytest
import scipy.stats

from ccvl_tf.evaluation import reporting


# ----------------------------------------------------------------------------- tables
CSV = """method,dataset,game,seed,score
CQL,1%,Breakout,0,41.6
CQL,1%,Breakout,1,81.5
CQL,1%,Breakout,2,121.4
CQL,1%,Pong,0,-0.9
CQL,1%,Pong,1,-0.9
CQL,1%,Pong,2,18.9
CCVL,1%,Breakout,0,201.45
CCVL,1%,Breakout,1,201.45
CCVL,1%,Breakout,2,201.45
CCVL,1%,Pong,0,18.9
CCVL,1%,Pong,1,18.9
CCVL,1%,Pong,2,18.9
CCVL,1%,YarsRevenge,0,5000
CCVL,1%,YarsRevenge,1,5000
CCVL,1%,YarsRevenge,2,5000
"""


def test_per_game_table_by_hand():
  rows = reporting.read_results_csv(io.StringIO(CSV))
  md = reporting.render_per_game_table(rows, "1%")
  lines = md.strip().splitlines()
  assert lines[0] == "| Game | CQL | CCVL |"  # paper's method order
  # CQL Breakout: mean (41.6 + 81.5 + 121.4) / 3 = 81.5, sample std = 39.9.
  assert lines[2] == "| Breakout | 81.5 ± 39.9 | 201.4 ± 0.0 |" or \
      lines[2] == "| Breakout | 81.5 ± 39.9 | 201.5 ± 0.0 |"
  # Pong CQL: mean (-0.9 -0.9 + 18.9)/3 = 5.7; std = sqrt(((6.6^2)*2 + 13.2^2)/2) = 11.43.
  assert lines[3] == "| Pong | 5.7 ± 11.4 | 18.9 ± 0.0 |"
  assert lines[4] == "| YarsRevenge | - | 5000.0 ± 0.0 |"


def test_aggregate_table_matches_independent_iqm():
  rows = reporting.read_results_csv(io.StringIO(CSV))
  md = reporting.render_aggregate_table(rows, reps=300, seed=0)
  # CQL normalized: Breakout (41.6, 81.5, 121.4) -> (10, 20, 30); Pong (-0.9, -0.9, 18.9) ->
  # (50, 50, 100). IQM of the 6 pooled [10,20,30,50,50,100], trimmed 1 each side = 37.5.
  cql = np.array([[10, 50], [20, 50], [30, 100]], float)
  assert scipy.stats.trim_mean(cql.ravel(), 0.25) == pytest.approx(37.5)
  # CCVL: Breakout 50 x3, Pong 100 x3 -> IQM of [50,50,50,100,100,100] trimmed = 75.
  row = md.splitlines()[2]
  assert row.startswith("| 1% | 37.5 (")
  assert "| **75.0 (75.0, 75.0)** |" in row  # best is bold; zero-width CI (identical runs)
  assert "Excluded (no reference score): YarsRevenge" in md
  with pytest.raises(ValueError, match="lacks columns"):
    reporting.read_results_csv(io.StringIO("method,game\nA,Pong\n"))


def test_results_csv_round_trip(tmp_path):
  rows = [dict(method="CCVL", dataset="1%", game="Pong", seed=0, score=18.123456789),
          dict(method="CCVL", dataset="1%", game="Pong", seed=1, score=-3.0)]
  reporting.write_results_csv(str(tmp_path / "results.csv"), rows)
  back = reporting.read_results_csv(str(tmp_path / "results.csv"))
  assert [(r["seed"], r["score"]) for r in back] == [("0", 18.1235), ("1", -3.0)]
  assert reporting.ordered(["Pong", "Zaxxon", "Alien", "Pong", "Breakout"],
                           ("Breakout", "Pong")) == ["Breakout", "Pong", "Alien", "Zaxxon"]
