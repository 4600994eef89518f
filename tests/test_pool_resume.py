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
  assert "--pool_checkpoints=4 is more than the 3 checkpoint(s) of subset" in r.stderr
  r = _run([f"--root_dir={tmp_path / 'b'}", "--num_steps=2", *TINY[:-1],
            f"--dataset_dir={TESTDATA},{TESTDATA}"], tmp_path)
  assert r.returncode != 0
  assert "several runs are read as a checkpoint pool only" in r.stderr
  r = _run([f"--root_dir={tmp_path / 'c'}", "--num_steps=2", "--pool_swap_steps=0", *TINY],
           tmp_path)
  assert r.returncode != 0 and "--pool_swap_steps" in r.stderr


def test_pool_settings_in_the_config_record_and_fingerprint(tmp_path):
  import json  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline import config  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline import run_fingerprint  # pylint: disable=g-import-not-at-top
  base = ["--game=Breakout", f"--root_dir={tmp_path / 'r'}", f"--dataset_dir={TESTDATA}"]
  saved = json.loads(json.dumps(config.record(config.config_from_args(base))))
  assert saved["pool_checkpoints"] == 0 and saved["pool_swap_steps"] == 62_500
  # A record written before the pool settings existed: the defaults are no change ...
  older = {k: v for k, v in saved.items() if not k.startswith("pool_")}
  assert config.changed_settings(older, config.config_from_args(base)) == []
  # ... a pool is.
  assert config.changed_settings(older, config.config_from_args(
      base + ["--pool_checkpoints=2"])) == ["pool_checkpoints: None -> 2"]
  plan = config.resolve(config.config_from_args(base))
  identity = {"path": TESTDATA}
  assert "pool" not in run_fingerprint.fingerprint(plan.record, plan.learner, identity, 10)
  assert plan.data.pool is None
  pooled = config.resolve(config.config_from_args(
      base + ["--pool_checkpoints=2", "--pool_swap_steps=100", "--num_steps=1000"]))
  assert run_fingerprint.fingerprint(pooled.record, pooled.learner, identity, 10)["pool"] == {
      "checkpoints": 2, "swap_steps": 100}
  # Batches 900-999 are draw 9: the held-out batches' draw.
  assert pooled.data.pool.final_draw == 9


def test_several_runs_are_one_pool_setting_each_spelled_once(tmp_path):
  from ccvl_tf.experiments.offline import config  # pylint: disable=g-import-not-at-top
  run1 = os.path.dirname(TESTDATA)  # a run directory: its replay_logs is the dataset
  cfg = config.config_from_args(["--game=Breakout", f"--root_dir={tmp_path / 'r'}",
                                 f"--dataset_dir={run1}, {TESTDATA}/", "--pool_checkpoints=1"])
  assert cfg.dataset_dir == f"{TESTDATA},{TESTDATA}"
  with pytest.raises(ValueError, match="names a directory twice"):
    cfg.validate()
  os.symlink(os.path.dirname(TESTDATA), tmp_path / "link")  # the run again, through a link
  cfg = config.config_from_args(["--game=Breakout", f"--root_dir={tmp_path / 'r'}",
                                 f"--dataset_dir={TESTDATA},{tmp_path / 'link'}",
                                 "--pool_checkpoints=1"])
  with pytest.raises(ValueError, match=r"names a directory twice: .* \(two spellings resolve "
                                       r"to one directory\)$"):
    cfg.validate()
  cfg = config.config_from_args(["--game=Breakout", f"--root_dir={tmp_path / 'r'}",
                                 f"--dataset_dir={TESTDATA},{tmp_path / 'none'}",
                                 "--pool_checkpoints=1"])
  with pytest.raises(ValueError, match=f"--dataset_dir {tmp_path / 'none'} does not exist"):
    cfg.validate()


def test_a_truncated_file_of_a_pooled_run_is_one_line_before_anything_is_written(tmp_path):
  """Before, train_offline.py --dataset_dir=A,B --pool_checkpoints=K with an observation file
  of B cut short trained until a draw reached the file (or never saw it), then printed a
  129-line tf.data traceback and stalled at exit, leaving fingerprint.json and summaries/ in the
  run directory. The pool's survey now names the file, before the run writes anything."""
  import shutil  # pylint: disable=g-import-not-at-top
  other = tmp_path / "B" / "replay_logs"
  shutil.copytree(TESTDATA, other)
  bad = other / "$store$_observation_ckpt.2.gz"
  with open(bad, "r+b") as f:
    f.truncate(30_000)
  root = tmp_path / "run"
  r = _run([f"--root_dir={root}", "--num_steps=2", *POOL, *TINY[:-1],
            f"--dataset_dir={TESTDATA},{other}"], tmp_path)
  assert r.returncode != 0
  assert r.stderr.strip().splitlines() == [r.stderr.strip()], r.stderr[-3000:]
  assert r.stderr.startswith(f"train_offline.py: error: {bad} is corrupt: "), r.stderr
  # No fingerprint, no summaries (run_lock removes the directory it made).
  assert not root.exists() or sorted(os.listdir(root)) in ([], ["run.lock"])
