"""A refactor must not change what a short offline run trains. The run: the demo preset's CCVL
for 150 steps of batch 32 on the testdata, every agent setting given (tests/short_ccvl_run.py),
each training in its own process with the binaries' CPU-kernel pinning. Two checks, both valid
on any CPU:

  * Same machine, two code paths, bit for bit: train_offline.py's path (its flags, config
    resolution, preset, agent registry and training loop) and the same agent built and trained
    through the library alone give the same checkpoint, every tensor. This covers all 150
    steps (target copies at 50, 100, 150; the count estimate refreshed at 0 and 100) and every
    setting: the library path spells out each one, so a changed default fails it. A change
    both paths share (a loss, the agent's code) passes it.
  * Against a reference, within a tolerance: the library's metrics of the first 50 steps
    (REFERENCE_METRICS) match testdata/short_ccvl_run_reference.json, made on one machine, to
    RTOL. Measured there (an AVX-512 CPU; each in its own process): other kernels -- oneDNN's ISA
    capped at AVX2 or SSE41, oneDNN off, oneDNN off and AVX2, 1 thread -- move them by at most
    8.8e-6 (relative, any step and metric); the TD term scaled by 1.01 in the loss moves them by
    0.18 (tools/mutation_check.py --only short_run). Later steps are not compared: other
    kernels' trajectories part after the first target copy, and the count estimate's refresh
    at step 100 (an ill-conditioned inverse) makes their rounding differences O(1).

"Another CPU" is tested as it happens: the library's run again with oneDNN's instruction set
capped below this CPU's (AVX2 on an AVX-512 CPU, SSE41 otherwise), which trains other weights
than the pinned kernels (checked) and must still match the reference to RTOL.
"""
import json
import os
import subprocess
import sys

import pytest

from tests import short_ccvl_run as run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RTOL = 1e-3


def _other_cap() -> str:
  """An ISA cap below this CPU's best: oneDNN then runs another CPU's kernels."""
  return "AVX2" if "avx512f" in run.cpu_identity() else "SSE41"


def _start(args, out_dir, **env_vars):
  """Starts `tests/short_ccvl_run.py args[0] out_dir args[1:]`; (process, its log file)."""
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3", **env_vars)
  for name in ("TF_ENABLE_ONEDNN_OPTS", "ONEDNN_MAX_CPU_ISA"):
    if name not in env_vars:
      env.pop(name, None)  # the binaries' pinning
  os.makedirs(out_dir)
  log = open(os.path.join(out_dir, "log"), "w")
  return subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "short_ccvl_run.py"),
                           args[0], out_dir, *args[1:]], stdout=log, stderr=subprocess.STDOUT,
                          env=env, cwd=ROOT), log


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """The three trainings, side by side: binary and library with the pinned kernels (STEPS
  steps), the library with another CPU's kernels (the compared steps). {name: directory}."""
  base = tmp_path_factory.mktemp("short_run")
  specs = {"binary": (["binary"], {}), "library": (["library"], {}),
           "other_cpu": (["library", str(run.REFERENCE_STEPS)],
                         {"ONEDNN_MAX_CPU_ISA": _other_cap()})}
  started = {name: _start(args, str(base / name), **env) for name, (args, env) in specs.items()}
  try:
    for proc, _ in started.values():
      proc.wait(timeout=900)
  finally:
    for proc, log in started.values():
      if proc.poll() is None:  # a timeout: end the ones still training
        proc.kill()
        proc.wait()
      log.close()
  for name, (proc, _) in started.items():
    with open(base / name / "log") as f:
      assert proc.returncode == 0, f"{name}: {f.read()[-3000:]}"
  return {name: base / name for name in specs}


def _digest(path):
  # TensorFlow loads in this process only here: the trainings run in subprocesses.
  from ccvl_tf.runtime import checkpoint_digest  # pylint: disable=g-import-not-at-top
  return checkpoint_digest.digest(str(path))


