"""The five-seed table from the seeds' headroom evaluations (seeds_headroom), on a hand-made
headroom.json whose numbers are worked out below."""
import numpy as np
import pytest

from ccvl_tf.experiments.offline import seeds_headroom as sh

# Two grid members, S = 2 sequences x L = 2 episodes; episode e is position e // 2 of sequence
# e % 2, so [a, b, c, d] is sequence 0 = [a, c], sequence 1 = [b, d].
RESULT = {
    "grid": [0.25, 0.75], "sequences": 2, "episodes_per_sequence": 2, "fixed_delta": 0.25,
    "oracle_delta": 0.75, "spread": 0.5, "belief_temperature": 0.5, "seed": 70000,
    "epsilon": 0.001, "max_steps": 2000,
    "belief": {"settled_sequences": 1, "settle_episode": [1, None]},
    "policies": {"delta=0.2500": [1, 2, 3, 4],      # seq 0 [1, 3], seq 1 [2, 4]; mean 2.5
                 "delta=0.7500": [6, 0, 6, 0],      # seq 0 [6, 6], seq 1 [0, 0]; mean 3.0
                 "CCVL (adaptive)": [2, 2, 2, 2], "cql": [0, 0, 0, 0]}}


def test_rows_by_hand():
  seqs = sh.policy_sequences(RESULT)
  assert list(seqs) == ["CQL", "CCVL (adaptive)", "Fixed-CCVL", "oracle in hindsight",
                        "split-half oracle"]
  np.testing.assert_array_equal(seqs["Fixed-CCVL"], [[1, 3], [2, 4]])
  np.testing.assert_array_equal(seqs["oracle in hindsight"], [[6, 6], [0, 0]])  # mean 3 > 2.5
  # Chosen on sequence 0: delta 0.75 (6 > 2); on sequence 1: delta 0.25 (3 > 0). Sequence 0 is
  # played by sequence 1's choice ([1, 3]) and sequence 1 by sequence 0's ([0, 0]).
  np.testing.assert_array_equal(seqs["split-half oracle"], [[1, 3], [0, 0]])
  rows = {r["policy"]: r for r in sh.seed_rows(RESULT, reps=200)}
  assert rows["Fixed-CCVL"]["mean"] == 2.5 and rows["split-half oracle"]["mean"] == 1.0
  assert rows["oracle in hindsight"]["mean"] == 3.0 and rows["CQL"]["mean"] == 0.0
  assert rows["CCVL (adaptive)"]["ci_low"] == rows["CCVL (adaptive)"]["ci_high"] == 2.0
  assert all(r["episodes"] == 4 for r in rows.values())


def test_pooled_difference_by_hand():
  # Adaptive - Fixed per sequence: [2, 2] - [1, 3] -> 0, [2, 2] - [2, 4] -> -1; two seeds
  # (the second shifted by +4 in adaptive) pool four sequences: 0, -1, 4, 3 -> mean 1.5.
  other = dict(RESULT, policies=dict(RESULT["policies"], **{"CCVL (adaptive)": [6, 6, 6, 6]}))
  d = sh.pooled_difference({"0": RESULT, "1": other}, "CCVL (adaptive)", "Fixed-CCVL", reps=200)
  assert d["mean"] == pytest.approx(1.5)
  assert -1.0 <= d["ci_low"] <= d["mean"] <= d["ci_high"] <= 4.0
  # One seed alone: -0.5.
  assert sh.pooled_difference({"0": RESULT}, "CCVL (adaptive)", "Fixed-CCVL",
                              reps=200)["mean"] == pytest.approx(-0.5)


def test_report_and_settings_check():
  other = dict(RESULT, policies=dict(RESULT["policies"], **{"CCVL (adaptive)": [6, 6, 6, 6]}))
  text = sh.report({"0": RESULT, "1": other}, reps=200)
  assert "| CCVL (adaptive) | 2.00 (2.00, 2.00) | 6.00 (6.00, 6.00) | 4.00 |" in text, text
  assert "P(CCVL (adaptive) > Fixed-CCVL) over the 2 seeds' means:" in text
  assert "- CCVL (adaptive) - Fixed-CCVL: +1.50 (" in text
  assert "| 0 | 0.2500 | 0.7500 | 0.50 | 0.5 | 1 of 2 (after 1, -) |" in text
  assert sh.check_same_episodes({"0": RESULT, "1": other}) == []
  assert sh.check_same_episodes({"0": RESULT, "1": dict(other, seed=1)}) == ["1"]
  assert set(sh.compact(RESULT)) == set(RESULT)


def test_summary_table_by_hand():
  other = dict(RESULT, policies=dict(RESULT["policies"], **{"CCVL (adaptive)": [6, 6, 6, 6]}))
  table = sh.summary_table({"0": RESULT, "1": other}, reps=200)
  assert table.splitlines()[0].endswith("| per-seed means (seeds 0-1) |")
  # Adaptive: 2 and 6 -> mean 4, SD sqrt(8) = 2.83, range [2, 6].
  row = [l for l in table.splitlines() if l.startswith("| CCVL (adaptive) |")][0]
  assert row.startswith("| CCVL (adaptive) | 4.00 | 2.83 | [2.00, 6.00] | (") and \
      row.endswith("| 2.0, 6.0 |"), row
