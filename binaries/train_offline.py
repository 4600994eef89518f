"""Offline training of CCVL or a baseline (`ccvl_tf.fit`); --helpfull lists every setting.

  python binaries/train_offline.py --game=Breakout [--dataset_dir=DIR --subset=1%%] --root_dir=DIR
  python binaries/train_offline.py --dataset=DATA.npz --game=gymnasium:CartPole-v1 --root_dir=DIR
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
from ccvl_tf.runtime import training
from ccvl_tf.experiments import agent_options
from ccvl_tf.experiments import fit as fit_lib
from ccvl_tf.experiments.fit import replay as fit_replay
from ccvl_tf.experiments.fit import settings as fit_settings
from ccvl_tf.experiments.offline import config as offline_config

# The flags a user sets, listed by --helpshort; the others (the agents' and the run's advanced
# settings) only by --helpfull.
SHORT_FLAGS = ("game", "root_dir", "dataset", "dataset_dir", "subset", "agent", "preset",
               "alpha", "num_steps", "seed", "eval_episodes", "reference_agents", "tf_threads")
# Own data's settings beside OfflineConfig's (experiments/fit/settings.py FitSettings).
OWN_DATA_FLAGS = ("torso", "mlp_units", "held_out_batches")


# The `setting` fields of OfflineConfig.
config_flags.define(offline_config.OfflineConfig, short=SHORT_FLAGS)
# alpha, N, M, ..., CCVL's options: generated from ccvl_tf.agents.ccvl_agent.CCVLConfig
agent_options.define_flags(offline_config.AGENT_FLAGS,
                           default_notes=offline_config.AGENT_FLAG_NOTES, short=SHORT_FLAGS)
config_flags.define(fit_settings.FitSettings, names=OWN_DATA_FLAGS, short=SHORT_FLAGS)
config_flags.define(fit_settings.DataSetting, short=SHORT_FLAGS)


# Flags -> OfflineConfig -> its plan (offline.config.resolve, the one validation) ->
# ccvl_tf.fit's Atari route (experiments/fit/replay.py run_plan); with --dataset, flags ->
# ccvl_tf.fit on the data; no algorithm code here.


def config_from_flags() -> offline_config.OfflineConfig:
  """The OfflineConfig of the parsed flags (the agent settings given: `agent_values`)."""
  return config_flags.from_flags(
      offline_config.OfflineConfig,
      agent_values=agent_options.from_flags(offline_config.AGENT_FLAGS))


def own_data_settings() -> dict:
  """fit's keywords from the flags given on the command line (own data): the run settings
  FitSettings declares and the learner's; a given flag of the Atari route only is refused."""
  fv = flags.FLAGS
  run = [f for f in fit_settings.FIELDS if f != "root_dir" and f in fv and fv[f].present]
  atari_only = sorted(f.name for f in fit_replay.run_fields()
                      if f.name in fv and fv[f.name].present and f.name not in
                      fit_settings.FIELDS and f.name not in ("game", "agent", "root_dir"))
  if atari_only:
    raise app.UsageError(
        f"{', '.join('--' + n for n in atari_only)}: DQN Replay settings; with --dataset "
        f"(own data) the run takes {', '.join('--' + n for n in sorted(fit_settings.FIELDS))} "
        f"and the learner's settings")
  own = config_flags.values(fit_settings.FitSettings, OWN_DATA_FLAGS)
  return dict({f: own[f] if f in own else fv[f].value for f in run},
              **agent_options.from_flags(offline_config.AGENT_FLAGS))


def main(argv):
  del argv
  if not flags.FLAGS["verbosity"].present:  # TF/TF-Agents INFO logs drown the progress lines
    logging.set_verbosity(logging.ERROR)
  log = lambda s: print(s, flush=True)
  fv = flags.FLAGS
  if fv.dataset is not None:
    settings = own_data_settings()
    try:
      data = fit_lib.load_data(fv.dataset)
      result = fit_lib.fit(data, fv.agent, root_dir=fv.root_dir,
                           env=fv.game if fv["game"].present else None, log=log, **settings)
    except (ValueError, TypeError, MemoryError, training.TrainingStopped,
            training.WriteFailed) as e:
      sys.exit(f"train_offline.py: error: {e}")
    summary = result.summary
  else:
    for name in OWN_DATA_FLAGS:
      if fv[name].present:
        raise app.UsageError(f"--{name} is a setting of own data (--dataset); the Atari "
                             f"run's network is the Nature DQN's")
    try:
      plan = offline_config.resolve(config_from_flags())  # validated once, here
    except ValueError as e:
      raise app.UsageError(str(e))
    try:
      summary = fit_replay.run_plan(plan, log).summary
    except (ValueError, MemoryError, training.TrainingStopped, training.WriteFailed) as e:
      # Bad data (names the file), a checkpoint of another run, a NaN loss (names the step
      # and the last good checkpoint), a failed write (names the path and the last good
      # checkpoint): one clear line, no traceback.
      sys.exit(f"train_offline.py: error: {e}")
  print(f"Done: {summary['step']} steps; last evaluation {summary['last_eval']}; "
        f"policies in {', '.join(summary['exported_policies'].values())}.", flush=True)


if __name__ == "__main__":
  config_flags.run(main)
