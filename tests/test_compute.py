"""The device and compute settings of a run: CPU pins only where no GPU is visible
(ccvl_tf/experiments/tf_setup.py, with the device list injected: this machine has no GPU),
mixed precision with loss scaling and XLA (ccvl_tf/experiments/compute.py,
ccvl_tf/agents/q_agent_base.py), and the guarded step under MirroredStrategy on two logical CPU devices
equal to the one-device step on the whole batch (ccvl_tf/experiments/distributed.py)."""
import os
import subprocess
import sys

import ccvl_tf  # noqa: F401

import keras
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.algorithm import networks
from ccvl_tf.experiments import agent_registry
from ccvl_tf.experiments import compute
from ccvl_tf.experiments import tf_setup
from tests.test_learner import _batch  # noqa: F401  (also the subprocess's t._batch)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = networks.QNetworkConfig(torso="mlp", mlp_units=(8,), n_cos=4, hidden_units=8)
KERNELS = "oneDNN on, ONEDNN_MAX_CPU_ISA=AVX512_CORE"


# ---- the device: CPU pins only without a GPU -------------------------------------------------
@pytest.mark.parametrize("environ, files, expected", [
    ({}, [], False),                                            # no driver files
    ({}, ["/dev/nvidia0"], True),
    ({"CUDA_VISIBLE_DEVICES": "0,1"}, ["/dev/nvidia0"], True),
    ({"CUDA_VISIBLE_DEVICES": ""}, ["/dev/nvidia0"], False),    # every GPU hidden
    ({"CUDA_VISIBLE_DEVICES": "-1"}, ["/dev/nvidia0"], False),
    ({"CUDA_VISIBLE_DEVICES": "0"}, [], False),                 # nothing to show
])
def test_gpu_expected_before_tensorflow_loads(environ, files, expected):
  assert tf_setup.gpu_expected(environ, files) is expected


def test_pin_cpu_kernels_sets_nothing_where_a_gpu_is_expected(monkeypatch):
  for name in tf_setup.CPU_KERNELS:
    monkeypatch.delenv(name, raising=False)
  # TensorFlow is loaded in this process: with a GPU expected there is nothing to refuse.
  assert tf_setup.pin_cpu_kernels(gpu=True) == {}
  assert not any(name in os.environ for name in tf_setup.CPU_KERNELS)


def test_configure_tensorflow_pins_threads_only_without_a_gpu(monkeypatch):
  calls = []
  monkeypatch.setattr(tf.config.threading, "set_intra_op_parallelism_threads", calls.append)
  monkeypatch.setattr(tf.config.threading, "set_inter_op_parallelism_threads", calls.append)
  tf_setup.configure_tensorflow(2, False, gpus=["/physical_device:GPU:0"])
  assert calls == []
  tf_setup.configure_tensorflow(2, False, gpus=[])
  assert calls == [2, 2]


def test_the_device_line_says_which_device_and_pins():
  assert tf_setup.device_line([], 2, kernels=KERNELS, gpu_was_expected=False) == (
      "device: CPU (no GPU visible), 2 TensorFlow threads (--tf_threads); CPU kernels: "
      f"{KERNELS}.")
  gpu = tf_setup.device_line(["/physical_device:GPU:0"], 0, kernels="oneDNN off, "
                             "ONEDNN_MAX_CPU_ISA=unset", gpu_was_expected=True)
  assert gpu.startswith("device: 1 GPU (/physical_device:GPU:0), CPU pins off: TensorFlow's "
                        "default threads, not --tf_threads; CPU kernels: oneDNN off"), gpu
  # Driver files but no GPU for TensorFlow (a CPU-only build, no CUDA libraries): says so.
  odd = tf_setup.device_line([], 2, kernels="oneDNN off, ONEDNN_MAX_CPU_ISA=unset",
                             gpu_was_expected=True)
  assert odd.startswith("device: CPU (no GPU visible; a GPU was expected at start-up"), odd
  assert "CUDA_VISIBLE_DEVICES=" in odd and "2 TensorFlow threads" in odd, odd


