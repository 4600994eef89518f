"""Headroom of a CCVL run's family: every grid delta's fixed policy, the adaptive policy and
the reference agents played on the same episodes (protocol: docs/headroom.md).

  python binaries/headroom.py --root_dir=runs/breakout_demo [--sequences=10] \
      [--episodes_per_sequence=10] [--references=auto|none|NAME=DIR,...] [--output_dir=OUT]

Reads the run's summary.json and newest intact checkpoint; plays S x L episodes per policy
(S vector slots, each playing L episodes in a row with one belief); writes OUT (default
ROOT/headroom): headroom.json, headroom.md, headroom.png, scores.csv, belief.csv. Prints the
members' means, the oracle (in hindsight and split-half), the paired differences with their
CIs and the power. A stopped evaluation resumes at the next policy when rerun.
Flags -> ccvl_tf.experiments.offline.headroom_eval.run (no algorithm code here).
"""
import sys

from absl import app
from absl import flags
from absl import logging

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime import training
from ccvl_tf.experiments.offline import headroom_eval

config_flags.define(headroom_eval.HeadroomConfig)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError("unexpected arguments: {}".format(" ".join(argv[1:])))
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.ERROR)
  cfg = config_flags.from_flags(headroom_eval.HeadroomConfig)
  try:
    headroom_eval.run(cfg, log=lambda s: print(s, flush=True))
  except (ValueError, FileNotFoundError, MemoryError, training.WriteFailed) as e:
    sys.exit(f"headroom.py: error: {e}")


if __name__ == "__main__":
  config_flags.run(main)
