"""Online fine-tuning of an offline CCVL run with lower and upper bounds on a Reverb server.

  python binaries/finetune_online.py --offline_dir=DIR --game=Breakout|gridworld --root_dir=DIR \
      --num_env_steps=N [--reverb_address=host:port] [--num_actors=K] [--offline_fraction=F]
  python binaries/finetune_online.py --offline_dir=<a train_offline.py --dataset run> \
      --game=gymnasium:CartPole-v1 --root_dir=DIR --num_env_steps=N

Restores the offline checkpoint (train_offline.py's root_dir/checkpoints; for the gridworld,
--prepare_gridworld_offline=STEPS first trains one into --offline_dir), starts a Reverb server
in this process unless --reverb_address is given (binaries/reverb_server.py), starts K actor
processes running the exploration policy (Eq. upper policy, epsilon-greedy), and trains the
learner from the replay table at --samples_per_insert; with --offline_fraction=F, round(F x
--batch_size) transitions of each batch come from the dataset the offline run trained on (Atari,
MinAtar: its summary.json's dataset, checked against its record; own data: the transitions the
run trained on, read again and checked; gridworld: the paper's). A run of ccvl_tf.fit on own
data fine-tunes in a Gymnasium environment of its data's observations and actions, with the
network, learner settings and reward handling its summary.json records. A rerun with the same
--root_dir resumes from the last learner checkpoint (and the in-process server from its Reverb
checkpoint).
Flags -> OnlineConfig -> ccvl_tf.finetune (experiments/online/finetune.py; docs/online.md).
"""
import os
import sys

from absl import app
from absl import flags
from absl import logging

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
import tensorflow as tf  # noqa: E402
from ccvl_tf.agents import ccvl_bounds_agent
from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime import paths
from ccvl_tf.runtime import writes
from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.experiments.online import finetune as finetune_lib
from ccvl_tf.experiments.online import start as online_start
from ccvl_tf.experiments.online import runner as online

config_flags.define(online_config.OnlineConfig)  # OnlineConfig's flag fields
# The upper bound's and the exploration policy's settings, from their declaration.
config_flags.define(ccvl_bounds_agent.ExplorationConfig,
                    flag_defaults=online_config.EXPLORATION_FLAG_DEFAULTS)
_PREP = flags.DEFINE_integer("prepare_gridworld_offline", 0,
                             "gridworld only: first train offline CCVL (both bounds) for this "
                             "many steps into --offline_dir if it has no checkpoint.")
_STRATEGY = flags.DEFINE_enum("strategy", "default", ["default", "mirrored"],
                              "tf.distribute strategy of the learner: 'mirrored' = "
                              "MirroredStrategy over the local GPUs (batch split across them).")


def main(argv):
  del argv
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.ERROR)
  fv = flags.FLAGS
  if not fv.offline_dir or not fv.root_dir:
    raise app.UsageError("--offline_dir and --root_dir are required")
  if _PREP.value:
    if fv.game.lower() != online_config.GRIDWORLD:
      raise app.UsageError("--prepare_gridworld_offline needs --game=gridworld")
    if not paths.isdir(os.path.join(fv.offline_dir, "checkpoints")):
      if paths.is_remote(fv.offline_dir):
        raise app.UsageError(f"--prepare_gridworld_offline writes the offline run into "
                             f"--offline_dir, which must then be local, got {fv.offline_dir}")
      online_start.train_offline_gridworld(fv.offline_dir, _PREP.value, seed=fv.seed,
                                     log=lambda s: print(s, flush=True), agent=fv.agent)
  cfg = config_flags.from_flags(
      online_config.OnlineConfig,
      exploration_values=config_flags.given(ccvl_bounds_agent.ExplorationConfig))
  try:
    cfg.validate()
  except ValueError as e:
    raise app.UsageError(str(e))
  strategy = None
  if _STRATEGY.value == "mirrored":
    strategy = tf.distribute.MirroredStrategy()
    print(f"MirroredStrategy over {strategy.num_replicas_in_sync} device(s).", flush=True)
    if cfg.batch_size % strategy.num_replicas_in_sync:
      raise app.UsageError(f"--batch_size={cfg.batch_size} must be divisible by the "
                           f"{strategy.num_replicas_in_sync} replicas")
  try:
    summary = finetune_lib.finetune(**finetune_lib.arguments(cfg),
                                    log=lambda s: print(s, flush=True), strategy=strategy)
  except (ValueError, ConnectionError, RuntimeError, FloatingPointError,
          writes.WriteFailed) as e:
    sys.exit(f"finetune_online.py: error: {e}")
  shown = {k: v for k, v in summary["last_eval"].items() if online.shown_in_log(k)}
  print(f"Done: learner step {summary['step']}; evaluation {shown}"
        + (f"; policies in {summary['policy_dirs']['policy']}" if cfg.export_policies else "")
        + ".", flush=True)


if __name__ == "__main__":
  config_flags.run(main)
