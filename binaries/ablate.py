"""Ablation of the offline learners' settings on one development dataset.

  python binaries/ablate.py --dataset_dir=DEV/replay_logs --heldout_dir=HELDOUT/replay_logs \
      --output_dir=runs/ablation [--variants=bc,cql,cql_alpha1,...] [--num_steps=10000]

Trains each named variant (an agent and the settings it changes: alpha, learning rate, Adam
epsilon, DR3, target period, CCVL's count weighting; the grid is
ccvl_tf.experiments.offline.ablation.VARIANTS), probes held-out states every --probe_interval steps
(agreement with the data's action, greedy mode share, CQL gap, dead feature units) and scores
the greedy policy in the ALE at the end. Writes OUT/table.md, rows.csv, probes.csv, curves.png;
rerunning the same command resumes. Use development data only (docs/ablation.md).
Flags -> AblationConfig -> ccvl_tf.experiments.offline.ablation.run (no algorithm code here).
"""
import sys

from absl import app
from absl import flags
from absl import logging

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.runtime import config_flags
from ccvl_tf.experiments.offline import ablation

config_flags.define(ablation.AblationConfig)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError("unexpected arguments: {}".format(" ".join(argv[1:])))
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.ERROR)
  # Here: writes loads TensorFlow; each spawned worker re-runs this file's top, and TensorFlow
  # must load there after _worker_init's quiet_start (experiments/offline/ablation.py).
  from ccvl_tf.runtime import writes  # pylint: disable=g-import-not-at-top
  try:
    cfg = config_flags.from_flags(ablation.AblationConfig)
    ablation.run(cfg, log=lambda s: print(s, flush=True))
  except (ValueError, writes.WriteFailed) as e:
    sys.exit(f"ablate.py: error: {e}")
  print(f"Table: {cfg.output_dir}/table.md", flush=True)


if __name__ == "__main__":
  config_flags.run(main)
