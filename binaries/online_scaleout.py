"""Scale-out of online fine-tuning's Reverb set-up on this machine: learner steps/s, actor env
steps/s, the actors' time inside inserts and the learner's time waiting for samples, with 1, 2,
... actor processes and an external binaries/reverb_server.py.

  python binaries/online_scaleout.py --offline_dir=RUN --game=minatar/Breakout --agent=ccvl \
      --output_dir=OUT [--actors=1,2] [--num_env_steps=8000]

Writes OUT/scaleout.json and OUT/scaleout.md (docs/results/online_scaleout.md has the measured table).
Flags -> ScaleoutConfig -> ccvl_tf.bench.online_scaleout.run.
"""
import sys

from absl import app

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.runtime import config_flags
from ccvl_tf.bench import online_scaleout

config_flags.define(online_scaleout.ScaleoutConfig)


def main(argv):
  del argv
  cfg = config_flags.from_flags(online_scaleout.ScaleoutConfig)
  try:
    cfg.validate()
  except ValueError as e:
    raise app.UsageError(str(e))
  try:
    online_scaleout.run(cfg, log=lambda s: print(s, flush=True))
  except RuntimeError as e:
    sys.exit(f"online_scaleout.py: error: {e}")


if __name__ == "__main__":
  config_flags.run(main)
