"""The demo (`make demo`) over several training seeds: mean and spread across seeds beside each
seed's per-episode CI.

  python binaries/demo_seeds.py --output_dir=runs/demo_seeds [--seeds=0,1,2,3,4] \
      [-- further train_offline.py flags, e.g. --num_steps=10000]

Runs binaries/train_offline.py once per seed into OUTPUT_DIR/seed_<k> (the first seed's run
collects the default dataset; the others train on it), then writes OUTPUT_DIR/seeds.md and
seeds.csv. A rerun skips finished seeds and resumes the others.
Flags -> DemoSeedsConfig -> ccvl_tf.experiments.offline.demo_seeds.run (no algorithm code here).
"""
import sys

from absl import app
from absl import flags
from absl import logging

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.runtime import config_flags
from ccvl_tf.experiments.offline import demo_seeds

config_flags.define(demo_seeds.DemoSeedsConfig)


def main(argv):
  train_flags = argv[1:]  # after `--`: train_offline.py's own flags
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.ERROR)
  try:
    cfg = config_flags.from_flags(demo_seeds.DemoSeedsConfig)
    cfg.validate(train_flags)
  except ValueError as e:
    raise app.UsageError(str(e))
  try:
    demo_seeds.run(cfg, train_flags, log=lambda s: print(s, flush=True))
  except (ValueError, FileNotFoundError, RuntimeError) as e:
    sys.exit(f"demo_seeds.py: error: {e}")


if __name__ == "__main__":
  config_flags.run(main)