def test_float16_is_refused_where_onednn_has_no_float16_kernels():
  pinned = dict(tf_setup.CPU_KERNELS)
  assert "ONEDNN_MAX_CPU_ISA=AVX512_CORE has no float16" in tf_setup.float16_cpu_problem(
      [], pinned, onednn_on=True)
  assert tf_setup.float16_cpu_problem(["/physical_device:GPU:0"], pinned, onednn_on=True) is None
  assert tf_setup.float16_cpu_problem([], pinned, onednn_on=False) is None
  assert tf_setup.float16_cpu_problem([], {"ONEDNN_MAX_CPU_ISA": "ALL"}, onednn_on=True) is None
  assert tf_setup.float16_cpu_problem([], {}, onednn_on=True) is None   # no cap


# ---- precision, XLA ------------------------------------------------------------------------
def _specs():
  obs = tensor_spec.BoundedTensorSpec((4,), tf.float32, 0.0, 1.0)
  return ts.time_step_spec(obs), tensor_spec.BoundedTensorSpec((), tf.int32, 0, 2)


def _build(name, settings=compute.Compute(), **values):
  keras.utils.set_random_seed(0)
  s = agent_registry.make_settings(network_config=TINY, dataset_size=100.0, num_deltas=2,
                                   num_pairs=2, **values)
  with settings.building():
    agent = agent_registry.get_agent_spec(name).build(*_specs(), s)
  return settings.prepare(agent)




def test_compute_settings_are_checked_and_described():
  with pytest.raises(ValueError, match="--mixed_precision must be one of off, float16"):
    compute.Compute(mixed_precision="fp8")
  with pytest.raises(ValueError, match="--distribute must be one of none, mirrored"):
    compute.Compute(distribute="tpu")
  assert compute.Compute().describe() == (
      "compute: float32, XLA off, one device (--mixed_precision, --jit_compile, --distribute).")
  assert compute.Compute("float16", True).describe().startswith(
      "compute: mixed_float16 (dynamic loss scaling), XLA on, one device")
  before = keras.mixed_precision.global_policy().name
  with compute.precision_policy("bfloat16"):
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
  assert keras.mixed_precision.global_policy().name == before


@pytest.mark.parametrize("name", ["ccvl", "cql"])
@pytest.mark.parametrize("precision, compute_dtype", [("bfloat16", "bfloat16"),
                                                      ("float16", "float16")])
def test_mixed_precision_trains_float32_variables_in_low_precision(name, precision,
                                                                   compute_dtype):
  agent = _build(name, compute.Compute(mixed_precision=precision))
  policy = agent.online_network.q_model.layers[-1].dtype_policy
  assert policy.compute_dtype == compute_dtype and policy.variable_dtype == "float32"
  assert {v.dtype for v in agent.online_variables} == {tf.float32}
  assert (type(agent.optimizer).__name__ == "LossScaleOptimizer") == (precision == "float16")
  metrics = agent.train_on_batch(_batch())
  assert metrics["loss"].dtype == tf.float32 and np.isfinite(float(metrics["loss"]))
  assert int(agent.train_step_counter.numpy()) == 1
  # The outputs the losses and policies read are float32.
  assert agent.q_network({"observation": np.eye(4, dtype=np.float32),
                          "delta": np.full((4, 1), 0.5, np.float32)}).dtype == tf.float32


