"""binaries/benchmark.py (--quick smoke runs in a temp dir) and the like-for-like DQN + DR3
baseline it measures against (ccvl_tf/bench/dqn_dr3.py), checked by hand."""
import json
import os
import subprocess
import sys

import ccvl_tf  # noqa: F401

import numpy as np
import pytest

import tensorflow as tf
from tf_agents.agents.dqn import dqn_agent
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts
from tf_agents.utils import common

from ccvl_tf.bench import dqn_dr3
from ccvl_tf.bench import profile_step
from ccvl_tf.bench import train_step
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_benchmark_quick_writes_json(tmp_path):
  """--quick runs the train-step benchmark and, when ccvl_tf/bench/data.py exists, merges its
  run(quick=True) dict under 'data'."""
  out = tmp_path / "sub" / "bench.json"
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.run(
      [sys.executable, os.path.join(ROOT, "binaries", "benchmark.py"), f"--output={out}",
       "--quick"],
      cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(out.read_text())
  ms = result["train_step_ms"]
  assert ms["dqn"] > 0 and ms["dqn_dr3"] > 0 and ms["ccvl"] > 0 and ms["ccvl_no_dr3"] > 0
  assert result["ratio_ccvl_over_dqn"] == pytest.approx(
      result["variants"]["ccvl_default"]["ratio_over_dqn"])
  assert result["ratio_ccvl_over_dqn_dr3"] == pytest.approx(
      result["variants"]["ccvl_default"]["ratio_over_dqn_dr3"])
  e2e = result["end_to_end"]
  assert e2e["loop_steps_per_s"] > 0 and e2e["step_only_steps_per_s"] > 0
  assert e2e["measured_steps"] == 10
  assert set(result["variants"]) == {"ccvl_default", "ccvl_no_dr3"}
  assert result["setup"]["quick"] is True
  has_data = os.path.exists(os.path.join(ROOT, "ccvl_tf", "bench", "data.py"))
  assert ("data" in result) == has_data
  if has_data:
    assert isinstance(result["data"], dict) and result["data"]


@pytest.mark.slow
def test_benchmark_skip_data(tmp_path):
  out = tmp_path / "bench.json"
  proc = forked_binary.run(
      "benchmark.py", [f"--output={out}", "--quick", "--skip_data", "--skip_end_to_end"],
      cwd=tmp_path, timeout=300,
      env=dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(out.read_text())
  assert "data" not in result and "end_to_end" not in result


@pytest.mark.slow
def test_benchmark_requires_output(tmp_path):
  proc = forked_binary.run(
      "benchmark.py", ["--quick"], cwd=tmp_path, timeout=120,
      env=dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode != 0
  assert "output" in proc.stderr


def _dqn_pair(dr3_coef):
  """A stock DqnAgent and a DqnDR3Agent with identical weights on a 3-d vector observation."""

  obs_spec = tf.TensorSpec((3,), tf.float32)
  action_spec = tensor_spec.BoundedTensorSpec((), tf.int64, 0, 1)
  nets = [dqn_dr3.EncoderQNetwork(obs_spec, action_spec, fc_layer_params=(4,))
          for _ in range(2)]
  for net in nets:
    net.create_variables()
  for a, b in zip(nets[0].variables, nets[1].variables):
    b.assign(a)
  kwargs = dict(optimizer=tf.keras.optimizers.SGD(0.1), gamma=0.9,
                td_errors_loss_fn=common.element_wise_huber_loss)
  spec = ts.time_step_spec(obs_spec)
  stock = dqn_agent.DqnAgent(spec, action_spec, q_network=nets[0], **kwargs)
  dr3 = dqn_dr3.DqnDR3Agent(spec, action_spec, q_network=nets[1], dr3_coef=dr3_coef, **kwargs)
  for agent in (stock, dr3):
    agent.initialize()
  rng = np.random.default_rng(0)
  batch = {"observation": tf.constant(rng.normal(size=(4, 3)), tf.float32),
           "next_observation": tf.constant(rng.normal(size=(4, 3)), tf.float32),
           "action": tf.constant([0, 1, 1, 0], tf.int64),
           "reward": tf.constant([1.0, 0.0, -1.0, 0.5]),
           "terminal": tf.constant([0.0, 0.0, 1.0, 0.0])}
  return stock, dr3, nets[1], batch, train_step.batch_to_trajectory(batch)


def test_dqn_dr3_agent_is_dqn_loss_plus_dr3():
  """c = 0: DqnDR3Agent's loss is the stock DqnAgent's (one target pass with a max instead of
  the greedy target policy's argmax: the same values). c = 0.5: + 0.5 mean_b |phi_b . phi'_b|,
  phi from the encoder run separately on s and s' here; the DR3 term has a gradient."""
  stock, plain, _, _, experience = _dqn_pair(0.0)
  np.testing.assert_allclose(float(plain._loss(experience).loss),
                             float(stock._loss(experience).loss), rtol=1e-6)
  stock, dr3, net, batch, experience = _dqn_pair(0.5)
  phi, _ = net.encoder(batch["observation"])
  next_phi, _ = net.encoder(batch["next_observation"])
  by_hand = np.mean(np.abs(np.sum(phi.numpy() * next_phi.numpy(), -1)))
  assert by_hand > 0
  np.testing.assert_allclose(float(dr3._loss(experience).loss),
                             float(stock._loss(experience).loss) + 0.5 * by_hand, rtol=1e-5)
  with tf.GradientTape() as tape:
    loss = dr3._loss(experience, training=True).loss
  grads = tape.gradient(loss, net.encoder.trainable_variables)
  assert all(g is not None and float(tf.reduce_max(tf.abs(g))) > 0 for g in grads)


def test_fused_adam_module_first_step_by_hand():
  """FusedAdam (the baseline's optimizer) at t = 1: w -= lr g / (|g| + eps / sqrt(1 - b2))."""
  w = tf.Variable([1.0, -2.0])
  opt = dqn_dr3.FusedAdam([w], learning_rate=0.1, epsilon=1e-3)
  g = np.array([0.5, -0.02], np.float32)
  opt.apply_gradients([(tf.constant(g), w)])
  np.testing.assert_allclose(
      w.numpy(), np.array([1.0, -2.0]) - 0.1 * g / (np.abs(g) + 1e-3 / np.sqrt(0.001)),
      rtol=1e-5)
  assert int(opt.iterations) == 1


def test_profile_attributes_a_steps_time_to_its_ops():
  """The profiler trace is read back: a step that is one big matmul spends most of its op time
  in MatMul, and the bookkeeping events are not counted as ops."""
  a = tf.random.uniform([300, 300])
  step = tf.function(lambda: tf.reduce_sum(tf.matmul(a, a)))
  float(step())
  result = profile_step.profile(step, steps=3, top=5)
  assert result["op_ms_per_step"] > 0
  top_type, _, share = result["by_type"][0]
  assert "MatMul" in top_type and share > 0.5, result
  assert all("::" not in name for name, _, _ in result["top_ops"])
