"""binaries/compare.py: a tiny gridworld comparison (every output file, resume / skip), bad
input (unknown method / suite / dataset kind, a missing MinAtar dataset), the agent registry."""
import csv
import json
import os
import types

import numpy as np
import pytest

import ccvl_tf  # noqa: F401
from ccvl_tf.experiments.compare import config as compare_config
from ccvl_tf.algorithm.readings import bonus
from ccvl_tf.experiments.compare import report as compare_report
from ccvl_tf.experiments.compare import runner as compare
from ccvl_tf.experiments.compare import units as compare_units
from ccvl_tf.experiments import agent_registry
from ccvl_tf.experiments.offline import config as offline_config
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "binaries", "compare.py")
TINY = ["--suite=gridworld", "--methods=CQL,Fixed-CCVL,CCVL", "--datasets=1%", "--num_steps=3",
        "--eval_episodes=1", "--eval_max_steps=5", "--num_grid_deltas=2", "--num_deltas=2",
        "--bootstrap_reps=50", "--batch_size=8"]


def _run(args, cwd, fresh=False):
  """compare.py on `args` in its own process (tests/forked_binary.py; `fresh`: a subprocess
  start of its own, as a user's)."""
  return forked_binary.run("compare.py", args, cwd=cwd, fresh=fresh)


