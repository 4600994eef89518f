"""The headroom statistics (values derived by hand) and binaries/headroom.py on a tiny run."""
import csv
import json
import os

import numpy as np
import pytest

from ccvl_tf.evaluation import headroom
from ccvl_tf.experiments.offline import headroom_eval
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
ENV = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3",
           PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))


def test_as_sequences_puts_episode_e_at_its_slot_and_position():
  # Slot j of the vector environment plays episodes j, j + S, j + 2S, ...
  np.testing.assert_array_equal(headroom.as_sequences([0, 1, 2, 3, 4, 5], 2),
                                [[0, 2, 4], [1, 3, 5]])
  with pytest.raises(ValueError, match="5 episodes do not split into 2"):
    headroom.as_sequences(range(5), 2)


def test_split_half_oracle_scores_each_half_with_the_other_halfs_choice():
  # K = 2 members, S = 2 sequences of L = 1. On sequence 0 member 1 is best (5 > 1) and scores
  # 2 on sequence 1; on sequence 1 member 0 is best (10 > 2) and scores 1 on sequence 0.
  g = np.array([[[1.0], [10.0]], [[5.0], [2.0]]])
  out = headroom.split_half_oracle(g)
  assert (out["first_choice"], out["second_choice"]) == (1, 0)
  assert out["per_sequence"] == [1.0, 2.0]
  assert out["value"] == 1.5
  # The best member in hindsight (member 0, mean 5.5) is above both halves' honest scores.
  assert g.mean(axis=(1, 2)).max() == 5.5
  with pytest.raises(ValueError, match="S even"):
    headroom.split_half_oracle(np.zeros([2, 3, 1]))


def test_paired_difference_bootstraps_sequences():
  # Per-sequence differences 0 and 2: a resample of 2 sequences has mean 0, 1 or 2 with
  # probabilities 1/4, 1/2, 1/4, so the 95% percentile interval is [0, 2].
  a = np.array([[1.0, 1.0], [3.0, 3.0]])
  b = np.array([[1.0, 1.0], [1.0, 1.0]])
  d = headroom.paired_difference(a, b)
  assert d["mean"] == 1.0
  assert (d["ci_low"], d["ci_high"]) == (0.0, 2.0)
  # Per-episode differences 0, 0, 2, 2: SD sqrt(4 / 3).
  assert d["sd_episode"] == pytest.approx(np.sqrt(4.0 / 3.0))
  same = headroom.paired_difference(a + 1.0, a)  # every sequence +1: the CI is the point
  assert (same["mean"], same["ci_low"], same["ci_high"]) == (1.0, 1.0, 1.0)


def test_power_is_the_normal_approximation():
  # z_0.975 + z_0.8 = 1.959964 + 0.841621 = 2.801585; sd 10 over 100 episodes resolves 2.80;
  # 10% of a mean of 50 (5 points) needs ceil((2.801585 * 10 / 5)^2) = ceil(31.40) = 32.
  p = headroom.power(10.0, 100, 50.0)
  assert p["z_sum"] == pytest.approx(2.801585, abs=1e-6)
  assert p["detectable_difference"] == pytest.approx(2.801585, abs=1e-6)
  assert p["relative_difference"] == 5.0
  assert p["episodes_for_relative"] == 32


def test_settle_episode_is_the_last_crossing():
  assert headroom.settle_episode([1.0, 0.05, 0.3, 0.01, 0.02], 0.1) == 4
  assert headroom.settle_episode([0.01, 0.02], 0.1) == 1
  assert headroom.settle_episode([0.01, 0.5], 0.1) is None


def test_analyze_names_fixed_ccvl_the_oracle_and_the_grid_mean():
  grid = [0.25, 0.75]
  members = np.array([[[2.0, 2.0], [2.0, 2.0]], [[6.0, 6.0], [6.0, 6.0]]])  # [K=2, S=2, L=2]
  adaptive = np.array([[4.0, 6.0], [4.0, 6.0]])
  ref = np.full([2, 2], 3.0)
  out = headroom.analyze(grid, members, 0.25, adaptive, {"CQL": ref},
                         belief_entropy=[[0.5, 0.01], [0.01, 0.01]])
  assert (out["fixed_mean"], out["oracle_delta"], out["oracle_mean"]) == (2.0, 0.75, 6.0)
  assert (out["grid_mean"], out["spread"], out["adaptive_mean"]) == (4.0, 4.0, 5.0)
  assert out["oracle_minus_fixed"]["mean"] == 4.0
  assert out["split_half_oracle"]["value"] == 6.0  # member 1 is best on both halves
  assert out["adaptive_minus_grid_mean"]["mean"] == 1.0
  assert out["references"]["CQL"]["adaptive_minus"]["mean"] == 2.0
  # log 2 = 0.693: threshold 0.0693; sequence 0 settles after episode 2, sequence 1 after 1.
  assert out["belief"]["settle_episode"] == [2, 1]
  with pytest.raises(ValueError, match="not one of the grid's deltas"):
    headroom.analyze(grid, members, 0.5, adaptive)


