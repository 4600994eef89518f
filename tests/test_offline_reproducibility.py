"""One seed, one network: binaries/train_offline.py trained twice on one machine gives the same
checkpoint, tensor for tensor, when the second training
  * runs beside processes that keep every CPU busy (load), and
  * sees one CPU instead of all of them (os.sched_setaffinity): TensorFlow's default thread
    count follows the CPUs a process may use, and the weights follow the thread count; the
    fixed --tf_threads (default 2) makes a machine with another core count train the same
    network (BUILD.md, "What is and is not bit-reproducible").
The training: the demo preset's CCVL (batch 32, Nature torso) for 30 steps on the real-format
testdata, where 1 and 2 intra-op threads already give different weights."""
import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "binaries", "train_offline.py")
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
FLAGS = ["--reference_agents=none", "--num_steps=30", "--log_interval=10",
         "--checkpoint_interval=30", "--eval_interval=0", "--eval_episodes=1",
         "--eval_max_steps=30", "--num_grid_deltas=3"]


def _train(root, preexec_fn=None):
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3")
  r = subprocess.run([sys.executable, BIN, f"--dataset_dir={TESTDATA}", f"--root_dir={root}",
                      *FLAGS], capture_output=True, text=True, env=env, cwd=ROOT, timeout=900,
                     preexec_fn=preexec_fn)
  assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
  return _digest(root)


def _digest(root):
  """sha256 over every tensor of the final checkpoint (names and bytes, in name order)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(os.path.join(root, "checkpoints", "ckpt-30"))
  digest = hashlib.sha256()
  for key in sorted(reader.get_variable_to_shape_map()):
    if key.endswith("OBJECT_CONFIG_JSON") or key == "_CHECKPOINTABLE_OBJECT_GRAPH":
      continue
    digest.update(key.encode())
    digest.update(np.asarray(reader.get_tensor(key)).tobytes())
  return digest.hexdigest()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  return _train(tmp_path_factory.mktemp("idle") / "run")


@pytest.mark.slow
def test_training_beside_busy_processes_gives_the_same_checkpoint(reference, tmp_path):
  spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
          for _ in range(os.cpu_count() or 2)]
  try:
    busy = _train(tmp_path / "run")
  finally:
    for p in spin:
      p.kill()
      p.wait()
  assert busy == reference


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2,
                    reason="needs CPU affinity and 2 or more CPUs")
def test_training_on_one_cpu_gives_the_same_checkpoint(reference, tmp_path):
  one_cpu = _train(tmp_path / "run",
                   preexec_fn=lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}))
  assert one_cpu == reference
