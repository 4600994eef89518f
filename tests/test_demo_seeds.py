"""The demo over several training seeds (binaries/demo_seeds.py,
ccvl_tf/experiments/offline/demo_seeds.py): the across-seed statistics and orderings by hand,
flag errors, and end to end on tiny settings (two seeds on one collected dataset)."""
import csv
import json
import os
import subprocess
import sys

import pytest

from ccvl_tf.experiments.offline import demo_seeds
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _row(policy, mean, episodes=10):
  return {"policy": policy, "episodes": episodes, "mean": mean, "ci_low": mean - 1.0,
          "ci_high": mean + 1.0}


def test_across_seeds_by_hand(tmp_path):
  """CCVL 8, 10, 12 over three seeds: mean 10, SD 2, range [8, 12]; BC 9, 9, 13: above CCVL
  in seeds 0 and 2, below in seed 1; a row one seed lacks is left out."""
  per_seed = {
      "0": [_row("random", 1.0), _row("BC", 9.0), _row("CCVL (adaptive)", 8.0)],
      "1": [_row("random", 1.0), _row("BC", 9.0), _row("CCVL (adaptive)", 10.0),
            _row("behaviour (scripted, epsilon 0.25)", 20.0)],
      "2": [_row("random", 2.0), _row("BC", 13.0), _row("CCVL (adaptive)", 12.0)],
  }
  rows = demo_seeds.across_seeds(per_seed, reps=200)
  assert [r["policy"] for r in rows] == ["random", "BC", "CCVL (adaptive)"]
  ccvl = rows[2]
  assert (ccvl["mean"], ccvl["sd"], ccvl["min"], ccvl["max"]) == (10.0, 2.0, 8.0, 12.0)
  assert 8.0 <= ccvl["ci_low"] <= 10.0 <= ccvl["ci_high"] <= 12.0
  assert demo_seeds.orderings(rows) == [
      "BC > CCVL (adaptive) in 2 of 3 seeds, < in 1, = in 0"]
  text = demo_seeds.render(rows, "Breakout")
  assert "| CCVL (adaptive) | 8.00 (7.00, 9.00) | 10.00 (9.00, 11.00) | 12.00 (11.00, 13.00) " \
         "| 10.00 | 2.00 | [8.00, 12.00] |" in text
  # write_report: the per-seed rows as CSV, the table as markdown.
  cfg = demo_seeds.DemoSeedsConfig(output_dir=str(tmp_path), seeds=("0", "1", "2"))
  for seed, r in per_seed.items():
    os.makedirs(demo_seeds.seed_dir(cfg, seed))
    json.dump(r, open(os.path.join(demo_seeds.seed_dir(cfg, seed), "results.json"), "w"))
  demo_seeds.write_report(cfg, log=lambda s: None, reps=200)
  written = list(csv.DictReader(open(tmp_path / "seeds.csv")))
  assert len(written) == 10 and written[2] == {"seed": "0", "policy": "CCVL (adaptive)",
                                                "episodes": "10", "mean": "8.0",
                                                "ci_low": "7.0", "ci_high": "9.0"}
  assert (tmp_path / "seeds.md").read_text() == text


def test_probability_of_improvement_and_family_table_by_hand(tmp_path):
  """Adaptive 3, 5, 2 and Fixed-CCVL 1, 2, 4 over three seeds: of the 9 (x, y) pairs, x > y in
  6 and x = y in 1 (2 = 2), so P(adaptive > fixed) = (6 + 0.5) / 9 = 0.72. The family table
  shows each seed's summary.json diagnostics."""
  per_seed = {s: [_row("CCVL (adaptive)", a), _row("Fixed-CCVL", f)]
              for s, a, f in (("0", 3.0, 1.0), ("1", 5.0, 2.0), ("2", 2.0, 4.0))}
  rows = demo_seeds.across_seeds(per_seed, reps=200)
  [line] = demo_seeds.improvements(rows, reps=200)
  assert line.startswith("P(CCVL (adaptive) > Fixed-CCVL) over the 3 seeds' means: 0.72 (95% CI ")
  lo, hi = (float(v) for v in line.split("CI ")[1].rstrip(")").split(", "))
  assert 0.0 <= lo <= 0.72 <= hi <= 1.0
  # without one of the pair's rows there is nothing to compare
  assert demo_seeds.improvements([rows[0]], reps=200) == []
  cfg = demo_seeds.DemoSeedsConfig(output_dir=str(tmp_path), seeds=("0", "1", "2"))
  for seed, r in per_seed.items():
    os.makedirs(demo_seeds.seed_dir(cfg, seed))
    json.dump(r, open(os.path.join(demo_seeds.seed_dir(cfg, seed), "results.json"), "w"))
  diag = {"family_differs_any": 0.25, "lemma1_fraction": 1.0, "v_above_value_max_fraction": 0.0,
          "family_spread": 1.5, "behaviour_agreement": 0.5, "count_auc": 0.7}
  json.dump({"diagnostics": diag}, open(os.path.join(demo_seeds.seed_dir(cfg, "1"),
                                                     "summary.json"), "w"))
  assert demo_seeds.load_diagnostics(cfg) == {"1": diag}
  assert demo_seeds.family_columns(demo_seeds.load_diagnostics(cfg)) == {
      "1": {k: v for k, v in diag.items() if k != "count_auc"}}
  text = demo_seeds.write_report(cfg, log=lambda s: None, reps=200)["table"]
  assert "- " + line in text
  assert "| 1 | 0.250 | 1.000 | 0.000 | 1.500 | 0.500 |" in text
  # the per-episode rows and the full diagnostics, as docs/results/ commits them
  assert json.load(open(tmp_path / "seeds_results.json")) == per_seed
  assert json.load(open(tmp_path / "seeds_diagnostics.json")) == {"1": diag}


