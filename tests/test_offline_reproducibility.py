"""One seed, one network: binaries/train_offline.py trained twice on one machine gives the same
checkpoint, tensor for tensor, when the second training
  * runs beside processes that keep every CPU busy (load), and
  * sees one CPU instead of all of them (os.sched_setaffinity): TensorFlow's default thread
    count follows the CPUs a process may use, and the weights follow the thread count; the
    fixed --tf_threads (default 2) makes a machine with another core count train the same
    network (BUILD.md, "What is and is not bit-reproducible").
The training: the demo preset's CCVL (batch 32, Nature torso) for 30 steps on the real-format
testdata, where 1 and 2 intra-op threads already give different weights. The binary also fixes
the CPU kernels before TensorFlow loads (oneDNN on, its instructions at most AVX-512), unless
the environment sets them."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "binaries", "train_offline.py")
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
FLAGS = ["--reference_agents=none", "--num_steps=30", "--log_interval=10",
         "--checkpoint_interval=30", "--eval_interval=0", "--eval_episodes=1",
         "--eval_max_steps=30", "--num_grid_deltas=3"]


def _run(root, *more, preexec_fn=None, **env_vars):
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3", **env_vars)
  for name in ("TF_ENABLE_ONEDNN_OPTS", "ONEDNN_MAX_CPU_ISA"):
    if name not in env_vars:
      env.pop(name, None)
  return subprocess.run([sys.executable, BIN, f"--dataset_dir={TESTDATA}", f"--root_dir={root}",
                         *FLAGS, *more], capture_output=True, text=True, env=env, cwd=ROOT,
                        timeout=900, preexec_fn=preexec_fn)


def _train(root, preexec_fn=None):
  r = _run(root, preexec_fn=preexec_fn)
  assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
  assert ("device: CPU (no GPU visible), 2 TensorFlow threads (--tf_threads); CPU kernels: "
          "oneDNN on, ONEDNN_MAX_CPU_ISA=AVX512_CORE.") in r.stdout
  return _digest(root)


def _digest(root):
  """sha256 over every tensor of the final checkpoint (names and bytes, in name order)."""
  # TensorFlow loads in this process only here: the trainings run in subprocesses.
  from ccvl_tf.runtime import checkpoint_digest  # pylint: disable=g-import-not-at-top
  return checkpoint_digest.digest(os.path.join(root, "checkpoints", "ckpt-30"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  return _train(tmp_path_factory.mktemp("idle") / "run")


@pytest.mark.slow
def test_training_beside_busy_processes_gives_the_same_checkpoint(reference, tmp_path):
  # Busy until this process ends, however it ends: a killed pytest skips the `finally`, and
  # the spinners then stop on seeing themselves re-parented. One fewer spinner than CPUs (at
  # least one): the training's 2 threads still share the CPUs with them (and, under make test,
  # with the other pytest worker), while that worker is not starved for the whole training.
  spin = [subprocess.Popen([sys.executable, "-c",
                            "import os\nparent = os.getppid()\n"
                            "while os.getppid() == parent: pass"])
          for _ in range(max(1, (os.cpu_count() or 2) - 1))]
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


@pytest.mark.slow
def test_cpu_kernels_set_in_the_environment_win(tmp_path):
  """TF_ENABLE_ONEDNN_OPTS / ONEDNN_MAX_CPU_ISA given by the user are kept (the run stops
  early here, on a dataset of another game, after saying what it runs with)."""
  r = _run(tmp_path / "run", "--game=Pong", TF_ENABLE_ONEDNN_OPTS="0",
           ONEDNN_MAX_CPU_ISA="AVX2")
  assert r.returncode != 0 and "but this run's game is Pong" in r.stderr, r.stderr[-2000:]
  assert "CPU kernels: oneDNN off, ONEDNN_MAX_CPU_ISA=AVX2." in r.stdout, r.stdout[-2000:]


def test_pin_cpu_kernels_refuses_a_loaded_tensorflow(monkeypatch):
  import tensorflow  # noqa: F401  pylint: disable=unused-import,g-import-not-at-top
  from ccvl_tf.experiments import tf_setup  # pylint: disable=g-import-not-at-top
  for name in tf_setup.CPU_KERNELS:
    monkeypatch.delenv(name, raising=False)
  with pytest.raises(RuntimeError, match="before TensorFlow is imported"):
    tf_setup.pin_cpu_kernels()
  # Already in force (set before TensorFlow loaded, e.g. by a wrapper): nothing to do.
  for name, value in tf_setup.CPU_KERNELS.items():
    monkeypatch.setenv(name, value)
  assert tf_setup.pin_cpu_kernels() == tf_setup.CPU_KERNELS
