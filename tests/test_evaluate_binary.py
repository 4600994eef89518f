"""Smoke tests of binaries/evaluate.py (one real subprocess run) and its input checks."""
import csv
import json
import os
import subprocess
import sys

import ccvl_tf  # noqa: F401

import keras
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf import evaluation
from ccvl_tf import policies
from ccvl_tf.envs import atari
from tests.test_policies import linear_q_model

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(REPO, "binaries", "evaluate.py")


def _export_gridworld_policy(path, num_actions=4):
  """An adaptive policy on one-hot gridworld observations (64 states); Q favours 'right'."""
  tss = ts.time_step_spec(tf.TensorSpec((64,), tf.float32, "observation"))
  aspec = tensor_spec.BoundedTensorSpec((), tf.int32, 0, num_actions - 1, "action")
  c = np.zeros(num_actions)
  c[1] = 1.0
  model = linear_q_model(np.zeros([64, num_actions]), c)
  policy = policies.ConfidenceAdaptivePolicy(tss, aspec, model, num_deltas=4, gamma=0.95)
  return policies.export_policy(policy, str(path))


def _run(args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  return subprocess.run([sys.executable, BINARY, *args], capture_output=True, text=True,
                        timeout=180, env=env, cwd=REPO)


@pytest.mark.slow
def test_evaluate_binary_end_to_end_on_gridworld(tmp_path):
  policy_dir = _export_gridworld_policy(tmp_path / "policy")
  out = tmp_path / "out"
  proc = _run([f"--policy_dir={policy_dir}", "--game=gridworld", "--episodes=3", "--seeds=2",
               f"--output_dir={out}", "--bootstrap_reps=200"])
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
  from ccvl_tf.tabular import evaluation as tabular_eval
  opt = tabular_eval.optimal_return(evaluation.gridworld_environment().world)
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
  results = evaluation.read_results_csv(str(out / "results.csv"))
  assert [r["seed"] for r in results] == ["0", "1"]


@pytest.mark.slow
def test_evaluate_binary_rejects_a_directory_that_is_not_a_saved_model(tmp_path):
  proc = _run([f"--policy_dir={tmp_path}", "--game=gridworld", "--episodes=1",
               f"--output_dir={tmp_path / 'out'}"])
  assert proc.returncode != 0
  assert "is not a SavedModel directory" in proc.stderr
  assert not (tmp_path / "out").exists()


def test_evaluate_bad_inputs_fail_fast(tmp_path):
  three_actions = _export_gridworld_policy(tmp_path / "p3", num_actions=3)
  with pytest.raises(ValueError, match="has 3 actions but the game has 4"):
    evaluation.evaluate(three_actions, "gridworld", 1, 1, str(tmp_path / "o"), progress=False)
  with pytest.raises(ValueError, match="--episodes must be an integer >= 1"):
    evaluation.evaluate(three_actions, "gridworld", 0, 1, str(tmp_path / "o"), progress=False)
  with pytest.raises(ValueError, match="--seeds must be an integer >= 1"):
    evaluation.evaluate(three_actions, "gridworld", 1, 0, str(tmp_path / "o"), progress=False)
  with pytest.raises(ValueError, match="not a directory"):
    evaluation.evaluate(str(tmp_path / "nope"), "gridworld", 1, 1, str(tmp_path / "o"),
                        progress=False)
  assert not (tmp_path / "o").exists()


def test_evaluate_on_atari_with_a_tiny_policy(tmp_path):
  num_actions = atari.make_env("Pong").num_actions  # 6
  obs = keras.Input((84, 84, 4), name="observation", dtype="uint8")
  d = keras.Input((None,), name="delta")
  x = keras.layers.Flatten()(keras.layers.AveragePooling2D(12)(
      keras.layers.Rescaling(1 / 255.0)(obs)))
  q = keras.layers.Reshape((1, num_actions))(keras.layers.Dense(num_actions)(x))
  qd = keras.layers.Dense(num_actions)(keras.layers.Reshape((-1, 1))(d))
  model = keras.Model({"observation": obs, "delta": d}, keras.layers.Add()([q, qd]))
  tss = ts.time_step_spec(tf.TensorSpec((84, 84, 4), tf.uint8, "observation"))
  aspec = tensor_spec.BoundedTensorSpec((), tf.int32, 0, num_actions - 1, "action")
  policy = policies.ConfidenceAdaptivePolicy(tss, aspec, model, num_deltas=4, reward_clip=1.0)
  policy_dir = policies.export_policy(policy, str(tmp_path / "pong"))
  summary = evaluation.evaluate(policy_dir, "Pong", 1, 1, str(tmp_path / "out"),
                                max_episode_steps=30, bootstrap_reps=50, progress=False)
  with open(tmp_path / "out" / "returns.csv") as f:
    row = next(csv.DictReader(f))
  assert int(row["length"]) == 30  # truncated by max_episode_steps
  # Normalized against random -20.7 and Nature DQN 18.9.
  assert float(row["normalized_score"]) == pytest.approx(
      100 * (float(row["raw_score"]) + 20.7) / 39.6, rel=1e-4)
  assert summary["game"] == "Pong"
  with pytest.raises(ValueError, match="6 actions but the game has 4"):
    evaluation.evaluate(policy_dir, "Breakout", 1, 1, str(tmp_path / "o2"), progress=False)
