"""train_offline.py refuses to resume checkpoints trained on another configuration."""
import os
import shutil

import pytest

from ccvl_tf.experiments.offline import presets
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
TINY = ["--reference_agents=none", "--batch_size=4", "--num_deltas=2", "--num_pairs=2",
        "--log_interval=2",
        "--checkpoint_interval=2", "--eval_interval=0", "--eval_episodes=1",
        "--eval_max_steps=10", "--num_grid_deltas=2", f"--dataset_dir={TESTDATA}"]


def _run(args, cwd):
  """train_offline.py on `args` in its own process (tests/forked_binary.py)."""
  return forked_binary.run("train_offline.py", args, cwd=cwd)


@pytest.fixture(scope="module")
def two_step_run(tmp_path_factory):
  """A finished 2-step run of the TINY settings, which each test copies and resumes."""
  base = tmp_path_factory.mktemp("two_step")
  r = _run([f"--root_dir={base / 'run'}", "--num_steps=2", *TINY], base)
  assert r.returncode == 0, r.stderr[-3000:]
  return base / "run"


def _copy(run, tmp_path):
  """A copy of `run` at tmp_path/run (a run's files name no absolute path of their own)."""
  shutil.copytree(run, tmp_path / "run")
  return tmp_path / "run"


@pytest.mark.slow
def test_resume_with_other_settings_is_refused_unless_allowed(two_step_run, tmp_path):
  root = _copy(two_step_run, tmp_path)
  r = _run([f"--root_dir={root}", "--num_steps=4", "--alpha=50", "--seed=7", *TINY], tmp_path)
  assert r.returncode != 0
  alpha = presets.PRESETS["demo"]["ccvl"]["alpha"]  # the default preset's
  assert f"alpha: {alpha!r} -> 50.0" in r.stderr and "seed: 0 -> 7" in r.stderr
  assert "--allow_config_change" in r.stderr
  assert sorted(f for f in os.listdir(root / "checkpoints") if f.endswith(".index")) == \
      ["ckpt-2.index"]                                  # nothing trained, nothing lost
  r = _run([f"--root_dir={root}", "--num_steps=4", "--alpha=50", "--seed=7",
            "--allow_config_change", *TINY], tmp_path)
  assert r.returncode == 0, r.stderr[-3000:]
  assert "Resuming although the run's fingerprint changed" in r.stdout
  assert "Resumed from" in r.stdout and "Training from step 2 to 4." in r.stdout


@pytest.mark.slow
def test_an_explicit_default_resumes_and_checkpoints_without_their_records_are_refused(
    two_step_run, tmp_path):
  """Before: resuming a default run with --reading=paper (the default) was refused as a
  configuration change; with fingerprint.json deleted a resume at --alpha=50 trained on and
  recorded alpha 50; with the state file deleted the run trained from step 0 over the old
  checkpoints."""
  root = _copy(two_step_run, tmp_path)
  r = _run([f"--root_dir={root}", "--num_steps=4", "--reading=paper", *TINY], tmp_path)
  assert r.returncode == 0, r.stderr[-3000:]
  assert "Training from step 2 to 4." in r.stdout
  ckpt = root / "checkpoints"
  os.rename(ckpt / "fingerprint.json", tmp_path / "fingerprint.json")
  r = _run([f"--root_dir={root}", "--num_steps=6", "--alpha=50", *TINY], tmp_path)
  assert r.returncode != 0
  assert r.stderr.strip().splitlines()[-1].startswith(
      f"train_offline.py: error: {ckpt} holds the checkpoints ckpt-2, ckpt-4 but not their "
      f"{ckpt}/fingerprint.json"), r.stderr[-3000:]
  os.rename(tmp_path / "fingerprint.json", ckpt / "fingerprint.json")
  os.remove(ckpt / "checkpoint")
  r = _run([f"--root_dir={root}", "--num_steps=6", *TINY], tmp_path)
  assert r.returncode != 0
  assert "but not their state file" in r.stderr.strip().splitlines()[-1], r.stderr[-3000:]
  assert sorted(f for f in os.listdir(ckpt) if f.endswith(".index")) == \
      ["ckpt-2.index", "ckpt-4.index"]