def test_the_precision_is_read_back_from_every_learners_built_networks(tmp_path):
  """Before, train_offline.py --agent=dqn --mixed_precision=bfloat16 recorded bfloat16 while
  DQN's network (TF-Agents' QNetwork, legacy tf_keras) computed in float32. Each offline
  learner's declaration (AgentSpec.mixed_precision) agrees with what its built networks
  compute in; one the setting does not reach is refused, at build and before any data."""
  from ccvl_tf.experiments.offline import config as offline_config  # pylint: disable=g-import-not-at-top
  bf16 = compute.Compute(mixed_precision="bfloat16")
  for name in agent_registry.AGENTS:
    spec = agent_registry.get_agent_spec(name)
    s = agent_registry.make_settings(network_config=TINY, dataset_size=100.0, num_deltas=2,
                                     num_pairs=2)
    with bf16.building():
      agent = spec.build(*_specs(), s)
    assert compute.network_precisions(agent) == (
        {"bfloat16"} if spec.mixed_precision else {"float32"}), name
    if not spec.mixed_precision:
      with pytest.raises(ValueError, match=r"^--mixed_precision=bfloat16 does not reach the "
                                           r"networks of DQNLearner: their layers compute in "
                                           r"float32"):
        bf16.prepare(agent)
    assert compute.network_precisions(_build(name)) == {"float32"}, name
  cfg = offline_config.OfflineConfig(agent="dqn", mixed_precision="bfloat16",
                                     root_dir=str(tmp_path / "r"), dataset_dir=None)
  with pytest.raises(ValueError, match=r"^--mixed_precision=bfloat16 does not reach the network "
                                       r"of --agent=dqn \(TF-Agents' QNetwork"):
    cfg.validate()
  cfg = offline_config.OfflineConfig(agent="cql", reference_agents=("dqn",),
                                     mixed_precision="bfloat16", root_dir=str(tmp_path / "r"))
  with pytest.raises(ValueError, match=r"of --reference_agents=dqn "):
    cfg.validate()


def test_float16_overflow_halves_the_loss_scale_and_training_goes_on():
  """An overflowing float16 step (loss scale set to 2^60: the scaled gradients are inf) is no
  NaN loss: Adam skips it, the LossScaleOptimizer halves its scale, the run continues."""
  agent = _build("cql", compute.Compute(mixed_precision="float16"))
  weights = [v.numpy() for v in agent.online_network.trainable_variables]
  agent.optimizer.dynamic_scale.assign(2.0 ** 60)
  metrics = agent.train_on_batch(_batch())   # no NonFiniteLossError
  assert np.isfinite(float(metrics["loss"]))
  assert float(agent.optimizer.dynamic_scale.numpy()) == 2.0 ** 59
  for before, v in zip(weights, agent.online_network.trainable_variables):
    np.testing.assert_array_equal(before, v.numpy())   # no update applied
  agent.train_on_batch(_batch(1))  # a finite scale again next time around: trains
  assert float(agent.optimizer.dynamic_scale.numpy()) <= 2.0 ** 59


def test_default_compute_is_the_plain_build():
  """Compute() builds exactly what the registry builds alone: same weights after 3 steps."""
  plain = _build("ccvl")
  keras.utils.set_random_seed(0)
  s = agent_registry.make_settings(network_config=TINY, dataset_size=100.0, num_deltas=2,
                                   num_pairs=2)
  alone = agent_registry.get_agent_spec("ccvl").build(*_specs(), s)
  assert not plain.jit_compile and type(plain.optimizer) is keras.optimizers.Adam
  for i in range(3):
    plain.train_on_batch(_batch(i))
    alone.train_on_batch(_batch(i))
  for a, b in zip(plain.online_variables, alone.online_variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.slow
def test_xla_step_equals_the_plain_step():
  """CQL (no random draws): the XLA step is the plain step to float rounding. (CCVL's delta
  draws differ under XLA: XLA implements the stateless random ops with other streams.)"""
  plain, xla = _build("cql"), _build("cql", compute.Compute(jit_compile=True))
  assert xla.jit_compile and not plain.jit_compile
  for i in range(3):
    a, b = plain.train_on_batch(_batch(i)), xla.train_on_batch(_batch(i))
    np.testing.assert_allclose(float(a["loss"]), float(b["loss"]), rtol=1e-5)
  for a, b in zip(plain.online_variables, xla.online_variables):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)


