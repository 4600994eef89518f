"""binaries/evaluate.py: real subprocess runs on the gridworld and MinAtar (a small exported
policy each), its body ccvl_tf.experiments.score_export on Atari, and the input checks."""
import csv
import json
import os

import ccvl_tf  # noqa: F401

import keras
import numpy as np
import pytest

import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.algorithm import policies
from ccvl_tf.evaluation import reporting
from ccvl_tf.envs import atari
from ccvl_tf.envs import gridworld_env
from ccvl_tf.envs import minatar
from ccvl_tf.experiments import score_export
from ccvl_tf.tabular import evaluation as tabular_eval
from tests.test_policies import linear_q_model
from tests import forked_binary

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(REPO, "binaries", "evaluate.py")


def _export_gridworld_policy(path, num_actions=4):
  """An adaptive policy on one-hot gridworld observations (64 states); Q favours 'right'."""
  tss = ts.time_step_spec(tf.TensorSpec((64,), tf.float32, "observation"))
  aspec = tensor_spec.BoundedTensorSpec((), tf.int32, 0, num_actions - 1, "action")
  c = np.zeros(num_actions)
  c[1] = 1.0
  model = linear_q_model(np.zeros([64, num_actions]), c)
  policy = policies.ConfidenceAdaptivePolicy(tss, aspec, model, num_grid_deltas=4, gamma=0.95)
  return policies.export_policy(policy, str(path))


def _export_pixel_policy(path, shape, num_actions, **record):
  """An adaptive policy on uint8 frames `shape` (a pooled linear Q plus a delta term);
  `record`: export_policy's game and action_set."""
  obs = keras.Input(shape, name="observation", dtype="uint8")
  d = keras.Input((None,), name="delta")
  x = keras.layers.Rescaling(1 / 255.0)(obs)
  if shape[0] > 12:
    x = keras.layers.AveragePooling2D(12)(x)
  q = keras.layers.Reshape((1, num_actions))(keras.layers.Dense(num_actions)(
      keras.layers.Flatten()(x)))
  qd = keras.layers.Dense(num_actions)(keras.layers.Reshape((-1, 1))(d))
  model = keras.Model({"observation": obs, "delta": d}, keras.layers.Add()([q, qd]))
  tss = ts.time_step_spec(tf.TensorSpec(shape, tf.uint8, "observation"))
  aspec = tensor_spec.BoundedTensorSpec((), tf.int32, 0, num_actions - 1, "action")
  policy = policies.ConfidenceAdaptivePolicy(tss, aspec, model, num_grid_deltas=4, reward_clip=1.0)
  return policies.export_policy(policy, str(path), **record)


def _run(args, fresh=False):
  """evaluate.py on `args` in its own process (tests/forked_binary.py; `fresh`: a subprocess
  start of its own, as a user's)."""
  # PYTHONPATH: the binary imports this checkout's ccvl_tf, whatever is installed.
  path = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=path)
  return forked_binary.run("evaluate.py", args, cwd=REPO, env=env, timeout=180, fresh=fresh)


def _config(policy_dir, game, output_dir, **kw):
  return score_export.EvaluateConfig(policy_dir=str(policy_dir), game=game,
                                 output_dir=str(output_dir), progress=False, **kw)


@pytest.mark.slow
def test_evaluate_binary_end_to_end_on_gridworld(tmp_path):
  policy_dir = _export_gridworld_policy(tmp_path / "policy")
  out = tmp_path / "out"
  proc = _run([f"--policy_dir={policy_dir}", "--game=gridworld", "--episodes=3", "--seeds=2",
               f"--output_dir={out}", "--bootstrap_reps=200"], fresh=True)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "evaluate gridworld" in proc.stderr  # tqdm progress
  assert "normalized IQM" in proc.stdout
  for name in ("returns.csv", "delta.csv", "summary.json", "results.csv", "returns.png",
               "delta.png"):
    assert (out / name).stat().st_size > 0, name
  with open(out / "returns.csv") as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 6 and {r["run"] for r in rows} == {"0", "1"}
  # Normalized = 100 * discounted return / optimal expected discounted return (eval slip 0.15).
  opt = tabular_eval.optimal_return(gridworld_env.eval_world())
  for r in rows:
    assert float(r["normalized_score"]) == pytest.approx(100 * float(r["raw_score"]) / opt,
                                                         rel=1e-4, abs=1e-4)
  summary = json.loads((out / "summary.json").read_text())
  assert summary["num_runs"] == 2 and summary["num_episodes"] == 6
  lo, hi = summary["normalized_iqm_ci95"]
  assert lo <= summary["normalized_iqm"] <= hi
  per_run = [np.mean([float(r["normalized_score"]) for r in rows if r["run"] == k])
             for k in "01"]
  np.testing.assert_allclose(summary["normalized_per_run_mean"], per_run, rtol=1e-4, atol=1e-4)
  with open(out / "delta.csv") as f:
    deltas = list(csv.DictReader(f))
  grid = {0.125, 0.375, 0.625, 0.875}
  assert len(deltas) == 6 and all(float(d["map_delta"]) in grid for d in deltas)
  results = reporting.read_results_csv(str(out / "results.csv"))
  assert [r["seed"] for r in results] == ["0", "1"]
  assert {r["game"] for r in results} == {"gridworld"}


