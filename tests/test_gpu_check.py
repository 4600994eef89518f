"""The GPU check (binaries/gpu_check.py, ccvl_tf/bench/gpu_check.py, gpu_stack.py), tested on
the CPU: the comparison of two runs against numbers worked out by hand, a real training
compared with itself (identical) and with a run that repeats one batch (fails at that step),
the stack rules on made-up versions, and the binary's one line on a machine without a GPU."""
import json
import re

import ccvl_tf  # noqa: F401

import numpy as np
import pytest
import tensorflow as tf

from ccvl_tf.algorithm import networks
from ccvl_tf.bench import device_compare
from ccvl_tf.bench import gpu_check
from ccvl_tf.bench import gpu_stack
from ccvl_tf.bench import train_step
from ccvl_tf.experiments import agent_registry
from tests import forked_binary

TINY = networks.QNetworkConfig(torso="mlp", mlp_units=(8,), n_cos=4, hidden_units=8)


def _run(losses, variables):
  return device_compare.Run("/CPU:0", np.asarray(losses, np.float64), variables)


def _var(name, trainable, start, end):
  return (name, trainable, np.asarray(start, np.float32), np.asarray(end, np.float32))


# ---- compare_runs on numbers worked out by hand ------------------------------------------------
REF_VARS = [_var("w", True, [0.0, 0.0], [3.0, 4.0]),        # moved by ||(3, 4)|| = 5
            _var("m", False, [0.0, 0.0], [3.0, 4.0]),       # (non-trainable state) also 5
            _var("target", True, [1.0, 1.0], [1.0, 1.0])]   # not moved


def test_identical_runs_pass_with_zero_differences():
  c = device_compare.compare_runs(_run([1.0, 2.0, 4.0], REF_VARS), _run([1.0, 2.0, 4.0], REF_VARS))
  assert c.ok and c.max_loss_rel == 0.0 and c.first_bad_step is None
  assert c.worst_weight_ratio == 0.0 and c.worst_state_ratio == 0.0 and c.num_variables == 2


def test_a_loss_beyond_the_relative_tolerance_fails_at_its_step():
  ref = _run([1.0, 2.0, 4.0], REF_VARS)
  within = device_compare.compare_runs(ref, _run([1.0, 2.0 * (1 + 5e-4), 4.0], REF_VARS))
  assert within.ok and within.max_loss_rel == pytest.approx(5e-4) and within.max_loss_step == 1
  beyond = device_compare.compare_runs(ref, _run([1.0, 2.0, 4.0 * (1 - 2e-3)], REF_VARS))
  assert not beyond.ok and beyond.first_bad_step == 2
  assert beyond.max_loss_rel == pytest.approx(2e-3)
  nan = device_compare.compare_runs(ref, _run([1.0, float("nan"), 4.0], REF_VARS))
  assert not nan.ok and nan.first_bad_step == 1


@pytest.mark.parametrize("index,end,ratio,ok", [
    (0, [3.0, 5.2], 1.2 / 5, True),    # trainable: 0.24 <= 0.25
    (0, [3.0, 5.3], 1.3 / 5, False),   # 0.26 > 0.25
    (0, [3.0, float("nan")], float("inf"), False),
    (2, [1.0, 1.0 + 1e-6], float("inf"), False),  # a weight the reference did not move
])
def test_a_weight_is_judged_against_how_far_training_moved_it(index, end, ratio, ok):
  changed = list(REF_VARS)
  name, trainable, start, _ = changed[index]
  changed[index] = _var(name, trainable, start, end)
  c = device_compare.compare_runs(_run([1.0], REF_VARS), _run([1.0], changed))
  assert c.ok == ok and c.first_bad_step is None
  assert c.worst_variable == name and c.num_variables == 2
  assert c.worst_weight_ratio == pytest.approx(ratio, rel=1e-5)


def test_other_state_is_reported_not_judged():
  """Adam's moments and count statistics (non-trainable): their ratio is reported only."""
  changed = [REF_VARS[0], _var("m", False, [0.0, 0.0], [3.0, 40.0]), REF_VARS[2]]
  c = device_compare.compare_runs(_run([1.0], REF_VARS), _run([1.0], changed))
  assert c.ok and c.worst_state == "m" and c.worst_state_ratio == pytest.approx(36.0 / 5)


