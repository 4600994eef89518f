"""A quiet start: a binary started the way `make demo` starts it prints the project's own lines
first, not TensorFlow's cuFFT / cuDNN / cuBLAS registration errors, oneDNN notices or Gym's
banner (ccvl_tf/runtime/quiet.py; the Makefile leaves TensorFlow's log level to the binaries)."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
NOISE = ("Unable to register", "cuFFT", "cuDNN", "cuBLAS", "oneDNN custom operations",
         "Gym has been unmaintained", "Powered by Stella", "A.L.E:")


def _make_environment():
  """The environment the Makefile's recipes run in (its exports over this process's)."""
  env = {k: v for k, v in os.environ.items()
         if k not in ("TF_CPP_MIN_LOG_LEVEL", "CCVL_VERBOSE", "TF_USE_LEGACY_KERAS")}
  recipe = 'print-env:\n\t@echo "TF_CPP_MIN_LOG_LEVEL=$$TF_CPP_MIN_LOG_LEVEL"\n' \
           '\t@echo "TF_USE_LEGACY_KERAS=$$TF_USE_LEGACY_KERAS"\n'
  out = subprocess.run(["make", "-s", "-f", "Makefile", "-f", "-", "print-env"], input=recipe,
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=60,
                       check=True).stdout
  for line in out.splitlines():
    name, value = line.split("=", 1)
    if value:
      env[name] = value
  return env


@pytest.fixture(scope="module")
def make_env():
  if shutil.which("make") is None:
    pytest.skip("make is not installed")
  return _make_environment()


def _first_lines(args, env, tmp_path, count=6):
  r = subprocess.run([sys.executable, os.path.join(ROOT, "binaries", "train_offline.py"), *args],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                     cwd=tmp_path, timeout=600)
  return r.returncode, r.stdout.splitlines()[:count]


def test_the_makefile_leaves_tensorflows_log_level_to_the_binaries(make_env):
  assert "TF_CPP_MIN_LOG_LEVEL" not in make_env
  assert make_env.get("TF_USE_LEGACY_KERAS") == "1"


@pytest.mark.slow
def test_help_starts_with_the_binarys_own_lines(make_env, tmp_path):
  _, lines = _first_lines(["--helpfull"], make_env, tmp_path)
  assert lines[0] == ("Offline training of CCVL or a baseline (`ccvl_tf.fit`); --helpfull "
                      "lists every setting."), lines
  assert not [line for line in lines if any(n in line for n in NOISE)], lines


@pytest.mark.slow
def test_a_run_starts_with_the_runs_own_lines(make_env, tmp_path):
  code, lines = _first_lines(
      [f"--dataset_dir={TESTDATA}", f"--root_dir={tmp_path / 'run'}", "--num_steps=1",
       "--batch_size=4", "--reference_agents=none", "--eval_interval=0", "--eval_episodes=1",
       "--eval_max_steps=5", "--num_grid_deltas=2"], make_env, tmp_path, count=3)
  assert code == 0, lines
  assert lines[0].startswith("device: CPU (no GPU visible), 2 TensorFlow threads "
                             "(--tf_threads)"), lines
  assert lines[1].startswith("Preset demo ("), lines
  assert lines[2].startswith("Loading "), lines