@pytest.mark.parametrize("seeds,flags,match", [
    (("0", "0"), [], "repeated seeds"),
    (("0", "x"), [], "--seeds must be integers"),
    (("0",), ["--seed=3"], "--seed is set by demo_seeds.py"),
    (("0",), ["--dataset_dir=/d"], "--dataset_dir is set by demo_seeds.py"),
    (("0",), ["--eval_seed=2"], "--eval_seed is set by demo_seeds.py"),
    (("0",), ["num_steps=3"], "must look like --name=value"),
])
def test_bad_settings_name_the_flag(seeds, flags, match, tmp_path):
  with pytest.raises(ValueError, match=match):
    demo_seeds.DemoSeedsConfig(output_dir=str(tmp_path), seeds=seeds).validate(flags)


@pytest.mark.slow
def test_two_seeds_end_to_end(tmp_path):
  """Seeds 0 and 1, tiny trainings: seed 0 collects the dataset, seed 1 trains on it (and
  still has the behaviour row: the dataset's marker names its behaviour policy), both on seed
  0's evaluation episodes; seeds.csv holds each run's results.json rows; a rerun skips both
  seeds."""
  out = tmp_path / "seeds"
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3")
  cmd = [sys.executable, os.path.join(ROOT, "binaries", "demo_seeds.py"), f"--output_dir={out}",
         "--seeds=0,1", "--", "--num_steps=2", "--default_dataset_steps=300",
         "--reference_agents=none", "--batch_size=4", "--num_deltas=2", "--log_interval=2",
         "--checkpoint_interval=2", "--eval_episodes=2", "--eval_max_steps=30",
         "--num_grid_deltas=3"]
  r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1200)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  log1 = (out / "seed_1" / "train_offline.log").read_text()
  assert f"Loading {out}/seed_0/default_dataset/Breakout" in log1
  assert "No --dataset_dir given" not in log1
  rows = {s: json.load(open(out / f"seed_{s}" / "results.json")) for s in ("0", "1")}
  assert [x["policy"] for x in rows["1"]] == [
      "random", "behaviour (scripted, epsilon 0.25)", "CCVL (adaptive)", "Fixed-CCVL"]
  # One set of evaluation episodes for every training seed (--eval_seed = the first seed): the
  # rows that do not depend on the trained network score the same, episode by episode.
  assert r.stdout.count("--eval_seed=0") == 2, r.stdout[-2000:]
  for i in (0, 1):
    assert rows["0"][i]["scores"] == rows["1"][i]["scores"], (i, rows)
  written = list(csv.DictReader(open(out / "seeds.csv")))
  assert [(w["seed"], w["policy"], float(w["mean"])) for w in written] == [
      (s, x["policy"], x["mean"]) for s in ("0", "1") for x in rows[s]]
  table = (out / "seeds.md").read_text()
  assert "the demo over 2 training seeds" in table and "| Fixed-CCVL |" in table
  assert "CCVL (adaptive) > Fixed-CCVL in" in table
  # The reruns in forked processes (tests/forked_binary.py): the same binary, without paying
  # its imports three more times.
  rerun = lambda *more: forked_binary.run("demo_seeds.py", [*cmd[2:], *more], cwd=ROOT, env=env,
                                          timeout=600)
  r = rerun()
  assert r.returncode == 0 and r.stdout.count("done (skipped)") == 2, r.stdout[-2000:]
  # A rerun with another alpha would report the finished seeds' results as alpha 5's: refused
  # before anything is written (config.json keeps the flags the seeds ran with); an explicit
  # default (--reading=paper) is no change.
  config_before = (out / "config.json").read_text()
  other = rerun("--alpha=5")
  assert other.returncode != 0
  assert other.stderr.strip().splitlines()[-1].startswith(
      f"demo_seeds.py: error: --output_dir {out} holds finished seeds run with other settings "
      f"than these flags give, whose results would be reported as theirs: seed 0: alpha: None "
      f"-> 5.0 | seed 1: alpha: None -> 5.0."), other.stderr[-2000:]
  assert (out / "config.json").read_text() == config_before
  same = rerun("--reading=paper")
  assert same.returncode == 0 and same.stdout.count("done (skipped)") == 2, same.stderr[-2000:]


def test_changed_settings_compare_the_settings_in_force():
  from ccvl_tf.experiments.offline import config as offline_config
  base = ["--game=Breakout", "--root_dir=/tmp/r", "--seed=1"]
  saved = json.loads(json.dumps(offline_config.record(offline_config.config_from_args(base))))
  now = lambda *a: offline_config.config_from_args(base + list(a))  # noqa: E731
  assert offline_config.changed_settings(saved, now("--reading=paper")) == []
  assert offline_config.changed_settings(saved, now("--reading=bonus")) == [
      "ccvl_options: {} -> {'reading': 'bonus'}"]
  assert offline_config.changed_settings(saved, now("--eval_episodes=30", "--alpha=2")) == [
      "alpha: None -> 2.0", "eval_episodes: 10 -> 30"]
  # Where the run writes and how many threads it used do not change its results' meaning.
  assert offline_config.changed_settings(
      saved, offline_config.config_from_args(["--game=Breakout", "--root_dir=/tmp/other",
                                              "--seed=1", "--tf_threads=1"])) == []