@pytest.mark.slow
def test_tiny_gridworld_comparison_writes_every_output_and_resumes(tmp_path):
  out = tmp_path / "cmp"
  r = _run([*TINY, "--seeds=2", f"--output_dir={out}"], tmp_path, fresh=True)
  assert r.returncode == 0, r.stderr[-3000:]
  assert "6 runs; 0 already done (skipped), 6 to run" in r.stdout
  assert "[6/6] CCVL 1% gridworld seed 1" in r.stdout and "ETA" in r.stdout
  rows = list(csv.DictReader(open(out / "scores.csv")))
  assert tuple(rows[0]) == compare_config.SCORE_COLUMNS
  assert sorted((x["method"], x["seed"]) for x in rows) == sorted(
      (m, s) for m in ("CQL", "Fixed-CCVL", "CCVL") for s in ("0", "1"))
  assert all(x["dataset"] == "1%" and x["game"] == "gridworld" for x in rows)
  table = (out / "table.md").read_text()
  assert "| Data | CQL | Fixed-CCVL | CCVL |" in table
  assert table.count("| 1% |") == 1 and "## Per game, 1%" in table
  assert "| gridworld |" in (out / "per_game_1pct.md").read_text()
  assert (out / "iqm.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  # CCVL and Fixed-CCVL share one trained learner; every run has its own result and log.
  assert sorted(os.listdir(out / "runs")) == ["ccvl", "cql"]
  res = json.loads((out / "results" / "fixed-ccvl" / "1pct" / "gridworld" / "seed_0.json")
                   .read_text())
  assert 0 < res["fixed_delta"] < 1 and len(res["bellman_errors"]) == 2
  assert res["train_steps"] == 3
  # CCVL's result lists, per episode, the squared Bellman errors its belief summed (one per
  # grid delta, K = 2) and over how many transitions (each episode has at least one);
  # Fixed-CCVL keeps no belief, so no such record.
  adaptive = json.loads((out / "results" / "ccvl" / "1pct" / "gridworld" / "seed_0.json")
                        .read_text())
  episodes = len(adaptive["episode_scores"])
  assert len(adaptive["sq_error_sum"]) == len(adaptive["sq_error_count"]) == episodes
  assert all(len(e) == 2 and min(e) >= 0 for e in adaptive["sq_error_sum"])
  assert all(c >= 1 for c in adaptive["sq_error_count"])
  assert "sq_error_sum" not in res and "sq_error_count" not in res
  assert len(os.listdir(out / "logs")) == 6
  # Each training root records the config it trained with (the gridworld suite's overrides).
  trained = json.loads((out / "runs" / "cql" / "1pct" / "gridworld" / "seed_0" /
                        "summary.json").read_text())["config"]
  assert trained["dr3_coef"] == 0.0 and trained["learning_rate"] == 3e-3
  assert trained["target_update_period"] == 10 and trained["adam_epsilon"] == 1e-7
  done = {p: os.path.getmtime(p) for p in (out / "results").rglob("*.json")}

  # The same comparison in 2 worker processes (one TF thread each) gives the same scores.
  par = tmp_path / "par"
  rp = _run([*TINY, "--seeds=2", "--workers=2", "--threads_per_worker=1",
             f"--output_dir={par}"], tmp_path)
  assert rp.returncode == 0, rp.stderr[-3000:]
  assert "6 to run in 2 worker processes." in rp.stdout and "[6/6]" in rp.stdout
  key = lambda x: (x["method"], x["seed"])  # noqa: E731
  assert sorted((key(x), x["score"]) for x in csv.DictReader(open(par / "scores.csv"))) == \
      sorted((key(x), x["score"]) for x in rows)
  assert sorted(os.listdir(par / "runs")) == ["ccvl", "cql"]
  # Every unit ran with one TF thread in both layouts (recorded), and the trained checkpoints
  # are bit-identical: a unit's numerics do not depend on --workers.
  assert {x["tf_threads"] for x in rows} == {"1"}
  assert {x["tf_threads"] for x in csv.DictReader(open(par / "scores.csv"))} == {"1"}
  data_files = sorted(p.relative_to(out / "runs") for p in (out / "runs").rglob("*.data-*"))
  assert data_files
  for rel in data_files:
    assert (out / "runs" / rel).read_bytes() == (par / "runs" / rel).read_bytes(), rel

  # Rerun with one more seed: the six finished runs are skipped, only seed 2 is trained.
  r2 = _run([*TINY, "--seeds=3", f"--output_dir={out}"], tmp_path)
  assert r2.returncode == 0, r2.stderr[-3000:]
  assert "9 runs; 6 already done (skipped), 3 to run" in r2.stdout
  assert "seed 0:" not in r2.stdout and "seed 1:" not in r2.stdout
  assert all(os.path.getmtime(p) == t for p, t in done.items())
  assert len(list(csv.DictReader(open(out / "scores.csv")))) == 9
  # A rerun with another alpha would reuse the finished units as its own (their result files
  # once recorded no alpha): refused, naming each unit and the setting, nothing touched.
  r2b = _run([*TINY, "--seeds=3", "--alpha=5", f"--output_dir={out}"], tmp_path)
  assert r2b.returncode == 1
  assert "holds 9 finished unit(s) of other settings than this run's" in r2b.stderr, \
      r2b.stderr[-3000:]
  assert "CQL 1% gridworld seed 0 (" in r2b.stderr and "learner.alpha: " in r2b.stderr
  assert "-> 5.0" in r2b.stderr
  assert all(os.path.getmtime(p) == t for p, t in done.items())
  # The outputs are a function of the result files alone (what a no-op rerun rewrites).
  os.remove(out / "table.md")
  compare_report.write_outputs(str(out), "gridworld", reps=50)
  assert "| 1% |" in (out / "table.md").read_text()

  # A unit to redo with another learning rate is refused: its checkpoints were trained at the
  # suite's 3e-3 (stored with them), and resuming them at 0.01 would mix the two.
  cql_seed0 = out / "results" / "cql" / "1pct" / "gridworld" / "seed_0.json"
  os.remove(cql_seed0)
  cql_tiny = [a for a in TINY if a != "--num_deltas=2"]  # CQL takes no N (refused)
  r3 = _run([*cql_tiny, "--methods=CQL", "--seeds=1", "--learning_rate=0.01",
             f"--output_dir={out}"], tmp_path)
  assert r3.returncode == 1 and not cql_seed0.exists()
  assert "learning_rate: 0.003 -> 0.01" in r3.stderr and "another --output_dir" in r3.stderr
  # The step budget is not part of it: a larger --num_steps resumes the training from step 3.
  r4 = _run([*cql_tiny, "--methods=CQL", "--seeds=1", "--num_steps=4", f"--output_dir={out}"],
            tmp_path)
  assert r4.returncode == 0, r4.stderr[-3000:]
  assert json.loads(cql_seed0.read_text())["train_steps"] == 4
  assert "Training from step 3 to 4." in (out / "logs" / "cql_1pct_gridworld_seed0.log"
                                         ).read_text()


def test_training_groups_keep_a_shared_learner_in_one_worker():
  units = [(d, "g", s, m) for d in ("1%", "5%") for s in (0, 1)
           for m in ("REM", "Fixed-CCVL", "CQL", "CCVL")]
  groups = compare_units.training_groups(units)
  assert len(groups) == 12  # 2 datasets x 2 seeds x 3 learners (REM, CQL, CCVL)
  assert sorted(u for g in groups for u in g) == sorted(units)
  shared = [g for g in groups if len(g) > 1]
  assert len(shared) == 4 and all([u[3] for u in g] == ["Fixed-CCVL", "CCVL"] for g in shared)
  assert all(len({u[:3] for u in g}) == 1 for g in groups)


@pytest.mark.slow
def test_a_failing_unit_in_a_worker_names_itself_and_its_log(tmp_path):
  # lr 1e12 (the largest a float setting takes) makes the loss non-finite at step 1:
  # TrainingStopped inside a worker process must reach the user as one clear error (it does
  # not unpickle by itself).
  out = tmp_path / "fail"
  r = _run([*TINY, "--seeds=1", "--workers=2", "--threads_per_worker=1",
            "--learning_rate=1e12", f"--output_dir={out}"], tmp_path)
  assert r.returncode != 0
  assert "failed in a worker: TrainingStopped" in r.stderr and "non-finite" in r.stderr
  assert "BrokenProcessPool" not in r.stderr
  assert f"log: {out}/logs/" in r.stderr and "rerun the same command to resume" in r.stderr


@pytest.mark.slow
def test_bad_input_lists_the_valid_names(tmp_path):
  r = _run(["--suite=gridworld", "--methods=CQL,FOO", f"--output_dir={tmp_path}"], tmp_path)
  assert r.returncode != 0
  assert "unknown method 'FOO'" in r.stderr and "REM, CQL, AEVL, Fixed-CCVL, CCVL, DQN" in r.stderr
  with pytest.raises(ValueError, match="--suite must be one of gridworld, minatar, atari"):
    compare_config.CompareConfig(suite="procgen").validate()
  with pytest.raises(ValueError, match="valid kinds: 1%, 5%, Initial 10%"):
    compare_config.parse_datasets("2%")
  assert compare_config.parse_methods("fixed_ccvl, rem,CCVL") == ["Fixed-CCVL", "REM", "CCVL"]
  assert compare_config.parse_datasets("1%,initial10%") == ["1%", "Initial 10%"]


def test_missing_minatar_dataset_says_how_to_make_it(tmp_path):
  with pytest.raises(ValueError, match="needs --data_dir"):
    compare_config.CompareConfig(suite="minatar").validate()
  cfg = compare_config.CompareConfig(suite="minatar", data_dir=str(tmp_path / "none"),
                              games=["Breakout"], output_dir=str(tmp_path / "out"))
  with pytest.raises(ValueError, match="make_minatar_datasets.py --output_dir=.*none "
                                       "--games=Breakout"):
    compare.run(cfg, log=lambda s: None)
  with pytest.raises(ValueError, match="missing DQN Replay directories"):
    compare.run(compare_config.CompareConfig(suite="atari", data_dir=str(tmp_path), games=["Pong"],
                                      output_dir=str(tmp_path / "out")), log=lambda s: None)


def test_atari_suite_finds_dqn_replay_directories_through_gfile():
  """--suite=atari's check of <data_dir>/<Game>/<run>/replay_logs goes through tf.io.gfile:
  a remote --data_dir (ram://, standing in for gs://) is found, and a game missing there is
  named by its remote path."""
  import uuid  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.compare import suites  # pylint: disable=g-import-not-at-top
  testdata = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
  root = f"ram://ccvl_compare_{uuid.uuid4().hex}"
  logs = f"{root}/Breakout/1/replay_logs"
  tf.io.gfile.makedirs(logs)
  for name in os.listdir(testdata):
    tf.io.gfile.copy(os.path.join(testdata, name), f"{logs}/{name}")
  suite = suites.AtariSuite(compare_config.CompareConfig(suite="atari", data_dir=root))
  suite.check(["Breakout"], ["1%"])
  with pytest.raises(ValueError, match=rf"missing DQN Replay directories: {root}/Pong/1/"
                                       r"replay_logs\. "):
    suite.check(["Breakout", "Pong"], ["1%"])


@pytest.mark.slow
def test_an_interrupted_minatar_build_keeps_its_finished_games_scored(tmp_path, monkeypatch):
  """A multi-game build stopped in its second game leaves the first one scored (scores are
  written after each game); a complete game missing from the scores file is reported as such,
  with the command that fixes it (not 'rebuild into a fresh directory')."""
  from ccvl_tf.data import minatar_datasets as md  # pylint: disable=g-import-not-at-top
  data = str(tmp_path / "minatar")
  real = md.build_game

  def build(out, game, **kwargs):
    if game == "SpaceInvaders":
      raise RuntimeError("killed while building SpaceInvaders")
    return real(out, game, **kwargs)

  monkeypatch.setattr(md, "build_game", build)
  with pytest.raises(RuntimeError, match="killed"):
    md.build_all(data, ["Breakout", "SpaceInvaders"], num_steps=120, game_steps={}, seed=0,
                 num_checkpoints=3, eval_episodes=1, random_episodes=2, progress_every=60,
                 log=lambda m: None)
  assert set(md.load_scores(data)) == {"Breakout"}
  # A scores file written before Breakout finished (what a build interrupted before this
  # change left): Breakout is complete on disk but unscored.
  scores_path = os.path.join(data, md.SCORES_FILENAME)
  with open(scores_path) as f:
    references = json.load(f)
  del references["games"]["Breakout"]
  with open(scores_path, "w") as f:
    json.dump(references, f)
  cfg = compare_config.CompareConfig(suite="minatar", data_dir=data, games=["Breakout"],
                              output_dir=str(tmp_path / "out"))
  with pytest.raises(ValueError, match="Breakout's dataset is complete but "
                                       "minatar_scores.json has no entry.*make_minatar_datasets"
                                       r"\.py --output_dir=.*minatar \(finished games are cached"):
    compare.run(cfg, log=lambda s: None)


def test_training_settings_come_from_the_suite_then_the_flags():
  """agent_settings: the suite's overrides (gridworld: Adam 3e-3 / eps 1e-7, DR3 0), replaced
  by the CompareConfig's learning_rate / adam_epsilon / target period / dr3_coef when given."""
  from ccvl_tf.experiments.compare import suites, units  # pylint: disable=g-import-not-at-top
  data = suites.Data(make_dataset=None, held_out=None, size=10)
  values = lambda s: types.SimpleNamespace(**s.agent_values)  # the agent settings given
  plain = values(units.agent_settings(
      suites.SUITE_CLASSES["gridworld"](compare_config.CompareConfig(suite="gridworld")), data, 0))
  assert (plain.learning_rate, plain.adam_epsilon, plain.dr3_coef,
          plain.target_update_period) == (3e-3, 1e-7, 0.0, 10)
  cfg = compare_config.CompareConfig(suite="gridworld", adam_epsilon=1e-8, dr3_coef=0.5,
                              learning_rate=1e-4)
  given = values(units.agent_settings(suites.SUITE_CLASSES["gridworld"](cfg), data, 0))
  assert (given.learning_rate, given.adam_epsilon, given.dr3_coef,
          given.target_update_period) == (1e-4, 1e-8, 0.5, 10)
  minatar = values(units.agent_settings(suites.SUITE_CLASSES["minatar"](
      compare_config.CompareConfig(suite="minatar", data_dir="x")), data, 0))
  assert (minatar.dr3_coef, minatar.learning_rate) == (0.0, 2.5e-4)
  for bad in (0.0, float("nan")):
    with pytest.raises(ValueError, match="--adam_epsilon must be a finite number > 0"):
      compare_config.CompareConfig(suite="gridworld", adam_epsilon=bad).validate()


def test_registry_has_every_method_and_names_the_valid_agents():
  assert set(compare_config.METHODS.values()) == set(agent_registry.AGENTS)
  assert agent_registry.AGENTS == ("ccvl", "fixed_ccvl", "cql", "rem", "aevl", "aevl_td", "dqn", "bc")
  assert agent_registry.get_agent_spec("fixed_ccvl").train_key == agent_registry.get_agent_spec("ccvl").train_key
  with pytest.raises(ValueError, match="--agent must be one of ccvl, fixed_ccvl, cql, rem, "
                                       "aevl, aevl_td, dqn, bc, got 'sac'"):
    offline_config.OfflineConfig(agent="sac").validate()


def test_aevl_td_members_have_no_cql_term_and_ccvl_options_reach_the_agent():
  """AEVL-TD is AEVL with alpha = 0 whatever --alpha says; CCVL's options
  (experiments/agent_options.py) arrive in CCVLConfig; the temperature defaults to auto."""
  import tensorflow as tf
  from tf_agents.specs import tensor_spec
  from tf_agents.trajectories import time_step as ts
  from ccvl_tf.algorithm import networks
  obs = tensor_spec.TensorSpec([3], tf.float32)
  act = tensor_spec.BoundedTensorSpec((), tf.int64, 0, 1)
  net = networks.QNetworkConfig(torso="mlp", mlp_units=(4,), n_cos=4, hidden_units=4)
  s = agent_registry.make_settings(network_config=net, dataset_size=10.0, alpha=0.7, num_members=2,
                            ccvl_options={"objective": "bonus", "count_normalization": "mean"})
  aevl = agent_registry.get_agent_spec("aevl_td").build(ts.time_step_spec(obs), act, s)
  assert aevl.config.alpha == 0.0
  assert agent_registry.get_agent_spec("aevl").build(ts.time_step_spec(obs), act, s).config.alpha == 0.7
  ccvl = agent_registry.get_agent_spec("ccvl").build(ts.time_step_spec(obs), act, s)
  assert ccvl.config.reading == bonus.Bonus() and ccvl.counts.normalization == "mean"
  assert ccvl.config.alpha == 0.7 and s.belief_temperature is None
  assert compare_config.METHODS["AEVL-TD"] == "aevl_td"


def test_spread_belief_temperature_lets_one_episode_move_the_log_odds_by_log_k():
  # K = 4 errors 0.1..0.4: spread 0.3; 1,000 steps -> T = 300 / log 4 = 216.4.
  t = agent_registry.spread_belief_temperature([0.1, 0.2, 0.3, 0.4], 1000)
  assert t == pytest.approx(300 / np.log(4))
  # the belief after one episode of 1,000 steps at the mean errors: worst / best = 1/K
  log_b = -1000 * np.array([0.1, 0.4]) / t
  assert np.exp(log_b[1] - log_b[0]) == pytest.approx(0.25)
  assert agent_registry.spread_belief_temperature([0.2, 0.2], 5) == pytest.approx(1e-6)
  with pytest.raises(ValueError, match="at least 2 grid deltas"):
    agent_registry.spread_belief_temperature([0.2], 5)
  with pytest.raises(ValueError, match="episode_steps"):
    agent_registry.spread_belief_temperature([0.1, 0.2], 0)


def test_auto_belief_temperature_is_twice_the_smallest_error():
  assert agent_registry.auto_belief_temperature([0.3, 0.05, 0.2]) == pytest.approx(0.1)
  assert agent_registry.auto_belief_temperature([0.0, 1.0]) == pytest.approx(1e-6)  # floored
  with pytest.raises(ValueError, match="finite"):
    agent_registry.auto_belief_temperature([float("nan")])


@pytest.mark.slow
def test_minatar_cell_is_bit_identical_with_one_or_two_workers(tmp_path):
  """The same MinAtar cells (CQL and CCVL, 2 seeds, a tiny real-format dataset built here)
  with --workers=1 and --workers=2: the same scores and bit-identical checkpoints, every unit
  on one TF thread (recorded)."""
  from ccvl_tf.data import minatar_datasets as md  # pylint: disable=g-import-not-at-top
  data = str(tmp_path / "minatar")
  md.build_all(data, ["Breakout"], num_steps=120, game_steps={}, seed=0, num_checkpoints=3,
               eval_episodes=1, random_episodes=2, progress_every=60, log=lambda m: None)
  # A 120-step DQN does not beat random, and compare refuses such a reference; the
  # normalization is not what this test checks, so the reference is set by hand.
  scores_path = os.path.join(data, md.SCORES_FILENAME)
  with open(scores_path) as f:
    references = json.load(f)
  game = references["games"]["Breakout"]
  for entry in [game] + list(game["runs"].values()):
    entry["dqn"] = entry["random"] + 1.0
  with open(scores_path, "w") as f:
    json.dump(references, f)
  args = ["--suite=minatar", f"--data_dir={data}", "--games=Breakout", "--methods=CQL,CCVL",
          "--datasets=1%", "--seeds=2", "--num_steps=3", "--eval_episodes=1",
          "--eval_max_steps=5", "--num_grid_deltas=2", "--num_deltas=2", "--bootstrap_reps=50",
          "--batch_size=4"]
  outs = {}
  for workers in (1, 2):
    outs[workers] = tmp_path / f"workers{workers}"
    r = _run([*args, f"--workers={workers}", f"--output_dir={outs[workers]}"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
  rows = {w: sorted((x["method"], x["seed"], x["score"], x["tf_threads"])
                    for x in csv.DictReader(open(out / "scores.csv")))
          for w, out in outs.items()}
  assert rows[1] == rows[2] and len(rows[1]) == 4
  assert {r[3] for r in rows[1]} == {"1"}
  data_files = sorted(p.relative_to(outs[1] / "runs") for p in (outs[1] / "runs").rglob("*.data-*"))
  assert len(data_files) >= 4
  for rel in data_files:
    assert (outs[1] / "runs" / rel).read_bytes() == (outs[2] / "runs" / rel).read_bytes(), rel


def test_confidence_md_shows_the_family_as_policies_per_dataset_kind():
  """confidence.md's family table: mean [min, max] over the CCVL rows of each
  dataset kind, by hand; rows without diagnostics (other methods) are ignored, a key no row
  has is n/a."""
  fam = lambda ends, any_, a_lo, a_hi, g_lo, g_hi: {  # noqa: E731
      "family_differs_ends": ends, "family_differs_any": any_, "family_agreement_lo": a_lo,
      "family_agreement_hi": a_hi, "family_cql_gap_lo": g_lo, "family_cql_gap_hi": g_hi}
  rows = [
      {"method": "CCVL", "dataset": "5%", "diagnostics": fam(0.25, 0.5, 0.1, 0.3, 1.0, 2.0)},
      {"method": "CCVL", "dataset": "5%", "diagnostics": fam(0.75, 1.0, 0.3, 0.5, 1.5, 3.0)},
      {"method": "CCVL", "dataset": "1%", "diagnostics": {"family_differs_any": 0.125}},
      {"method": "CQL", "dataset": "1%", "score": 1.0},
  ]
  text = compare_report.confidence_table(rows)
  family = text[text.index("## The delta family as greedy policies"):]
  assert ("| Data | runs | greedy action differs, smallest vs largest delta | greedy action "
          "differs anywhere along the grid | agreement with the data's action, smallest delta | "
          "agreement with the data's action, largest delta | CQL gap, smallest delta | "
          "CQL gap, largest delta |") in family
  # Dataset kinds in the paper's order: 1% before 5%.
  assert family.index("| 1% |") < family.index("| 5% |")
  assert ("| 1% | 1 | n/a | 0.125 [0.125, 0.125] | n/a | n/a | n/a | n/a |") in family
  assert ("| 5% | 2 | 0.5 [0.25, 0.75] | 0.75 [0.5, 1] | 0.2 [0.1, 0.3] | 0.4 [0.3, 0.5] | "
          "1.25 [1, 1.5] | 2.5 [2, 3] |") in family
  # The value-level table is still first, with the same rows.
  assert text.index("| 5% | 2 | n/a |") < text.index("## The delta family")
  assert compare_report.confidence_table([{"method": "CQL", "dataset": "1%"}]) == ""


def test_confidence_md_compares_adaptive_with_fixed_delta_on_the_same_runs():
  """CCVL vs Fixed-CCVL per dataset kind, by hand: 1%, games A and B, seeds 0-1:
  CCVL A = [10, 41], Fixed A = [0, 30]; CCVL B = [5, 5], Fixed B = [5, 0]: differences
  +10, +11, 0, +5 -> 3 higher / 1 same / 0 lower, mean +6.5; P(CCVL > Fixed) = 0.75 (as in
  test_probability_of_improvement_by_hand). A run without its Fixed-CCVL pair (5%) is not
  compared, and a kind without pairs has no row."""
  scores = {("CCVL", "A"): [10, 41], ("Fixed-CCVL", "A"): [0, 30],
            ("CCVL", "B"): [5, 5], ("Fixed-CCVL", "B"): [5, 0]}
  rows = [{"method": m, "dataset": "1%", "game": g, "seed": s, "normalized_score": float(v)}
          for (m, g), vs in scores.items() for s, v in enumerate(vs)]
  rows[0]["diagnostics"] = {"family_differs_any": 0.5}
  rows.append({"method": "CCVL", "dataset": "5%", "game": "A", "seed": 0,
               "normalized_score": 3.0, "diagnostics": {}})
  text = compare_report.confidence_table(rows, reps=200)
  part = text[text.index("## Does adapting delta help?"):]
  assert ("| Data | runs | CCVL higher / same / lower | mean difference (normalized) | "
          "P(CCVL > Fixed-CCVL) [95% CI] |") in part
  assert "| 1% | 4 | 3 / 1 / 0 | +6.5 | 0.75 [" in part
  assert "| 5% |" not in part
