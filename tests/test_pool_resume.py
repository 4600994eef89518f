"""train_offline.py with a checkpoint pool (--pool_checkpoints): a run stopped and resumed
trains the same network as one that was not (the pool's draws and the batches sampled from
them depend on the seed and the batch number alone), and the settings are refused clearly."""
import os

import pytest

from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
# The testdata's 3 checkpoints, 1 in memory at a time, a new draw every 3 steps: steps 0-2,
# 3-5 and 6-7 train on three draws, the resume at step 4 falls inside the second.
POOL = ["--pool_checkpoints=1", "--pool_swap_steps=3"]
TINY = ["--reference_agents=none", "--batch_size=4", "--num_deltas=2", "--num_pairs=2",
        "--log_interval=2", "--checkpoint_interval=4", "--eval_interval=0",
        "--eval_episodes=1", "--eval_max_steps=10", "--num_grid_deltas=2",
        f"--dataset_dir={TESTDATA}"]


def _run(args, cwd):
  return forked_binary.run("train_offline.py", args, cwd=cwd)


def _digest(root, step):
  from ccvl_tf.runtime import checkpoint_digest  # pylint: disable=g-import-not-at-top
  return checkpoint_digest.digest(os.path.join(root, "checkpoints", f"ckpt-{step}"))


@pytest.mark.slow
def test_a_resumed_pool_run_trains_the_same_network(tmp_path):
  whole, parts = tmp_path / "whole", tmp_path / "parts"
  r = _run([f"--root_dir={whole}", "--num_steps=8", *POOL, *TINY], tmp_path)
  assert r.returncode == 0, r.stderr[-3000:]
  assert "Checkpoint pool: 2,489 transitions in 3 checkpoint(s), 1 in memory" in r.stdout
  draws = [line.split("run:suffix ")[1].split(";")[0] for line in r.stdout.splitlines()
           if line.startswith("Checkpoint pool draw ")]
  assert len(draws) >= 3 and sorted(draws[:3]) == ["0:0", "0:1", "0:2"]  # one epoch
  r = _run([f"--root_dir={parts}", "--num_steps=4", *POOL, *TINY], tmp_path)
  assert r.returncode == 0, r.stderr[-3000:]
  r = _run([f"--root_dir={parts}", "--num_steps=8", *POOL, *TINY], tmp_path)
  assert r.returncode == 0, r.stderr[-3000:]
  assert "Training from step 4 to 8." in r.stdout
  assert _digest(parts, 8) == _digest(whole, 8)
  assert _digest(parts, 4) == _digest(whole, 4)


@pytest.mark.slow
def test_pool_settings_are_refused_clearly(tmp_path):
  r = _run([f"--root_dir={tmp_path / 'a'}", "--num_steps=2", "--pool_checkpoints=4", *TINY],
           tmp_path)
  assert r.returncode != 0
  assert "--pool_checkpoints=4 is more than the 3 checkpoint(s) with transitions" in r.stderr
  r = _run([f"--root_dir={tmp_path / 'b'}", "--num_steps=2", *TINY[:-1],
            f"--dataset_dir={TESTDATA},{TESTDATA}"], tmp_path)
  assert r.returncode != 0
  assert "several runs are read as a checkpoint pool only" in r.stderr
  r = _run([f"--root_dir={tmp_path / 'c'}", "--num_steps=2", "--pool_swap_steps=0", *TINY],
           tmp_path)
  assert r.returncode != 0 and "--pool_swap_steps" in r.stderr