def test_jit_compile_is_refused_for_a_learner_without_the_guarded_step():
  with pytest.raises(ValueError, match="--jit_compile compiles the step of the learners"):
    compute.Compute(jit_compile=True).prepare(object())


# ---- replicas --------------------------------------------------------------------------------
_MIRRORED_SCRIPT = r"""
import numpy as np, tensorflow as tf
import ccvl_tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from ccvl_tf.experiments import compute
from tests import test_compute as t
mirrored = compute.Compute(distribute="mirrored")
strategy = mirrored.strategy()   # every logical CPU device
print("replicas", strategy.num_replicas_in_sync)
for label, name, values, same_halves, jit in (
    ("cql", "cql", {}, False, False), ("cql_xla", "cql", {}, False, True),
    ("ccvl", "ccvl", {"count_normalization": "none"}, True, False)):
  mirrored = compute.Compute(distribute="mirrored", jit_compile=jit)
  single = t._build(name, **values)
  keras.utils.set_random_seed(0)
  s = t.agent_registry.make_settings(network_config=t.TINY, dataset_size=100.0, num_deltas=2,
                                     num_pairs=2, **values)
  with mirrored.building(strategy):
    agent = t.agent_registry.get_agent_spec(name).build(*t._specs(), s)
  learner = mirrored.trainer(mirrored.prepare(agent), strategy)
  worst = 0.0
  for i in range(6):
    batch = t._batch(i, 8)
    if same_halves:   # CCVL's delta draws repeat per replica: each replica gets the same rows
      batch = {k: np.concatenate([v[:4], v[:4]]) for k, v in batch.items()}
      s_batch = {k: v[:4] for k, v in batch.items()}
    else:
      s_batch = batch
    m, r = learner.train_on_batch(batch), single.train_on_batch(s_batch)
    worst = max(worst, abs(float(m["loss"]) - float(r["loss"])))
  diff = max(float(np.abs(a.numpy() - b.numpy()).max())
             for a, b in zip(agent.online_variables, single.online_variables))
  print(label, worst, diff, int(learner.train_step_counter.numpy()),
        type(agent.online_variables[0]).__name__)
try:
  learner.train_on_batch(t._batch(0, 7))
except ValueError as e:
  print("refused", e)
"""


@pytest.mark.slow
def test_mirrored_offline_step_equals_the_one_device_step():
  """MirroredStrategy over two logical CPUs (a subprocess: devices are split before TensorFlow
  starts). CQL: each replica takes its half of the batch; the averaged gradient is the
  gradient of the full batch's mean loss, so 6 steps give the one-device step's losses and
  weights to float rounding (1e-5). CCVL (n(s)^-1 not batch-normalized) on the same half per
  replica, as its per-row delta draws repeat across replicas: the one-device step on that half.
  CQL with --jit_compile too (XLA per replica): within 1e-4 of the plain one-device step."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_USE_LEGACY_KERAS="1")
  env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
  proc = subprocess.run([sys.executable, "-c", _MIRRORED_SCRIPT], capture_output=True,
                        text=True, env=env, cwd=REPO, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  print(proc.stdout)
  lines = {l.split(" ", 1)[0]: l.split(" ")[1:] for l in proc.stdout.strip().splitlines()}
  assert lines["replicas"] == ["2"], proc.stdout
  for name, tolerance in (("cql", 1e-5), ("ccvl", 1e-5), ("cql_xla", 1e-4)):
    loss_diff, weight_diff, step, kind = lines[name]
    assert float(loss_diff) < tolerance and float(weight_diff) < tolerance, proc.stdout
    assert (step, kind) == ("6", "MirroredVariable"), proc.stdout
  assert "batch size 7 is not divisible by the 2 replicas" in " ".join(lines["refused"])
