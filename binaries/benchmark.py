"""Benchmark: train-step cost of CCVL vs TF-Agents DqnAgent and DqnAgent + DR3, end-to-end
training steps/s through the input pipeline, and the data side (sampling, memory, ALE).

Usage:
  python binaries/benchmark.py --output=results/benchmark.json [--quick]

Writes one JSON file. The measuring code lives in ccvl_tf/bench/: train_step.py (the paired
step timings), end_to_end.py (merged under 'end_to_end'), data.py (under 'data') and, with
--profile, profile_step.py (under 'profile': the top TensorFlow ops of one step).
"""
import importlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ccvl_tf  # noqa: E402,F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from absl import logging  # noqa: E402

_OUTPUT = flags.DEFINE_string("output", None, "Path of the JSON file to write.", required=True)
_QUICK = flags.DEFINE_bool("quick", False, "Tiny smoke run (batch 4, 2 steps, 2 variants).")
_ROUNDS = flags.DEFINE_integer("rounds", None, "Interleaved timing rounds (default 5).")
_ITERS = flags.DEFINE_integer("iters", None, "Train steps per round (default 10).")
_SKIP_DATA = flags.DEFINE_bool("skip_data", False, "Do not run ccvl_tf.bench.data.")
_PROFILE = flags.DEFINE_bool("profile", False,
                             "Also trace a few steps with the TensorFlow profiler and write "
                             "the top ops per step under 'profile' (ccvl_tf/bench/profile_step).")
_SKIP_END_TO_END = flags.DEFINE_bool("skip_end_to_end", False,
                                     "Do not run ccvl_tf.bench.end_to_end.")


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
  from ccvl_tf.bench import train_step  # pylint: disable=g-import-not-at-top
  result = train_step.run(quick=_QUICK.value, rounds=_ROUNDS.value, iters=_ITERS.value)
  logging.info("train_step_ms: %s, ratio CCVL/DQN: %.3f", result["train_step_ms"],
               result["ratio_ccvl_over_dqn"])
  if _PROFILE.value:
    from ccvl_tf.bench import profile_step  # pylint: disable=g-import-not-at-top
    result["profile"] = profile_step.run(steps=3 if _QUICK.value else 10)
  if not _SKIP_END_TO_END.value:
    from ccvl_tf.bench import end_to_end  # pylint: disable=g-import-not-at-top
    result["end_to_end"] = end_to_end.run(quick=_QUICK.value)
    logging.info("end to end: %s", result["end_to_end"])
  if not _SKIP_DATA.value:
    data = _data_run(_QUICK.value)
    if data is not None:
      result["data"] = data
  out_dir = os.path.dirname(os.path.abspath(_OUTPUT.value))
  os.makedirs(out_dir, exist_ok=True)
  with open(_OUTPUT.value, "w") as f:
    json.dump(result, f, indent=2, sort_keys=True)
  summary = {k: result[k] for k in ("train_step_ms", "ratio_ccvl_over_dqn",
                                    "ratio_ccvl_over_dqn_dr3", "ratio_dqn_dr3_over_dqn")}
  if "end_to_end" in result:
    summary["end_to_end"] = {k: result["end_to_end"][k] for k in (
        "loop_steps_per_s", "step_only_steps_per_s", "pipeline_overhead")}
  print(json.dumps(summary))


if __name__ == "__main__":
  app.run(main)
