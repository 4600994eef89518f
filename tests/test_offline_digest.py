"""The offline run trains the network it trained before its configuration was resolved in one
place: train_offline.py's flags for a short CCVL run, every agent setting and every setting of
the run's fingerprint given explicitly (so that later changes of a default do not move it),
give the checkpoint and the fingerprint that the code of commit 7c13051 gave.

How the fixture was made (on this project's 2-core AVX-512 machine):
    git worktree add /tmp/old 7c13051 && cd /tmp/old
    PYTHONPATH=/tmp/old python binaries/train_offline.py --root_dir=/tmp/old_run \\
        --dataset_dir=/tmp/old/testdata/dqn_replay/Breakout/1/replay_logs <FLAGS below>
    python -c "from ccvl_tf import checkpoint_digest; \\
        print(checkpoint_digest.digest('/tmp/old_run/checkpoints/ckpt-150'))"
and FINGERPRINT is that run's checkpoints/fingerprint.json without the dataset's path. The
test trains with today's code through the binary's own flags and config (train_offline.py's
`config_from_flags`), then `runner.setup` and `runner.train` alone (no export, diagnostics or
results table), in a subprocess that fixes the CPU kernels before TensorFlow loads as the
binary does. The weights depend on the CPU's kernels (BUILD.md, "What is and is not
bit-reproducible"): on a CPU without AVX-512 the digest differs, and the test is skipped.
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")

FLAGS = [
    "--game=Breakout", "--subset=all", "--seed=100", "--tf_threads=2", "--deterministic=false",
    "--batch_size=32", "--num_steps=150", "--checkpoint_interval=150", "--log_interval=50",
    "--summary_interval=50", "--eval_interval=0", "--eval_episodes=1", "--eval_max_steps=20",
    "--eval_env=sequential", "--num_grid_deltas=4", "--reference_agents=none",
    "--default_dataset_steps=50000", "--default_dataset_policy=auto",
    "--default_dataset_env=auto", "--behaviour_epsilon=0.25",
    # The agent: the demo preset's values given as flags, a target period the run reaches.
    "--agent=ccvl", "--preset=demo", "--alpha=1.0", "--learning_rate=2.5e-4",
    "--adam_epsilon=1e-8", "--dr3_coef=0", "--target_update_period=50", "--num_deltas=8",
    "--num_pairs=2", "--policy_delta=0.5", "--objective=algorithm1", "--gap=logsumexp",
    "--delta_head=monotone", "--count_normalization=mean", "--count_ridge=1e-3",
    "--count_ridge_mode=relative", "--count_weight=linear", "--belief_resample=episode",
    # Options added after 7c13051, given at the values that reproduce its network: no support
    # head, no delta-independent gap (they join the fingerprint's ccvl_options below).
    "--support_threshold=0", "--gap_weight=0"]

DIGEST = "4f0f7bae960bd657b54755afa2a6d6227ea3b0eaa6611225ad51bc50d5221f0b"
FINGERPRINT = {
    "adam_epsilon": 1e-08, "agent": "ccvl", "alpha": 1.0, "batch_size": 32,
    "behaviour_epsilon": 0.25,
    "ccvl_options": {"belief_resample": "episode", "count_normalization": "mean",
                     "count_ridge": 0.001, "count_ridge_mode": "relative",
                     "count_weight": "linear", "delta_head": "monotone", "gap": "logsumexp",
                     "gap_weight": 0.0, "objective": "algorithm1", "support_threshold": 0.0},
    "dataset": {"files": 19, "listing_sha256": "fe120be8f60eaf19"},
    "default_dataset_policy": "auto", "default_dataset_steps": 50000, "dr3_coef": 0.0,
    "game": "Breakout", "learning_rate": 0.00025, "num_deltas": 8, "num_pairs": 2,
    "num_transitions": 2489, "policy_delta": 0.5, "preset": "demo", "seed": 100,
    "subset": "all", "target_update_period": 50}

# train_offline.py up to the end of training: its flags, its config, the run's set-up.
DRIVER = """
import sys
import ccvl_tf
from ccvl_tf import quiet
quiet.quiet_start()
from ccvl_tf.experiments import tf_setup
tf_setup.pin_cpu_kernels()
sys.path.insert(0, sys.argv[1])
import train_offline  # defines the binary's flags
from absl import flags
from ccvl_tf.experiments.offline import runner
flags.FLAGS(["train_offline.py", *sys.argv[2:]])
cfg = train_offline.config_from_flags()
cfg.validate()
tf_setup.configure_tensorflow(cfg.tf_threads, cfg.deterministic)
runner.train(runner.setup(cfg, print), print)
"""


def _avx512() -> bool:
  try:
    with open("/proc/cpuinfo") as f:
      return "avx512f" in f.read()
  except OSError:
    return False


@pytest.mark.skipif(not _avx512(), reason="the fixture's weights are those of AVX-512 kernels")
def test_short_ccvl_run_trains_the_network_of_the_earlier_code(tmp_path):
  root = tmp_path / "run"
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3")
  for name in ("TF_ENABLE_ONEDNN_OPTS", "ONEDNN_MAX_CPU_ISA"):
    env.pop(name, None)
  r = subprocess.run([sys.executable, "-c", DRIVER, os.path.join(ROOT, "binaries"),
                      f"--dataset_dir={TESTDATA}", f"--root_dir={root}", *FLAGS],
                     capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
  assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
  from ccvl_tf import checkpoint_digest  # pylint: disable=g-import-not-at-top
  assert checkpoint_digest.digest(str(root / "checkpoints" / "ckpt-150")) == DIGEST
  fingerprint = json.loads((root / "checkpoints" / "fingerprint.json").read_text())
  assert fingerprint["dataset"].pop("path") == TESTDATA
  assert fingerprint == FINGERPRINT