@pytest.mark.slow
def test_evaluate_binary_end_to_end_on_minatar(tmp_path):
  num_actions = minatar.MinAtarEnvironment("Breakout").num_actions  # 3
  policy_dir = _export_pixel_policy(tmp_path / "policy", (10, 10, 4), num_actions)
  data = tmp_path / "data"
  data.mkdir()
  (data / "minatar_scores.json").write_text(json.dumps(
      {"games": {"Breakout": {"dqn": 10.5, "random": 0.5}}}))
  out = tmp_path / "out"
  proc = _run([f"--policy_dir={policy_dir}", "--game=minatar/Breakout", f"--data_dir={data}",
               "--episodes=2", "--seeds=1", "--max_episode_steps=40", f"--output_dir={out}",
               "--bootstrap_reps=50"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "minatar/Breakout: normalized IQM" in proc.stdout
  with open(out / "returns.csv") as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 2 and all(1 <= int(r["length"]) <= 40 for r in rows)
  # Normalized with the data's references (random 0.5, DQN 10.5), not Atari Breakout's.
  for r in rows:
    assert float(r["normalized_score"]) == pytest.approx(
        100 * (float(r["raw_score"]) - 0.5) / 10.0, rel=1e-4, abs=1e-4)
  summary = json.loads((out / "summary.json").read_text())
  assert summary["game"] == "minatar/Breakout" and summary["num_episodes"] == 2
  assert summary["policy_specs"]["num_actions"] == 3
  results = reporting.read_results_csv(str(out / "results.csv"))
  assert [(r["game"], r["seed"]) for r in results] == [("minatar/Breakout", "0")]
  assert results[0]["score"] == pytest.approx(np.mean([float(r["raw_score"]) for r in rows]),
                                              rel=1e-5)
  # Without --data_dir: raw scores only, said in the summary.
  raw_out = tmp_path / "raw"
  summary = score_export.run(_config(policy_dir, "minatar/breakout", raw_out, episodes=1,
                                 max_episode_steps=5))
  assert "normalized_iqm" not in summary and "--data_dir" in summary["note"]
  with open(raw_out / "returns.csv") as f:
    assert next(csv.DictReader(f))["normalized_score"] == "nan"


@pytest.mark.slow
def test_evaluate_binary_rejects_a_directory_that_is_not_a_saved_model(tmp_path):
  proc = _run([f"--policy_dir={tmp_path}", "--game=gridworld", "--episodes=1",
               f"--output_dir={tmp_path / 'out'}"])
  assert proc.returncode != 0
  assert "is not a SavedModel directory" in proc.stderr
  assert not (tmp_path / "out").exists()


def test_evaluate_bad_inputs_fail_fast(tmp_path):
  three_actions = _export_gridworld_policy(tmp_path / "p3", num_actions=3)
  out = tmp_path / "o"
  # The directory above an export (a run's --root_dir) names the exports inside it.
  with pytest.raises(ValueError, match=rf"^'{tmp_path}' is a run's directory, not a SavedModel "
                                       rf"directory: its exported policies are '{three_actions}'$"):
    score_export.run(_config(str(tmp_path), "gridworld", out, episodes=1))
  assert not out.exists()
  with pytest.raises(ValueError, match="has 3 actions but the game has 4"):
    score_export.run(_config(three_actions, "gridworld", out, episodes=1))
  with pytest.raises(ValueError, match="--episodes must be an integer >= 1"):
    score_export.run(_config(three_actions, "gridworld", out, episodes=0))
  with pytest.raises(ValueError, match="--seeds must be an integer >= 1"):
    score_export.run(_config(three_actions, "gridworld", out, episodes=1, seeds=0))
  with pytest.raises(ValueError, match="--policy_dir .*nope does not exist"):
    score_export.run(_config(tmp_path / "nope", "gridworld", out, episodes=1))
  with pytest.raises(ValueError, match="--data_dir gives MinAtar reference scores"):
    score_export.run(_config(three_actions, "Pong", out, episodes=1, data_dir=str(tmp_path)))
  # A bad game name lists the valid ones: the gridworld, MinAtar's and the ALE's games.
  with pytest.raises(ValueError, match=r"unknown game 'Pongg'; valid games: 'gridworld'; "
                                       r"MinAtar 'minatar/<Game>' with <Game> one of Asterix, "
                                       r"Breakout, .*; or an Atari game, one of .*Pong"):
    score_export.run(_config(three_actions, "Pongg", out, episodes=1))
  with pytest.raises(ValueError, match="unknown MinAtar game 'minatar/Pong'; valid games"):
    score_export.run(_config(three_actions, "minatar/Pong", out, episodes=1))
  with pytest.raises(FileNotFoundError, match="minatar_scores.json does not exist"):
    score_export.run(_config(three_actions, "minatar/Breakout", out, episodes=1,
                         data_dir=str(tmp_path)))
  assert not out.exists()


@pytest.mark.slow
def test_evaluate_on_atari_with_a_tiny_policy(tmp_path):
  num_actions = atari.AtariEnvironment("Pong").num_actions  # 6
  policy_dir = _export_pixel_policy(tmp_path / "pong", (84, 84, 4), num_actions)
  summary = score_export.run(_config(policy_dir, "Pong", tmp_path / "out", episodes=1,
                                 max_episode_steps=30, bootstrap_reps=50))
  with open(tmp_path / "out" / "returns.csv") as f:
    row = next(csv.DictReader(f))
  assert int(row["length"]) == 30  # truncated by max_episode_steps
  # Normalized against random -20.7 and Nature DQN 18.9.
  assert float(row["normalized_score"]) == pytest.approx(
      100 * (float(row["raw_score"]) + 20.7) / 39.6, rel=1e-4)
  assert summary["game"] == "Pong"
  with pytest.raises(ValueError, match="6 actions but the game has 4"):
    score_export.run(_config(policy_dir, "Breakout", tmp_path / "o2", episodes=1))


@pytest.mark.slow
def test_a_policy_of_another_game_with_as_many_actions_is_refused_naming_both(tmp_path, capsys):
  """A Breakout export (ALE actions [0, 1, 3, 4]) evaluated on Atlantis ([0, 1, 11, 12]): the
  action count and frames agree, so before, it ran and wrote 'Atlantis: raw mean 0' and a
  results.csv row. The export records its game; evaluation refuses another one."""
  breakout, atlantis = atari.AtariEnvironment("Breakout"), atari.AtariEnvironment("Atlantis")
  assert (breakout.num_actions, breakout.action_set) == (4, [0, 1, 3, 4])
  assert (atlantis.num_actions, atlantis.action_set) == (4, [0, 1, 11, 12])
  policy_dir = _export_pixel_policy(tmp_path / "breakout", (84, 84, 4), 4)
  # _export_pixel_policy writes no record (as exports made before records were kept): noted.
  summary = score_export.run(_config(policy_dir, "Atlantis", tmp_path / "o1", episodes=1,
                                     max_episode_steps=5, bootstrap_reps=10))
  assert summary["policy_specs"]["game_note"].startswith(f"{policy_dir} has no ccvl_policy.json")
  assert "its game and action set cannot be checked against Atlantis" in capsys.readouterr().err
  recorded = _export_pixel_policy(tmp_path / "breakout_rec", (84, 84, 4), 4, game="Breakout",
                                  action_set=breakout.action_set)
  with pytest.raises(ValueError) as e:
    score_export.run(_config(recorded, "Atlantis", tmp_path / "out", episodes=1))
  assert str(e.value) == (
      f"{recorded}/ccvl_policy.json records a policy of another game: the game Breakout, but "
      f"this run's game is Atlantis; the action set (action ids) [0, 1, 3, 4], but Atlantis's "
      f"is [0, 1, 11, 12]. Use it with the game it was trained in (Breakout)")
  assert not (tmp_path / "out").exists()
  summary = score_export.run(_config(recorded, "breakout", tmp_path / "o2", episodes=1,
                                     max_episode_steps=5, bootstrap_reps=10))
  assert summary["game"] == "Breakout" and summary["policy_specs"]["game_note"] is None

