"""Where a train step's time goes: a TensorFlow profiler trace of a few compiled steps,
aggregated by op type and by op name (top ops), for CCVL and the DqnAgent + DR3 baseline.

``run(steps=10, top=15) -> dict`` (binaries/benchmark.py --profile writes it under 'profile'):
for each of 'ccvl_default', 'ccvl_no_dr3' and 'dqn_dr3', the traced TF ops of the host's
executor threads ("TF op" events of the profiler's XSpace, read with the xplane protobuf that
ships with TensorFlow), their total self time per step by op type and the top op names. The
profiler's own overhead inflates absolute times; the shares are what to read.
"""
from __future__ import annotations

import collections
import dataclasses
import glob
import os
import tempfile
from typing import Callable, Dict

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from ccvl_tf.algorithm import networks
from ccvl_tf.bench import train_step


def _read_xspace(logdir: str):
  paths = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
  if not paths:
    raise RuntimeError(f"the profiler wrote no *.xplane.pb under {logdir}")
  space = xplane_pb2.XSpace()
  with open(paths[0], "rb") as f:
    space.ParseFromString(f.read())
  return space


def op_times(space) -> Dict[str, float]:
  """Total duration (ms) per 'name:type' of the TF-op events on the host plane's threads.

  Events whose metadata names look like 'scope/op_name:OpType' are TensorFlow ops run by the
  executor; nested events (a function call op containing its ops) are counted at every level,
  so only leaf op types are meaningful when summed (callers drop the call ops)."""
  totals: Dict[str, float] = collections.defaultdict(float)
  for plane in space.planes:
    if not plane.name.startswith("/host:CPU"):
      continue
    names = {mid: md.name for mid, md in plane.event_metadata.items()}
    for line in plane.lines:
      for event in line.events:
        name = names.get(event.metadata_id, "")
        # TF ops are 'scope/name:OpType'; executor / eager bookkeeping events
        # ('ExecutorState::Process', 'EagerLocalExecute: ...') are not ops.
        if ":" not in name or "::" in name or name.startswith("EagerLocalExecute"):
          continue
        totals[name] += event.duration_ps / 1e9
  return dict(totals)


_CALL_OPS = {"PartitionedCall", "StatefulPartitionedCall", "While", "If", "StatelessIf",
             "StatelessWhile", "__inference", "Identity"}


def profile(step: Callable[[], tf.Tensor], steps: int = 10, top: int = 15) -> Dict:
  """Traces `steps` calls of a compiled step (already warm) and aggregates the TF ops."""
  with tempfile.TemporaryDirectory() as logdir:
    tf.profiler.experimental.start(logdir)
    for _ in range(steps):
      out = step()
    float(out)
    tf.profiler.experimental.stop()
    space = _read_xspace(logdir)
  totals = op_times(space)
  by_type: Dict[str, float] = collections.defaultdict(float)
  by_name: Dict[str, float] = {}
  for name, ms in totals.items():
    op_name, op_type = name.rsplit(":", 1)
    if op_type in _CALL_OPS or op_type.startswith("__inference"):
      continue
    by_type[op_type] += ms / steps
    by_name[name] = ms / steps
  total = sum(by_type.values())
  top_types = sorted(by_type.items(), key=lambda kv: -kv[1])[:top]
  top_names = sorted(by_name.items(), key=lambda kv: -kv[1])[:top]
  return {
      "op_ms_per_step": round(total, 3),
      "by_type": [(k, round(v, 3), round(v / total, 3)) for k, v in top_types],
      "top_ops": [(k, round(v, 3), round(v / total, 3)) for k, v in top_names],
  }


def run(steps: int = 10, top: int = 15, batch_size: int = 32, num_actions: int = 6) -> Dict:
  obs_shape = networks.NATURE_OBSERVATION_SHAPE
  batch = train_step.synthetic_batch(batch_size, obs_shape, num_actions)
  base = train_step.ccvl_agent.CCVLConfig()
  makers = {
      "ccvl_default": lambda: train_step.make_ccvl_step(batch, obs_shape, num_actions, base),
      "ccvl_no_dr3": lambda: train_step.make_ccvl_step(
          batch, obs_shape, num_actions, dataclasses.replace(base, dr3_coef=0.0)),
      "dqn_dr3": lambda: train_step.make_dqn_step(batch, obs_shape, num_actions,
                                                  dr3_coef=base.dr3_coef),
  }
  out = {}
  for name, make in makers.items():
    step = make()
    for _ in range(3):
      float(step())
    out[name] = profile(step, steps, top)
  return out
