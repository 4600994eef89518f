"""MinAtar fine-tuning (binaries/finetune_minatar.py, finetune_online.py --game=minatar/...):
the report's gains by hand from recorded evaluations, and end to end on a tiny real-format
MinAtar dataset: compare.py's offline CQL and CCVL runs (with their summary.json) fine-tuned by
the three agents in the suite's default, deterministic schedule (the asynchronous one, through a
real Reverb server and actor processes: tests/test_online.py)."""
import csv
import json
import os
import subprocess
import sys

import ccvl_tf  # noqa: F401

import pytest

from ccvl_tf.runtime import training
from ccvl_tf.experiments.online import finetune_report
from ccvl_tf.experiments.online import finetune_suite
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _scores_file(data_dir, refs):
  os.makedirs(data_dir, exist_ok=True)
  with open(os.path.join(data_dir, "minatar_scores.json"), "w") as f:
    json.dump({"games": {g: dict(random=r, dqn=d, runs={}) for g, (r, d) in refs.items()}}, f)


def test_report_gains_by_hand(tmp_path):
  """Breakout (random 0.5, DQN 2.5: normalized = 50 (x - 0.5)) and Asterix (random 1, DQN 3:
  50 (x - 1)); 2 seeds. CQL's primary score is 'lower', CCVL's 'adaptive'.
    CQL   Breakout raw 1.5 -> 2.5 (norm 50 -> 100, gain +50) and 0.5 -> 0.5 (0 -> 0, gain 0);
          Asterix 2 -> 1 (50 -> 0, gain -50) and 2 -> 2 (gain 0): mean gain 0.
    CCVL  Breakout 1.5 -> 1.5 (gain 0), 1.5 -> 2.5 (+50); Asterix 1 -> 2 (+50), 1 -> 2 (+50):
          mean gain 37.5; the mid-run evaluation is not 'after'.
  """
  data = str(tmp_path / "data")
  _scores_file(data, {"Breakout": (0.5, 2.5), "Asterix": (1.0, 3.0)})
  cfg = finetune_suite.FinetuneSuiteConfig(
      compare_dir=str(tmp_path), data_dir=data, output_dir=str(tmp_path / "out"),
      games=("Breakout", "Asterix"), seeds=("0", "1"), methods=("cql", "ccvl"),
      bootstrap_reps=200)
  raw = {("cql", "Breakout", 0): (1.5, 2.5), ("cql", "Breakout", 1): (0.5, 0.5),
         ("cql", "Asterix", 0): (2.0, 1.0), ("cql", "Asterix", 1): (2.0, 2.0),
         ("ccvl", "Breakout", 0): (1.5, 1.5), ("ccvl", "Breakout", 1): (1.5, 2.5),
         ("ccvl", "Asterix", 0): (1.0, 2.0), ("ccvl", "Asterix", 1): (1.0, 2.0)}
  for (method, game, seed), (before, after) in raw.items():
    root = finetune_suite.run_dir(cfg, method, game, seed)
    os.makedirs(root)
    key = "lower_mean_score" if method == "cql" else "adaptive_mean_score"
    training.record_evaluation(root, 100, {key: before, "online_env_steps": 0.0})
    training.record_evaluation(root, 150, {key: 99.0, "online_env_steps": 200.0})
    training.record_evaluation(root, 200, {key: after, "online_env_steps": 400.0,
                                           "tight/lower_minus_mc@0.5": -0.25})
    with open(os.path.join(root, "summary.json"), "w") as f:
      json.dump({"final_step": 200, "step": 200, "throughput": {}}, f)
  out = finetune_report.write_report(cfg, log=lambda s: None)
  pairs = finetune_report.before_after(finetune_report.load_runs(cfg))
  assert pairs[("cql", "Breakout", 0)]["gain"] == pytest.approx(50.0)
  assert pairs[("cql", "Asterix", 0)]["gain"] == pytest.approx(-50.0)
  assert pairs[("ccvl", "Asterix", 1)]["before"] == pytest.approx(0.0)
  table = open(out["table"]).read()
  assert "| CQL | 4 | " in table and "| +0.0 [" in table
  assert "| CCVL (bounds) | 4 | " in table and "| +37.5 [" in table
  assert "| Breakout | CQL | 25.0 ± 25.0 | 50.0 ± 50.0 | 25.0 ± 25.0 |" in table
  assert "| Asterix | CCVL (bounds) | 0.5 | " in table and "| -0.250 |" in table
  rows = list(csv.DictReader(open(out["csv"])))
  assert len(rows) == 8 * 3 and os.path.exists(out["plot"])