def test_parse_references():
  assert headroom_eval.parse_references("auto") == ("auto",)
  assert headroom_eval.parse_references("none") == ()
  assert headroom_eval.parse_references("cql=/a, bc=/b") == (("cql", "/a"), ("bc", "/b"))
  with pytest.raises(ValueError, match="NAME=SAVEDMODEL_DIR"):
    headroom_eval.parse_references("/a/b")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
  """A tiny CCVL run on the testdata (4 steps; K = 3 grid deltas)."""
  tmp_path = tmp_path_factory.mktemp("headroom")
  root = tmp_path / "run"
  r = forked_binary.run("train_offline.py", [
      f"--dataset_dir={TESTDATA}", f"--root_dir={root}", "--num_steps=4", "--batch_size=4",
      "--reference_agents=none", "--num_deltas=2", "--num_pairs=2", "--log_interval=2",
      "--checkpoint_interval=2", "--eval_interval=0", "--eval_episodes=1",
      "--eval_max_steps=20", "--num_grid_deltas=3"], cwd=tmp_path, env=ENV)
  assert r.returncode == 0, r.stderr[-3000:]
  return root


@pytest.mark.slow
def test_headroom_binary_plays_every_member_on_the_same_episodes(tiny_run, tmp_path):
  from ccvl_tf.evaluation import atari_vector
  from ccvl_tf.evaluation import rollouts
  from ccvl_tf.experiments.offline.seeds import Seeds

  out = tmp_path / "hr"
  args = [f"--root_dir={tiny_run}", "--sequences=2", "--episodes_per_sequence=2",
          f"--output_dir={out}"]
  r = forked_binary.run("headroom.py", args, cwd=tmp_path, env=ENV, fresh=True)
  assert r.returncode == 0, r.stderr[-3000:]
  assert r.stdout.count(", played") == 4  # 3 grid members and the adaptive policy
  result = json.loads((out / "headroom.json").read_text())
  summary = json.loads((tiny_run / "summary.json").read_text())
  assert len(result["grid"]) == 3 and result["fixed_delta"] == pytest.approx(
      summary["fixed_delta"], abs=1e-6)
  fixed_name = f"delta={result['fixed_delta']:.4f}"
  assert set(result["policies"]) == {f"delta={d:.4f}" for d in result["grid"]} | {
      headroom_eval.ADAPTIVE}
  assert all(len(v) == 4 for v in result["policies"].values())
  # The grid member at Fixed-CCVL's delta (rebuilt from the checkpoint) plays the episodes the
  # run's exported Fixed-CCVL SavedModel plays on the same seeds: the same scores.
  loaded, _ = rollouts.load_saved_policy(str(tiny_run / "policy_fixed"))
  records = atari_vector.evaluate_atari(
      rollouts.CompiledPolicy(loaded), "Breakout", 4, seed=Seeds(summary["config"][
          "seed"]).headroom_eval(), epsilon=0.001, max_episode_steps=20, max_slots=2)
  assert [x.raw_score for x in records] == result["policies"][fixed_name]
  assert [x.length for x in records] == [
      e["length"] for e in json.loads(open(headroom_eval._episodes_file(str(out), fixed_name))
                                      .read())["episodes"]]
  for name in ("headroom.md", "headroom.png", "scores.csv", "belief.csv"):
    assert (out / name).stat().st_size > 0
  assert len((out / "scores.csv").read_text().splitlines()) == 1 + 4 * 4
  assert len((out / "belief.csv").read_text().splitlines()) == 1 + 4
  # The adaptive episodes record the squared Bellman errors the belief summed (3 grid deltas):
  # every transition of an episode is scored once (its FIRST step opens it, the next FIRST
  # does not score across the reset), so each count is the episode's length; belief.csv
  # carries them, episode by episode.
  adaptive = json.loads(open(headroom_eval._episodes_file(str(out), headroom_eval.ADAPTIVE))
                        .read())["episodes"]
  assert [e["sq_error_count"] for e in adaptive] == [e["length"] for e in adaptive]
  assert all(len(e["sq_error_sum"]) == 3 and min(e["sq_error_sum"]) >= 0 for e in adaptive)
  with open(out / "belief.csv", newline="") as f:
    belief_rows = list(csv.DictReader(f))
  assert list(belief_rows[0])[-4] == "sq_error_count"
  assert sum(int(r["sq_error_count"]) for r in belief_rows) == sum(e["length"] for e in adaptive)

  # A rerun with the same settings reuses every policy's episodes and writes the same numbers.
  again = forked_binary.run("headroom.py", args, cwd=tmp_path, env=ENV)
  assert again.returncode == 0, again.stderr[-3000:]
  assert again.stdout.count("reused") == 4
  assert json.loads((out / "headroom.json").read_text()) == result


def test_headroom_binary_refuses_an_odd_number_of_sequences(tmp_path):
  r = forked_binary.run("headroom.py", [f"--root_dir={tmp_path}", "--sequences=3"],
                        cwd=tmp_path, env=ENV)
  assert r.returncode != 0
  assert "--sequences must be even" in r.stderr and "Traceback" not in r.stderr