def test_runs_of_different_lengths_are_refused():
  with pytest.raises(ValueError, match="differ in length: 3 vs 2 steps"):
    device_compare.compare_runs(_run([1.0, 2.0, 3.0], REF_VARS), _run([1.0, 2.0], REF_VARS))


def test_a_learner_asked_onto_the_gpu_must_have_every_trainable_variable_there():
  gpu, cpu = ("/job:localhost/replica:0/task:0/device:GPU:0",
              "/job:localhost/replica:0/task:0/device:CPU:0")
  def run(devices):
    return device_compare.Run(devices, np.zeros(1), [])
  assert device_compare.placed_on(run(gpu), "/GPU:0")
  assert not device_compare.placed_on(run(f"{cpu}, {gpu}"), "/GPU:0")
  assert not device_compare.placed_on(run(cpu), "/GPU:0")
  assert device_compare.placed_on(run(cpu), "/CPU:0")


# ---- real training on the CPU -------------------------------------------------------------------
def _batches(n, b=8):
  eye = np.eye(4, dtype=np.float32)
  out = []
  for seed in range(n):
    rng = np.random.default_rng(seed)
    out.append({"observation": eye[rng.integers(0, 4, b)], "action": rng.integers(0, 3, b),
                "reward": rng.random(b).astype(np.float32),
                "next_observation": eye[rng.integers(0, 4, b)],
                "terminal": (rng.random(b) < 0.2).astype(np.float32)})
  return out


@pytest.mark.slow
@pytest.mark.parametrize("name", gpu_check.learner_names())
def test_a_learner_in_lockstep_with_itself_is_identical_and_a_repeated_batch_fails(name):
  """The CPU against the CPU in lockstep: every step from the same state on the same batch
  gives the same loss and update, bit for bit; weights off by ~8 float32 ulps (a stand-in for
  another device's rounding) stay within the tolerances; a device run that trains on batch 3
  again in place of batch 4 fails at step 4."""
  tss, act = gpu_check.specs((4,), tf.float32, 3)
  settings = agent_registry.make_settings(network_config=TINY, dataset_size=100.0,
                                          num_deltas=2, num_pairs=2, num_heads=2,
                                          num_members=2, learning_rate=1e-2, seed=0)
  batches = _batches(6)
  ref, checked = (gpu_check.build_learner(name, tss, act, settings, "/CPU:0") for _ in range(2))
  same, run = device_compare.lockstep(ref, checked, batches, "/CPU:0", "/CPU:0")
  assert same.ok, same.line()
  assert same.max_loss_rel == 0.0 and same.worst_weight_ratio == 0.0
  assert "CPU:0" in run.device and device_compare.placed_on(run, "/CPU:0")
  rounded, _ = device_compare.lockstep(ref, checked, batches, "/CPU:0", "/CPU:0",
                                  perturb=device_compare.perturbation(1e-6))
  assert rounded.ok and 0.0 < rounded.worst_weight_ratio < 1e-2, rounded.line()
  repeated, _ = device_compare.lockstep(ref, checked, batches, "/CPU:0", "/CPU:0",
                                   batches_on_device=batches[:4] + [batches[3], batches[5]])
  assert not repeated.ok and repeated.first_bad_step == 4, repeated.line()


def test_merged_steps_name_the_first_step_that_is_not_ok():
  def step(loss_rel, ratio):
    return device_compare.Comparison(
        ok=loss_rel <= 1e-3 and ratio <= 0.25, max_loss_rel=loss_rel, max_loss_step=0,
        first_bad_step=None, worst_variable=f"w{ratio}", worst_weight_ratio=ratio,
        num_variables=2, worst_state="m", worst_state_ratio=0.0, loss_rtol=1e-3,
        weight_rtol=0.25)
  merged = device_compare.merge_steps([step(0.0, 0.01), step(2e-4, 0.5), step(5e-3, 0.02)])
  assert not merged.ok and merged.first_bad_step == 1
  assert (merged.max_loss_rel, merged.max_loss_step) == (5e-3, 2)
  assert (merged.worst_weight_ratio, merged.worst_variable) == (0.5, "w0.5")
  assert device_compare.merge_steps([step(0.0, 0.01), step(2e-4, 0.05)]).ok


