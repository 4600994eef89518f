"""End-to-end training throughput: train_offline's loop on a frame store through the real input
pipeline, against the same agent's step on a fixed in-memory batch.

``run(quick=False) -> dict`` (called by binaries/benchmark.py, merged under "end_to_end"):
  loop_steps_per_s     `ccvl_tf.runtime.training.train` (what train_offline.py runs: checkpoints,
                       TensorBoard summaries, progress lines) on `pipeline.transition_dataset`
                       over a synthetic Nature-frame store, CCVL defaults, batch 32; measured
                       between two progress lines after warm-up (tracing excluded)
  step_only_steps_per_s  the same agent's compiled step on one fixed batch (no pipeline)
  pipeline_overhead    1 - loop / step_only (the share of time the input pipeline and the
                       loop's bookkeeping add; near 0 when sampling keeps up)
The store is `ccvl_tf.bench.data.synthetic_store` (DQN Replay-shaped episodes of 1,000 steps).
"""
from __future__ import annotations

import os
import tempfile
import time
from typing import Optional

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import numpy as np
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.algorithm import networks
from ccvl_tf.runtime import training
from ccvl_tf.bench import data as bench_data
from ccvl_tf.data import pipeline
from ccvl_tf.experiments import agent_registry


def _ccvl_agent(dataset_size: float, num_actions: int = 4, seed: int = 0):
  keras.utils.set_random_seed(seed)
  obs_spec = tensor_spec.BoundedTensorSpec(networks.NATURE_OBSERVATION_SHAPE, tf.uint8, 0, 255)
  action_spec = tensor_spec.BoundedTensorSpec((), tf.int64, 0, num_actions - 1)
  settings = agent_registry.AgentSettings(network_config=networks.QNetworkConfig(torso="nature"),
                                   dataset_size=dataset_size, seed=seed)
  return agent_registry.get_agent_spec("ccvl").build(ts.time_step_spec(obs_spec), action_spec,
                                              settings)


def run(quick: bool = False, *, num_frames: Optional[int] = None,
        warmup_steps: Optional[int] = None, steps: Optional[int] = None,
        batch_size: int = 32) -> dict:
  """The measurements above; the keyword arguments shrink them (tests)."""
  num_frames = num_frames or (6_000 if quick else 60_000)
  warmup_steps = warmup_steps or (5 if quick else 50)
  steps = steps or (10 if quick else 300)
  store = bench_data.synthetic_store(num_frames)
  agent = _ccvl_agent(float(store.num_transitions))
  marks = []

  def log(line: str):
    if line.startswith("step "):
      marks.append((time.perf_counter(), int(line.split()[1].split("/")[0])))

  with tempfile.TemporaryDirectory() as root:
    loop = training.LoopConfig(root_dir=os.path.join(root, "run"),
                               num_steps=warmup_steps + steps, log_interval=warmup_steps,
                               checkpoint_interval=warmup_steps + steps, summary_interval=100)
    training.train(agent, lambda start: pipeline.transition_dataset(
        store, batch_size, seed=0, start_batch=start), loop, log=log)
  (t_a, s_a), (t_b, s_b) = marks[0], marks[-1]
  loop_rate = (s_b - s_a) / (t_b - t_a)

  # The same agent (already traced) on one fixed batch: the step alone.
  batch = next(iter(pipeline.transition_dataset(store, batch_size, seed=1)))
  batch = {k: tf.constant(np.asarray(v)) for k, v in batch.items()}
  float(agent.train_on_batch(batch)["loss"])
  t0 = time.perf_counter()
  for _ in range(steps):
    out = agent.train_on_batch(batch)
  float(out["loss"])
  step_rate = steps / (time.perf_counter() - t0)
  return dict(loop_steps_per_s=round(loop_rate, 2), step_only_steps_per_s=round(step_rate, 2),
              pipeline_overhead=round(1.0 - loop_rate / step_rate, 3),
              measured_steps=s_b - s_a, warmup_steps=warmup_steps, batch_size=batch_size,
              store_transitions=int(store.num_transitions), agent="CCVL (defaults)",
              quick=quick)
