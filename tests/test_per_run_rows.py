"""The per-run rows the table tools write beside their tables, on tiny hand-made data:
compare's confidence_rows.csv (one row per CCVL run with its diagnostics), fine-tuning's
runs.csv (one row per run: before, after, gain, the final bounds and penalty figures), and the
peer comparison's export of a DQN Replay-format dataset as d3rlpy episodes (tools/peers,
the part that runs in the project's own environment). Each table recomputes from its rows."""
import csv
import json
import os

import ccvl_tf  # noqa: F401

import numpy as np
import pytest

from ccvl_tf.runtime import training
from ccvl_tf.data import replay_writer
from ccvl_tf.data.frame_store import FrameStore
from ccvl_tf.experiments.compare import report as compare_report
from ccvl_tf.experiments.online import finetune_report
from ccvl_tf.experiments.online import finetune_suite
from tools.peers import peer_data


# ------------------------------------------------------------------------------ compare
def _result(method, dataset, game, seed, normalized, diagnostics=None):
  row = dict(method=method, dataset=dataset, game=game, seed=seed, score=normalized / 10,
             normalized_score=normalized, train_steps=10, train_seconds=1.0,
             eval_seconds=1.0)
  if diagnostics is not None:
    row["diagnostics"] = diagnostics
  return row


