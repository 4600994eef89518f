"""Benchmark: train-step cost of CCVL vs TF-Agents DqnAgent and DqnAgent + DR3, end-to-end
training steps/s through the input pipeline, and the data side (sampling, memory, ALE).

Usage:
  python binaries/benchmark.py --output=results/benchmark.json [--quick]

Writes one JSON file. The measuring code lives in ccvl_tf/bench/: train_step.py (the paired
step timings), end_to_end.py (merged under 'end_to_end'), data.py (under 'data') and, with
--profile, profile_step.py (under 'profile': the top TensorFlow ops of one step).
"""
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ccvl_tf  # noqa: E402,F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)

from absl import logging  # noqa: E402

from ccvl_tf import bench  # noqa: E402
from ccvl_tf.runtime import config_flags  # noqa: E402
from ccvl_tf.bench import end_to_end  # noqa: E402
from ccvl_tf.bench import profile_step  # noqa: E402
from ccvl_tf.bench import train_step  # noqa: E402
from ccvl_tf.runtime import strict_json  # noqa: E402

config_flags.define(bench.BenchmarkConfig)  # the `setting` fields of BenchmarkConfig


def _data_run(quick):
  try:
    data = importlib.import_module("ccvl_tf.bench.data")
  except ModuleNotFoundError as e:
    if e.name not in ("ccvl_tf.bench.data",):
      raise
    return None
  return data.run(quick=quick)


def main(argv):
  del argv
  cfg = config_flags.from_flags(bench.BenchmarkConfig)
  result = train_step.run(quick=cfg.quick, rounds=cfg.rounds, iters=cfg.iters)
  logging.info("train_step_ms: %s, ratio CCVL/DQN: %.3f", result["train_step_ms"],
               result["ratio_ccvl_over_dqn"])
  if cfg.profile:
    result["profile"] = profile_step.run(steps=3 if cfg.quick else 10)
  if not cfg.skip_end_to_end:
    result["end_to_end"] = end_to_end.run(quick=cfg.quick)
    logging.info("end to end: %s", result["end_to_end"])
  if not cfg.skip_data:
    data = _data_run(cfg.quick)
    if data is not None:
      result["data"] = data
  out_dir = os.path.dirname(os.path.abspath(cfg.output))
  os.makedirs(out_dir, exist_ok=True)
  with open(cfg.output, "w") as f:
    strict_json.dump(result, f, indent=2, sort_keys=True)
  summary = {k: result[k] for k in ("train_step_ms", "ratio_ccvl_over_dqn",
                                    "ratio_ccvl_over_dqn_dr3", "ratio_dqn_dr3_over_dqn")}
  if "end_to_end" in result:
    summary["end_to_end"] = {k: result["end_to_end"][k] for k in (
        "loop_steps_per_s", "step_only_steps_per_s", "pipeline_overhead")}
  print(strict_json.dumps(summary))


if __name__ == "__main__":
  config_flags.run(main)