def test_missing_offline_run_says_how_to_make_it(tmp_path):
  cfg = finetune_suite.FinetuneSuiteConfig(compare_dir=str(tmp_path), data_dir=str(tmp_path),
                                           output_dir=str(tmp_path / "out"), games=("Breakout",),
                                           seeds=("0",), methods=("cql",))
  with pytest.raises(ValueError, match=r"no offline run of CQL for Breakout seed 0 .*compare.py "
                                       r"--suite=minatar --methods=CQL --datasets=1%"):
    finetune_suite.ensure_offline_summary(cfg, "cql", "Breakout", 0, log=lambda s: None)
  with pytest.raises(ValueError, match="--methods: unknown"):
    finetune_suite.FinetuneSuiteConfig(compare_dir=str(tmp_path), data_dir="d", output_dir="o",
                                       methods=("rem",)).validate()
  with pytest.raises(FileNotFoundError, match="make_minatar_datasets.py"):
    cfg.validate()  # no minatar_scores.json in --data_dir
  _scores_file(str(tmp_path / "data"), {"Breakout": (0.5, 2.5)})
  with pytest.raises(ValueError, match="no usable reference scores .* for Asterix"):
    finetune_suite.FinetuneSuiteConfig(
        compare_dir=str(tmp_path), data_dir=str(tmp_path / "data"), output_dir="o",
        games=("Breakout", "Asterix")).validate()