def _check_reference(out_dir, what):
  """The run's first REFERENCE_STEPS steps against the reference, to RTOL; the failure names
  the first step and metric outside it and both machines."""
  with open(run.REFERENCE) as f:
    ref = json.load(f)
  with open(os.path.join(out_dir, "metrics.json")) as f:
    steps = json.load(f)
  assert ref["steps"] == run.REFERENCE_STEPS and sorted(ref["metrics"]) == sorted(
      run.REFERENCE_METRICS)
  for i in range(run.REFERENCE_STEPS):
    for k in run.REFERENCE_METRICS:
      want, got = ref["metrics"][k][i], steps[i][k]
      assert abs(got - want) <= RTOL * abs(want), (
          f"{what}: step {i + 1}, {k} = {got!r}, the reference's {want!r} (relative "
          f"difference {abs(got - want) / abs(want):.2g} > {RTOL}); reference: {ref['cpu']}, "
          f"{ref['kernels']}; here: {run.cpu_identity()}")


@pytest.mark.slow
def test_the_binary_trains_the_network_of_the_library(runs):
  assert (_digest(runs["binary"] / "run" / "checkpoints" / f"ckpt-{run.STEPS}")
          == _digest(runs["library"] / "checkpoints" / f"ckpt-{run.STEPS}"))
  fingerprint = json.loads(
      (runs["binary"] / "run" / "checkpoints" / "fingerprint.json").read_text())
  assert fingerprint["dataset"].pop("path") == run.TESTDATA
  # The learner's settings in force (offline.run_fingerprint.fingerprint's 'learner'): the run's own,
  # without what does not change what is learned.
  learner = fingerprint.pop("learner")
  assert (learner["alpha"], learner["delta_head"], learner["num_deltas"], learner["objective"],
          learner["learning_rate"]) == (1.0, "monotone", 8, "algorithm1", 0.001), learner
  assert not {"jit_compile", "belief_resample", "collect_epsilon"} & set(learner)
  assert fingerprint == {
      "adam_epsilon": 3.125e-04, "agent": "ccvl", "alpha": 1.0, "batch_size": 32,
      "behaviour_epsilon": 0.25,
      "ccvl_options": {"belief_resample": "episode", "bonus_counts": "state",
                       "count_normalization": "batch", "count_ridge": 0.001,
                       "count_ridge_mode": "relative", "count_weight": "linear",
                       "delta_head": "monotone", "delta_weight": "sqrt_log",
                       "gap": "logsumexp", "gap_weight": 0.0, "objective": "algorithm1",
                       "support_threshold": 0.0, "td_loss": "huber"},
      "dataset": {"files": 19, "listing_sha256": "fe120be8f60eaf19"},
      "default_dataset_policy": "auto", "default_dataset_steps": 50000, "dr3_coef": 0.0,
      "game": "Breakout", "learning_rate": 0.001, "num_deltas": 8, "num_pairs": 2,
      "num_transitions": run.NUM_TRANSITIONS, "policy_delta": 0.5, "preset": "demo",
      "seed": 100, "subset": "all", "target_update_period": 50}


@pytest.mark.slow
def test_the_first_steps_match_the_reference(runs):
  _check_reference(runs["library"], "pinned kernels")


@pytest.mark.slow
def test_another_cpus_kernels_train_other_weights_within_the_tolerance(runs):
  ckpt = os.path.join("reference_steps", f"ckpt-{run.REFERENCE_STEPS}")
  assert _digest(runs["other_cpu"] / ckpt) != _digest(runs["library"] / ckpt), (
      f"ONEDNN_MAX_CPU_ISA={_other_cap()} trained the weights of the pinned kernels on "
      f"{run.cpu_identity()}: this test then checks no other kernels")
  _check_reference(runs["other_cpu"], f"ONEDNN_MAX_CPU_ISA={_other_cap()}")
