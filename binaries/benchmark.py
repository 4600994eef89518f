"""Benchmark: train-step cost of CCVL vs TF-Agents DqnAgent (+ the data pipeline if present).

Usage:
  python binaries/benchmark.py --output=results/benchmark.json [--quick]

Writes one JSON file. The measuring code lives in ccvl_tf/bench/train_step.py; when
ccvl_tf/bench/data.py exists, its run() dict is merged under the key 'data'.
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
  if not _SKIP_DATA.value:
    data = _data_run(_QUICK.value)
    if data is not None:
      result["data"] = data
  out_dir = os.path.dirname(os.path.abspath(_OUTPUT.value))
  os.makedirs(out_dir, exist_ok=True)
  with open(_OUTPUT.value, "w") as f:
    json.dump(result, f, indent=2, sort_keys=True)
  print(json.dumps({"train_step_ms": result["train_step_ms"],
                    "ratio_ccvl_over_dqn": result["ratio_ccvl_over_dqn"]}))


if __name__ == "__main__":
  app.run(main)
