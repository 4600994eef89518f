"""Smoke runs of binaries/train_offline.py: real-format testdata and the default dataset path,
checkpoints, summaries, exported SavedModels (loaded in a fresh TF-only process), resume."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "binaries", "train_offline.py")
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
TINY = ["--batch_size=4", "--num_deltas=2", "--num_pairs=2", "--log_interval=2",
        "--checkpoint_interval=2", "--summary_interval=1", "--eval_episodes=1",
        "--eval_max_steps=30", "--num_grid_deltas=3"]


def _run(args, cwd):
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3")
  return subprocess.run([sys.executable, BIN, *args], capture_output=True, text=True, env=env,
                        cwd=cwd, timeout=600)


def _load_in_fresh_tf_process(policy_dir):
  code = f"""
import numpy as np, tensorflow as tf
p = tf.saved_model.load({policy_dir!r})
state = p.get_initial_state(batch_size=1)
obs = tf.zeros([1, 84, 84, 4], tf.uint8)
ts = dict(step_type=tf.constant([0]), reward=tf.constant([0.0]), discount=tf.constant([1.0]),
          observation=obs)
import collections
TimeStep = collections.namedtuple('TimeStep', ['step_type', 'reward', 'discount', 'observation'])
step = p.action(TimeStep(**ts), state)
print('ACTION', int(np.asarray(step.action).reshape(-1)[0]))
"""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("TF_USE_LEGACY_KERAS", None)
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                        timeout=300)


def test_train_on_testdata_then_resume(tmp_path):
  root = tmp_path / "run"
  r = _run([f"--dataset_dir={TESTDATA}", f"--root_dir={root}", "--num_steps=4", *TINY], tmp_path)
  assert r.returncode == 0, r.stderr[-3000:]
  assert "steps/s" in r.stdout and "ETA" in r.stdout and "loss=" in r.stdout
  assert "[eval] step 4" in r.stdout
  ckpts = sorted(f for f in os.listdir(root / "checkpoints") if f.endswith(".index"))
  assert ckpts == ["ckpt-2.index", "ckpt-4.index"]
  assert any(f.startswith("events.out.tfevents") for f in os.listdir(root / "summaries" / "train"))
  assert (root / "eval.csv").read_text().startswith("step,")
  for d in ("policy", "policy_fixed"):
    assert (root / d / "saved_model.pb").exists()
  summary = json.loads((root / "summary.json").read_text())
  assert summary["step"] == 4 and summary["game"] == "Breakout"
  assert 0 < summary["fixed_delta"] < 1 and len(summary["bellman_errors"]) == 3
  out = _load_in_fresh_tf_process(str(root / "policy"))
  assert out.returncode == 0, out.stderr[-2000:]
  action = int(out.stdout.split("ACTION")[-1])
  assert 0 <= action < 4  # Breakout's minimal action set has 4 actions

  # A second invocation with more steps resumes at the saved step.
  r2 = _run([f"--dataset_dir={TESTDATA}", f"--root_dir={root}", "--num_steps=6", *TINY], tmp_path)
  assert r2.returncode == 0, r2.stderr[-3000:]
  assert "train step 4" in r2.stdout and "Training from step 4 to 6" in r2.stdout
  assert json.loads((root / "summary.json").read_text())["resumed_from"] == 4


def test_default_dataset_is_collected_once_and_cached(tmp_path):
  root = tmp_path / "run"
  args = [f"--root_dir={root}", "--num_steps=2", "--default_dataset_steps=300", *TINY]
  r = _run(args, tmp_path)
  assert r.returncode == 0, r.stderr[-3000:]
  assert "No --dataset_dir given: collecting a default dataset of 300 transitions" in r.stdout
  assert (root / "default_dataset" / "Breakout" / "COMPLETE").exists()
  r2 = _run([*args[:1], "--num_steps=3", *args[2:]], tmp_path)
  assert r2.returncode == 0, r2.stderr[-3000:]
  assert "Using the cached default dataset" in r2.stdout


@pytest.mark.parametrize("flags,match", [
    (["--game=NotAGame"], "valid"),
    (["--agent=dqn9"], "--agent must be one of"),
    (["--alpha=-1"], "--alpha must be a finite number >= 0"),
    (["--num_pairs=0"], "--num_pairs must be an integer >= 1"),
    (["--dataset_dir=/nonexistent/replay_logs"], "does not exist"),
])
def test_bad_flags(flags, match, tmp_path):
  r = _run([f"--root_dir={tmp_path / 'r'}", *flags], tmp_path)
  assert r.returncode != 0
  assert match in r.stderr, r.stderr[-2000:]


def test_dataset_of_another_games_action_count(tmp_path):
  # The testdata is Breakout (4 actions) with the writer's ccvl_dataset.json; Pong has 6.
  r = _run([f"--dataset_dir={TESTDATA}", f"--root_dir={tmp_path / 'r'}", "--game=Pong",
            "--num_steps=1", *TINY], tmp_path)
  assert r.returncode != 0
  assert "train_offline.py: error:" in r.stderr and "Traceback" not in r.stderr
  assert "dataset of game 'Breakout' with 4 actions, but this game has 6 actions" in r.stderr
  assert not (tmp_path / "r" / "checkpoints").exists()