def test_compare_writes_the_ccvl_runs_diagnostics_and_confidence_md_recomputes(tmp_path):
  """2 games x 2 seeds of CQL, CCVL and Fixed-CCVL; only CCVL's results carry diagnostics
  (as units.evaluate_unit writes them). confidence_rows.csv has exactly the 4 CCVL runs with
  their numbers, and confidence.md recomputes from scores.csv + confidence_rows.csv."""
  out = str(tmp_path)
  results = []
  for gi, game in enumerate(("Breakout", "Asterix")):
    for seed in (0, 1):
      k = 2 * gi + seed
      diag = {"family_spread": -0.125 * k, "lemma1_fraction": 0.25 * seed,
              "family_differs_any": 0.5 + 0.125 * k, "count_auc_random_policy": 0.5,
              "note": "not a number: left out"}
      results += [_result("CQL", "1%", game, seed, 10.0 * k),
                  _result("CCVL", "1%", game, seed, 20.0 + 2.5 * k, diag),
                  _result("Fixed-CCVL", "1%", game, seed, 20.0 - 2.5 * k)]
  for r in results:
    path = os.path.join(out, "results", r["method"], "1pct", r["game"], f"seed_{r['seed']}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
      json.dump(r, f)
  paths = compare_report.write_outputs(out, "minatar", reps=50)
  with open(paths["confidence_rows"], newline="") as f:
    rows = list(csv.DictReader(f))
  assert [(r["method"], r["game"], r["seed"]) for r in rows] == [
      ("CCVL", "Asterix", "0"), ("CCVL", "Asterix", "1"),
      ("CCVL", "Breakout", "0"), ("CCVL", "Breakout", "1")]
  assert "note" not in rows[0]
  asterix_1 = rows[1]  # game index 1, seed 1: k = 3
  assert float(asterix_1["family_spread"]) == -0.375
  assert float(asterix_1["family_differs_any"]) == 0.875
  assert float(asterix_1["normalized_score"]) == 27.5
  recomputed = compare_report.confidence_table(compare_report.merge_confidence_rows(
      compare_report.read_scores_csv(paths["scores"]),
      compare_report.read_confidence_csv(paths["confidence_rows"])), reps=50)
  assert recomputed == open(paths["confidence"]).read()
  # Adaptive (CCVL 20, 22.5, 25, 27.5) is above fixed (20, 17.5, 15, 12.5) in 3 runs, level
  # in 1; mean difference (0 + 5 + 10 + 15) / 4 = +7.5.
  assert "| 1% | 4 | 3 / 1 / 0 | +7.5 |" in recomputed


# ------------------------------------------------------------------------------ fine-tuning
def test_finetune_report_writes_one_row_per_run_and_the_table_recomputes(tmp_path):
  """Breakout (random 0.5, DQN 2.5: normalized = 50 (raw - 0.5)); CQL and CCVL, 2 seeds.
  CQL seed 0: raw 1.5 -> 2.5 = 50 -> 100, gain +50; seed 1: 0.5 -> 0.5, gain 0.
  CCVL seed 0: 1.5 -> 1.5, gain 0; seed 1: 1.5 -> 2.5, gain +50; its final row has a bound
  share and a penalty weight, which runs.csv carries."""
  data = str(tmp_path / "data")
  os.makedirs(data)
  with open(os.path.join(data, "minatar_scores.json"), "w") as f:
    json.dump({"games": {"Breakout": dict(random=0.5, dqn=2.5, runs={})}}, f)
  cfg = finetune_suite.FinetuneSuiteConfig(
      compare_dir=str(tmp_path), data_dir=data, output_dir=str(tmp_path / "out"),
      games=("Breakout",), seeds=("0", "1"), methods=("cql", "ccvl"), bootstrap_reps=200)
  raw = {("cql", 0): (1.5, 2.5), ("cql", 1): (0.5, 0.5),
         ("ccvl", 0): (1.5, 1.5), ("ccvl", 1): (1.5, 2.5)}
  for (method, seed), (before, after) in raw.items():
    root = finetune_suite.run_dir(cfg, method, "Breakout", seed)
    os.makedirs(root)
    key = "lower_mean_score" if method == "cql" else "adaptive_mean_score"
    training.record_evaluation(root, 100, {key: before, "online_env_steps": 0.0})
    final = {key: after, "online_env_steps": 400.0}
    if method == "ccvl":
      final.update({"tight/lower_holds@0.5": 0.75, "penalty/lower_weight_new": 0.0625,
                    "bounds_mean_score": 1.5})
    training.record_evaluation(root, 200, final)
    with open(os.path.join(root, "summary.json"), "w") as f:
      json.dump({"final_step": 200, "step": 200, "throughput": {}}, f)
  out = finetune_report.write_report(cfg, log=lambda s: None)
  with open(out["runs"], newline="") as f:
    rows = {(r["method"], r["seed"]): r for r in csv.DictReader(f)}
  assert sorted(rows) == [("ccvl", "0"), ("ccvl", "1"), ("cql", "0"), ("cql", "1")]
  cql0, ccvl1 = rows[("cql", "0")], rows[("ccvl", "1")]
  assert (float(cql0["before"]), float(cql0["after"]), float(cql0["gain"])) == (50, 100, 50)
  assert (float(cql0["before_score"]), float(cql0["after_score"])) == (1.5, 2.5)
  assert float(ccvl1["gain"]) == 50 and float(ccvl1["online_env_steps"]) == 400
  assert float(ccvl1["tight/lower_holds@0.5"]) == 0.75
  assert float(ccvl1["penalty/lower_weight_new"]) == 0.0625
  assert float(ccvl1["bounds_normalized_score"]) == 50.0  # raw 1.5
  assert cql0["tight/lower_holds@0.5"] == ""
  # The table's aggregate, per-game and tightness lines, from runs.csv alone.
  pairs = finetune_report.read_runs_csv(out["runs"])
  table = open(out["table"]).read()
  for lines in (finetune_report.aggregate_lines(cfg, pairs),
                finetune_report.per_game_lines(cfg, pairs),
                finetune_report.tightness_lines(cfg, pairs)):
    assert "\n".join(lines) in table
  assert "| Breakout | CQL | 25.0 ± 25.0 | 50.0 ± 50.0 | 25.0 ± 25.0 |" in table
  # CCVL's bound share at delta 0.5 (0.75 in both runs) comes back from runs.csv.
  assert ("| Breakout | CCVL (bounds) | 0.5 | - | - | 0.750 | - | - |"
          in finetune_report.tightness_lines(cfg, pairs))


# ------------------------------------------------------------------------------ peer export
def _write_dataset(path, episodes, capacity=1000):
  """Episodes of (length, terminated); frame t of episode e is filled with 10 e + t + 1 (never
  0, so a padding frame is told apart); action t % 4, reward t % 2. Returns the store."""
  w = replay_writer.DopamineReplayWriter(path, replay_capacity=capacity,
                                         observation_shape=(84, 84))
  for e, (length, terminated) in enumerate(episodes):
    for t in range(length):
      w.add(np.full((84, 84), 10 * e + t + 1, np.uint8), t % 4, float(t % 2),
            terminated and t == length - 1)
  w.close()
  return FrameStore.from_replay(path, num_actions=4)


def test_peer_export_gives_d3rlpy_exactly_our_transitions(tmp_path):
  """Two terminated episodes (5 and 6 steps) and one cut off (4 steps). Our store has 5 + 6 +
  3 valid transitions (the cut-off episode's last step has no next frame); the export is three
  episodes, the last one with that next frame appended and a timeout flag."""
  store = _write_dataset(str(tmp_path / "ds"), [(5, True), (6, True), (4, False)])
  assert store.num_transitions == 14
  arrays = peer_data.episodes_from_store(store)
  assert arrays["observations"].shape == (15, 1, 84, 84)
  assert arrays["terminals"].tolist() == [0] * 4 + [1] + [0] * 5 + [1] + [0] * 4
  assert arrays["timeouts"].tolist() == [0] * 14 + [1]
  firsts = arrays["observations"][[0, 5, 11], 0, 0, 0].tolist()
  assert firsts == [1, 11, 21]  # each episode starts at its first frame
  assert arrays["actions"][:5].tolist() == [0, 1, 2, 3, 0]
  assert arrays["rewards"][5:11].tolist() == [0, 1, 0, 1, 0, 1]
  # d3rlpy's rule on the second episode's first and third steps: zeros before the episode.
  stacks = peer_data.d3rlpy_stacks(arrays["observations"], 5, np.array([5, 7]))
  assert stacks[0, 0, 0].tolist() == [0, 0, 0, 11]
  assert stacks[1, 0, 0].tolist() == [0, 11, 12, 13]
  assert peer_data.check_stacks(store, arrays) == 14
  peer_data.write(arrays, str(tmp_path / "out"), {"num_actions": 4})
  assert np.array_equal(np.load(str(tmp_path / "out" / "observations.npy")),
                        arrays["observations"])


def test_peer_export_check_catches_a_wrong_frame_or_a_lost_history(tmp_path):
  store = _write_dataset(str(tmp_path / "ds"), [(5, True), (6, True), (4, False)])
  arrays = peer_data.episodes_from_store(store)
  arrays["observations"][7, 0, 3, 3] += 1
  with pytest.raises(ValueError, match="observation differs"):
    peer_data.check_stacks(store, arrays)
  # Checkpoints of 12 slots: an episode continues across a checkpoint seam, where our store
  # keeps the real history but a d3rlpy episode would start from zeros: refused.
  store = _write_dataset(str(tmp_path / "ds2"), [(20, True)], capacity=12)
  with pytest.raises(ValueError, match="differs from the frame store"):
    peer_data.check_stacks(store, peer_data.episodes_from_store(store))
