"""Train-step time of a learner under each compute setting (experiments/compute.py):
float32 (the default), --mixed_precision=bfloat16 / float16 and --jit_compile.

Each setting builds the learner of the offline run (the demo preset's CCVL by default: the
Nature torso, batch 32, 6 actions) under its precision policy and XLA flag and times its
compiled guarded step (`compiled_train_step`) on one fixed synthetic batch (uint8 84x84x4
frames), in rounds: every round times every setting once, one after another, so load from
other processes hits them about equally. Reported per setting: the median ms per step over
rounds and the median of the paired ratios to float32 in the same round.
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Dict, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.algorithm import networks
from ccvl_tf.bench import train_step
from ccvl_tf.experiments import agent_registry, compute
from ccvl_tf.experiments.offline import presets

# name -> the compute setting timed.
SETTINGS = {"float32": compute.Compute(),
            "bfloat16": compute.Compute(mixed_precision="bfloat16"),
            "float16": compute.Compute(mixed_precision="float16"),
            "xla": compute.Compute(jit_compile=True)}


def make_step(agent_name: str, setting: compute.Compute, batch, obs_shape, num_actions: int):
  """() -> loss of one guarded step of `agent_name` (the demo preset's settings, Nature torso)
  built under `setting`, on `batch`."""
  time_step_spec = ts.time_step_spec(tf.TensorSpec(obs_shape, tf.uint8, name="observation"))
  action_spec = tensor_spec.BoundedTensorSpec((), tf.int64, 0, num_actions - 1, name="action")
  spec = agent_registry.get_agent_spec(agent_name)
  settings = agent_registry.AgentSettings(
      network_config=networks.QNetworkConfig(torso="nature"),
      agent_values=presets.resolve("demo", spec.train_key, {}), dataset_size=1e6, seed=0)
  keras.utils.set_random_seed(0)
  with setting.building():
    agent = setting.prepare(spec.build(time_step_spec, action_spec, settings))
  prepared = agent.prepare_batch(batch)
  fn = agent.compiled_train_step
  return lambda: fn(prepared)["loss"]


def run(agent_name: str = "ccvl", batch_size: int = 32, num_actions: int = 6,
        obs_shape: Sequence[int] = networks.NATURE_OBSERVATION_SHAPE, iters: int = 10,
        rounds: int = 5, warmup: int = 3, settings: Sequence[str] = tuple(SETTINGS)) -> Dict:
  """{'train_step_ms': {setting: median ms}, 'ratio_over_float32': {setting: median paired
  ratio}, 'rounds_ms': {setting: [ms per round]}, 'setup': ...}."""
  batch = train_step.synthetic_batch(batch_size, tuple(obs_shape), num_actions)
  steps = {name: make_step(agent_name, SETTINGS[name], batch, tuple(obs_shape), num_actions)
           for name in settings}
  for step in steps.values():  # trace (and compile) + warm up
    for _ in range(warmup):
      float(step())
  per_round = {name: [] for name in steps}
  for _ in range(rounds):
    for name, step in steps.items():
      t0 = time.perf_counter()
      for _ in range(iters):
        out = step()
      float(out)
      per_round[name].append((time.perf_counter() - t0) * 1000.0 / iters)
  base = per_round.get("float32")
  return {
      "train_step_ms": {k: statistics.median(v) for k, v in per_round.items()},
      "ratio_over_float32": ({k: statistics.median(a / b for a, b in zip(v, base))
                              for k, v in per_round.items()} if base else {}),
      "rounds_ms": {k: [round(x, 2) for x in v] for k, v in per_round.items()},
      "setup": {"agent": agent_name, "batch_size": batch_size, "obs_shape": list(obs_shape),
                "num_actions": num_actions, "iters": iters, "rounds": rounds,
                "settings": {k: dataclasses.asdict(SETTINGS[k]) for k in steps},
                "tensorflow": tf.__version__},
  }