@pytest.mark.slow
def test_minatar_offline_runs_fine_tune_end_to_end(tmp_path, monkeypatch):
  """A tiny MinAtar Breakout dataset (120 steps), compare.py's CQL and CCVL offline runs (3
  steps), then finetune_minatar.py: the three agents, 96 online env steps each counted at the
  server (about (96 - 32) x SPI 8 / batch 32 = 16 learner steps, the budget checked at every
  weight push, every 10 steps), evaluated at the offline step, step +8 and the end."""
  from ccvl_tf.data import minatar_datasets as md  # pylint: disable=g-import-not-at-top
  data = str(tmp_path / "minatar")
  md.build_all(data, ["Breakout"], num_steps=120, game_steps={}, seed=0, num_checkpoints=3,
               eval_episodes=1, random_episodes=2, progress_every=60, log=lambda m: None)
  scores_path = os.path.join(data, md.SCORES_FILENAME)
  references = json.load(open(scores_path))
  for entry in [references["games"]["Breakout"]] + list(
      references["games"]["Breakout"]["runs"].values()):
    entry["dqn"] = entry["random"] + 1.0  # a 120-step DQN does not beat random (test_compare)
  json.dump(references, open(scores_path, "w"))
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")
  env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
  cmp_dir = str(tmp_path / "cmp")
  r = forked_binary.run(
      "compare.py",
      ["--suite=minatar", f"--data_dir={data}", "--games=Breakout", "--methods=CQL,CCVL",
       "--datasets=1%", "--seeds=1", "--num_steps=3", "--eval_episodes=1",
       "--eval_max_steps=5", "--num_grid_deltas=2", "--bootstrap_reps=50", "--batch_size=4",
       f"--output_dir={cmp_dir}"], env=env)
  assert r.returncode == 0, r.stderr[-3000:]
  offline = json.load(open(os.path.join(cmp_dir, "runs", "ccvl", "1pct", "Breakout", "seed_0",
                                        "summary.json")))
  assert offline["game"] == "minatar/Breakout" and offline["agent"] == "ccvl"
  assert offline["step"] == 3 and offline["num_transitions"] > 0
  assert offline["belief_temperature"] > 0 and offline["alpha"] > 0
  _check_offline_share(os.path.join(cmp_dir, "runs", "ccvl", "1pct", "Breakout", "seed_0"),
                       offline, md.replay_dir(data, "Breakout", 0), str(tmp_path / "mixed"),
                       monkeypatch)
  out = str(tmp_path / "ft")
  finetune = [sys.executable, os.path.join(ROOT, "binaries", "finetune_minatar.py"),
              f"--compare_dir={cmp_dir}", f"--data_dir={data}", f"--output_dir={out}",
              "--games=Breakout", "--seeds=0", "--num_env_steps=96", "--eval_interval=8",
              "--eval_episodes=1", "--eval_max_steps=20", "--min_replay_size=32",
              "--bootstrap_reps=100"]
  r = subprocess.run(finetune, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  for method in ("cql", "ccvl_lower", "ccvl"):
    root = os.path.join(out, "runs", method, "Breakout", "seed_0")
    summary = json.load(open(os.path.join(root, "summary.json")))
    last = summary["step"]
    assert summary["offline_step"] == 3 and last == summary["final_step"] and last % 10 == 0
    evals = training.load_eval_record(root)["evals"]
    steps = ["3"] + [str(s) for s in range(11, last, 8)] + [str(last)]  # --eval_interval=8
    assert sorted(evals, key=int) == steps, (method, evals.keys())
    env_steps = [evals[s]["online_env_steps"] for s in steps]
    assert env_steps[0] == 0.0 and 32 <= env_steps[1], env_steps
    assert env_steps == sorted(env_steps) and 96 <= env_steps[-1], env_steps
    assert env_steps[-1] == summary["online_env_steps"] <= summary["throughput"]["replay/inserts"]
    final = evals[str(last)]
    assert {"lower_mean_score", "tight/mc_return", "tight/lower_holds@0.5"} <= set(final)
    assert ("adaptive_mean_score" in final) == (method != "cql")
    assert ("bounds_mean_score" in final) == (method == "ccvl")
    assert ("tight/upper_holds@0.5" in final) == (method == "ccvl")
    assert 0.0 <= final["tight/lower_holds@0.5"] <= 1.0
    tp = summary["throughput"]
    assert tp["learner_steps"] == last - 3 and tp["replay/inserts"] >= 96
    assert "actors/actor_env_steps_per_s" in tp  # counters: test_online_eval.py
    # The penalty diagnostic at every evaluation: the bounds against Monte-Carlo
    # returns from the offline start on; for CCVL the weight on offline states (the suite's
    # sample) and, after the start, on the online rows trained on since the previous
    # evaluation; |D| = the offline transitions + the online rows trained on / SPI (32 rows /
    # SPI 8 per learner step).
    for step in steps:
      assert "tight/lower_minus_mc@0.5" in evals[step]
      assert ("penalty/lower_weight_offline" in evals[step]) == (method != "cql")
      assert ("penalty/upper_weight_offline" in evals[step]) == (method == "ccvl")
    if method != "cql":
      assert "penalty/lower_weight_new" not in evals["3"]
      for before, step in zip(steps, steps[1:]):
        assert evals[step]["penalty/new_states"] == (int(step) - int(before)) * 32
        assert evals[step]["penalty/lower_weight_new"] > 0
        assert evals[step]["penalty/lower_dataset_size"] == (
            offline["num_transitions"] + (int(step) - 3) * 32 / 8)
      assert os.path.exists(os.path.join(root, "penalty.png"))
  table = open(os.path.join(out, "table.md")).read()
  for label in ("CQL", "CCVL (lower bound only)", "CCVL (bounds)"):
    assert f"| {label} | 1 | " in table
  assert os.path.exists(os.path.join(out, "score_vs_steps.png"))
  assert os.path.exists(os.path.join(out, "penalty_vs_steps.png"))
  assert "| Breakout | CCVL (bounds) | 0 | " in table           # the penalty per evaluation
  _check_online_counts_restore(out, offline)
  # A rerun skips the finished runs.
  r = forked_binary.run("finetune_minatar.py", finetune[2:], env=env, timeout=300)
  assert r.returncode == 0 and r.stdout.count("done (skipped)") == 3, r.stdout[-2000:]


def _check_offline_share(offline_dir, offline, replay_dir, root, monkeypatch):
  """compare.py's summary records the dataset it trained on (the run's replay_logs, subset
  '1%': 3 transitions), and a fine-tune with --offline_fraction=0.25 at batch 8 (deterministic
  schedule, 52 env steps: (52 - 16) / 6 = 6 learner steps) trains every step on 6 online rows
  then round(8 x 0.25) = 2 rows of that dataset: the pipeline's batch k, seeded
  --seed + 50,000, at step k."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from ccvl_tf.data import frame_store, pipeline  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.online import config as online_config  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.online import distributed, offline_share  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.online import runner as online  # pylint: disable=g-import-not-at-top
  assert (offline["dataset_dir"], offline["subset"]) == (os.path.abspath(replay_dir), "1%")
  batches = []
  real = distributed.make_learner_step

  def recording(strategy, agent):
    step = real(strategy, agent)
    return lambda batch: (batches.append({k: np.asarray(v) for k, v in batch.items()}),
                          step(batch))[1]
  monkeypatch.setattr(distributed, "make_learner_step", recording)
  cfg = online_config.OnlineConfig(
      offline_dir=offline_dir, game="minatar/Breakout", root_dir=root, num_env_steps=52,
      num_actors=1, batch_size=8, offline_fraction=0.25, samples_per_insert=1.0,
      min_replay_size=16, replay_capacity=100, eval_episodes=0, export_policies=False,
      penalty_diagnostic=False, schedule="deterministic", push_period=1)
  summary = online.run(cfg, log=lambda s: None)
  assert summary["step"] - summary["offline_step"] == len(batches) == 6
  store = frame_store.FrameStore.from_replay(replay_dir, "1%", num_actions=3)
  for k, batch in enumerate(batches):
    expected = pipeline.sample_batch(store, 2, cfg.seed + offline_share.SEED_OFFSET, k)
    for key, value in expected.items():
      assert batch[key].shape[0] == 8
      np.testing.assert_array_equal(batch[key][6:], value, err_msg=f"{key} of step {k}")


def _check_online_counts_restore(out, offline):
  """The CCVL run's learner rebuilt in process (online.py's phases up to the restore): its
  checkpoint at the end resumes with the online counts (n_on = the rows trained on / SPI:
  |D| = offline + n_on, for both bounds) and the actors' env steps; a fresh root with
  --online_counts=offline restores the offline checkpoint and keeps the offline rule (no
  online variables, |D| offline)."""
  import dataclasses  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.online import config as online_config  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.online import runner as online  # pylint: disable=g-import-not-at-top
  root = os.path.join(out, "runs", "ccvl", "Breakout", "seed_0")
  cfg = online_config.OnlineConfig.from_record(json.load(open(os.path.join(root,
                                                                           "online_config.json"))))

  def learner(cfg):
    runner = online._Runner(cfg, lambda s: None, tf.distribute.get_strategy())  # pylint: disable=protected-access
    runner._resolve_config()  # pylint: disable=protected-access
    runner._build_learner()  # pylint: disable=protected-access
    runner._initialize_checkpointer_and_maybe_resume()  # pylint: disable=protected-access
    return runner
  resumed = learner(cfg)
  summary = json.load(open(os.path.join(root, "summary.json")))
  assert resumed.start_step == summary["step"]
  assert int(resumed.env_steps.numpy()) == summary["online_env_steps"]
  n_on = (summary["step"] - 3) * 32 / 8
  for bound in (resumed.agent.lower, resumed.agent.upper):
    assert bound.counts.online and float(bound.counts.online_size.numpy()) == n_on
    assert float(bound.counts.total_size().numpy()) == offline["num_transitions"] + n_on
  fresh = learner(dataclasses.replace(cfg, root_dir=os.path.join(out, "fresh"),
                                      online_counts="offline"))
  assert fresh.start_step == 3 and not fresh.agent.lower.counts.online
  assert float(fresh.agent.lower.counts.total_size().numpy()) == offline["num_transitions"]