def test_a_step_is_timed_by_the_benchmarks_protocol():
  """train_step.time_step_ms: `warmup` untimed calls, then `rounds` rounds of `iters`."""
  calls = []

  def step():
    calls.append(1)
    return tf.constant(1.0)
  timed = train_step.time_step_ms(step, iters=3, rounds=4, warmup=2)
  assert len(calls) == 2 + 4 * 3 and len(timed["rounds_ms"]) == 4
  assert 0 < timed["min_ms"] <= timed["median_ms"]


def test_every_offline_learner_of_the_registry_is_checked_once():
  """fixed_ccvl trains CCVL's learner: one entry per train_key, in the registry's order."""
  assert gpu_check.learner_names() == ("ccvl", "cql", "rem", "aevl", "aevl_td", "dqn", "bc")


# ---- the stack rules on made-up versions --------------------------------------------------------
TF216 = {"is_cuda_build": True, "cuda_version": "12.3", "cudnn_version": "8",
         "cuda_compute_capabilities": ["sm_50", "sm_60", "sm_70", "sm_80", "compute_90"]}


def _loaded(cudart=(12, 3, 0), cudnn=(8, 9, 7), driver=(12, 4, 0)):
  return {"cudart": {"path": "/x/libcudart.so.12", "version": cudart},
          "cudnn": {"path": "/x/libcudnn.so.8", "version": cudnn},
          "driver": {"path": "/usr/lib/libcuda.so.1", "version": driver}}


def test_version_numbers_decode_as_each_library_encodes_them():
  assert gpu_stack.decode_version("cudart", 12030) == (12, 3, 0)
  assert gpu_stack.decode_version("driver", 12040) == (12, 4, 0)
  assert gpu_stack.decode_version("cudnn", 8907) == (8, 9, 7)
  assert gpu_stack.decode_version("cudnn", 90100) == (9, 1, 0)


def test_the_mapped_libraries_are_found_in_proc_maps_text():
  maps = "\n".join([
      "7f00-7f01 r-xp 00000000 08:01 1 /venv/nvidia/cudnn/lib/libcudnn_ops_infer.so.8",
      "7f01-7f02 r-xp 00000000 08:01 2 /venv/nvidia/cudnn/lib/libcudnn.so.8",
      "7f02-7f03 r-xp 00000000 08:01 3 /venv/nvidia/cuda_runtime/lib/libcudart.so.12",
      "7f03-7f04 r-xp 00000000 08:01 4 /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15",
      "7f04-7f05 rw-p 00000000 00:00 0 "])
  assert gpu_stack.loaded_library_paths(maps) == {
      "cudnn": "/venv/nvidia/cudnn/lib/libcudnn.so.8",
      "cudart": "/venv/nvidia/cuda_runtime/lib/libcudart.so.12",
      "driver": "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"}


def _failed(checks):
  return [c.name for c in checks if not c.ok]


def test_the_pinned_stack_on_an_h100_fits():
  checks = gpu_stack.stack_checks(TF216, _loaded(), [(9, 0)])
  assert not _failed(checks), [c.detail for c in checks]
  assert "compute_90 PTX" in checks[-1].detail


@pytest.mark.parametrize("loaded,capability,failed", [
    (_loaded(cudart=(12, 2, 0)), (8, 0), ["CUDA runtime"]),   # older minor than the build
    (_loaded(cudart=(11, 8, 0)), (8, 0), ["CUDA runtime"]),
    (_loaded(cudart=(12, 4, 0)), (8, 0), []),                 # newer minor: compatible
    (_loaded(cudnn=(9, 1, 0)), (8, 0), ["cuDNN"]),
    (_loaded(cudnn=None), (8, 0), ["cuDNN"]),                 # not found
    (_loaded(driver=(12, 2, 0)), (8, 0), []),                 # sm_80 native: 12.x suffices
    (_loaded(driver=(12, 2, 0)), (9, 0), ["driver"]),         # sm_90 only as PTX: needs 12.3
    (_loaded(driver=(11, 8, 0)), (8, 0), ["driver"]),
    (_loaded(), (3, 7), ["compute capability"]),              # older than the build's oldest
])
def test_a_stack_that_does_not_fit_names_what(loaded, capability, failed):
  assert _failed(gpu_stack.stack_checks(TF216, loaded, [capability])) == failed


