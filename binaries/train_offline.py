"""Offline training of CCVL on Atari from a DQN Replay (Dopamine-format) dataset.

  python binaries/train_offline.py --game=Breakout [--dataset_dir=DIR --subset=1%%] --root_dir=DIR

Without --dataset_dir a small default dataset is collected once and cached under root_dir.
Writes checkpoints (a rerun resumes), summaries, the final policies (SavedModels) and a
results table (results.md) under root_dir. --helpfull lists every setting.
"""
import sys

from absl import app
from absl import flags
from absl import logging

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.experiments import tf_setup  # noqa: E402
tf_setup.pin_cpu_kernels()  # before TensorFlow loads: the same CPU kernels on every machine
from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime import run_lock
from ccvl_tf.runtime import training
from ccvl_tf.experiments import agent_options
from ccvl_tf.experiments.compare import offline_table
from ccvl_tf.experiments.offline import config as offline_config
from ccvl_tf.experiments.offline import runner as offline

# The flags a user sets, listed by --helpshort; the others (the agents' and the run's advanced
# settings) only by --helpfull.
SHORT_FLAGS = ("game", "root_dir", "dataset_dir", "subset", "agent", "preset", "alpha",
               "num_steps", "seed", "eval_episodes", "reference_agents", "tf_threads")

# The `setting` fields of OfflineConfig.
config_flags.define(offline_config.OfflineConfig, short=SHORT_FLAGS)
# alpha, N, M, ..., CCVL's options: generated from ccvl_tf.agents.ccvl_agent.CCVLConfig
agent_options.define_flags(offline_config.AGENT_FLAGS,
                           default_notes=offline_config.AGENT_FLAG_NOTES, short=SHORT_FLAGS)


# Flags -> OfflineConfig -> its plan (offline.config.resolve, the one validation) -> under the
# run directory's lock, taken once here (ccvl_tf/runtime/run_lock.py),
# ccvl_tf.experiments.offline.runner.run_holding_lock, then
# ccvl_tf.experiments.compare.offline_table.run (the reference agents, results.md); no
# algorithm code here.


def config_from_flags() -> offline_config.OfflineConfig:
  """The OfflineConfig of the parsed flags (the agent settings given: `agent_values`)."""
  return config_flags.from_flags(
      offline_config.OfflineConfig,
      agent_values=agent_options.from_flags(offline_config.AGENT_FLAGS))


def main(argv):
  del argv
  if not flags.FLAGS["verbosity"].present:  # TF/TF-Agents INFO logs drown the progress lines
    logging.set_verbosity(logging.ERROR)
  try:
    plan = offline_config.resolve(config_from_flags())  # validated once, here
  except ValueError as e:
    raise app.UsageError(str(e))
  cfg = plan.config
  try:
    log = lambda s: print(s, flush=True)
    # The lock, taken once here, is held across the run and its table: one process.
    with run_lock.hold(cfg.root_dir, "--root_dir"):
      summary = offline_table.run(cfg, offline.run_holding_lock(plan, log=log), log=log)
  except (ValueError, MemoryError, training.TrainingStopped, training.WriteFailed) as e:
    # Bad data (names the file), a checkpoint of another run, a NaN loss (names the step and
    # the last good checkpoint), a failed write (names the path and the last good
    # checkpoint): one clear line, no traceback.
    sys.exit(f"train_offline.py: error: {e}")
  print(f"Done: {summary['step']} steps; last evaluation {summary['last_eval']}; "
        f"policies in {', '.join(summary['exported_policies'].values())}.", flush=True)


if __name__ == "__main__":
  config_flags.run(main)