def test_on_a_machine_without_cuda_the_stack_check_runs_and_names_what_is_missing():
  """check_stack's own path on this CPU machine (no GPU, no CUDA wheels): TensorFlow's CUDA
  entry points find no runtime, cuDNN or driver, and each line says so."""
  if gpu_stack.pip_cuda_wheels() or gpu_stack.visible_gpus():
    pytest.skip("CUDA is installed here: the lines name what was found")
  lines = []
  assert not gpu_stack.check_stack([], log=lines.append)
  assert lines[0] == "CUDA wheels: none (the libraries come from the system)"
  assert lines[1] == "  ok     CUDA build: is_cuda_build=True"
  assert lines[2].startswith("  FAILED CUDA runtime: built with 12.3, loaded: none found (")
  assert lines[3].startswith("  FAILED cuDNN: built with 8.x, loaded: none found (")
  assert lines[4].startswith("  FAILED driver: CUDA version of the driver: none found (")
  assert len(lines) == 5


# ---- the binary ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_without_a_gpu_the_binary_says_so_in_one_line_and_exits_0(tmp_path):
  r = forked_binary.run("gpu_check.py", [], cwd=tmp_path, fresh=True,
                        env=forked_binary.binary_env(CUDA_VISIBLE_DEVICES=""))
  assert r.returncode == 0, r.stderr[-2000:]
  assert r.stdout.count("\n") == 1 and r.stdout.startswith(
      "gpu_check: no GPU visible to TensorFlow 2.16.2 (built for CUDA 12.3, cuDNN 8)"), r.stdout
  assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_the_binary_against_the_cpu_times_and_compares_each_learner(tmp_path):
  out = tmp_path / "check.json"
  r = forked_binary.run("gpu_check.py", ["--device=/CPU:0", "--agents=bc,cql", "--steps=3",
                                         "--iters=1", "--rounds=1", "--batch_size=2",
                                         f"--output={out}"], cwd=tmp_path)
  assert r.returncode == 0, r.stdout + r.stderr[-2000:]
  assert r.stdout.splitlines()[-1] == "gpu_check: ok (/CPU:0 against /CPU:0, 2 learners, 3 steps)"
  result = json.loads(out.read_text())
  assert set(result["step_ms"]) == set(result["comparisons"]) == {"bc", "cql"}
  for name in ("bc", "cql"):
    assert result["step_ms"][name]["device"]["median_ms"] > 0
    assert result["comparisons"][name]["ok"]
    assert result["comparisons"][name]["max_loss_rel"] == 0.0


@pytest.mark.slow
def test_an_unknown_agent_is_one_line_naming_the_valid_ones(tmp_path):
  r = forked_binary.run("gpu_check.py", ["--agents=ccvl,sac"], cwd=tmp_path)
  assert r.returncode == 1 and "--agents: unknown ['sac']; valid: ccvl, cql" in r.stderr


# ---- the GPU lock file --------------------------------------------------------------------------
def test_the_gpu_lock_pins_each_wheel_with_a_hash_and_matches_the_build():
  """requirements-gpu.txt: one exact pin and one sha256 per package, none already in the CPU
  lock, and the CUDA runtime and cuDNN it pins are the versions the TensorFlow build names."""
  root = forked_binary.ROOT
  text = open(f"{root}/requirements-gpu.txt").read()
  entries = re.findall(r"^([a-z0-9-]+)==([0-9.]+) \\\n    --hash=sha256:([0-9a-f]{64})$",
                       text, flags=re.M)
  lines = [l for l in text.splitlines() if l and not l.startswith("#")]
  assert len(lines) == 2 * len(entries) == 24
  pins = {name: version for name, version, _ in entries}
  cpu = {l.split("==")[0].lower() for l in open(f"{root}/requirements.txt").read().splitlines()
         if "==" in l and not l.startswith("#")}
  assert not set(pins) & cpu
  info = tf.sysconfig.get_build_info()
  assert pins["nvidia-cuda-runtime-cu12"].startswith(info["cuda_version"] + ".")
  assert pins["nvidia-cudnn-cu12"].startswith(info["cudnn_version"] + ".9.")
