"""Online fine-tuning of an offline CCVL run with lower and upper bounds on a Reverb server.

  python binaries/finetune_online.py --offline_dir=DIR --game=Breakout|gridworld --root_dir=DIR \
      --num_env_steps=N [--reverb_address=host:port] [--num_actors=K] [--offline_fraction=F]

Restores the offline checkpoint (train_offline.py's root_dir/checkpoints; for the gridworld,
--prepare_gridworld_offline=STEPS first trains one into --offline_dir), starts a Reverb server
in this process unless --reverb_address is given (binaries/reverb_server.py), starts K actor
processes running the exploration policy (Eq. upper policy, epsilon-greedy), and trains the
learner from the replay table at --samples_per_insert. A rerun with the same --root_dir resumes
from the last learner checkpoint (and the in-process server from its Reverb checkpoint).
Flags -> OnlineConfig -> ccvl_tf.experiments.online.run (docs/online.md).
"""
import sys

from absl import app
from absl import flags
from absl import logging

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.experiments import online

_D = online.OnlineConfig()
_OFFLINE = flags.DEFINE_string("offline_dir", None, "root_dir of the offline run to fine-tune.")
_GAME = flags.DEFINE_string("game", _D.game, "'gridworld' or an Atari game (ALE name).")
_AGENT = flags.DEFINE_enum("agent", _D.agent, list(online.AGENTS),
                           "'ccvl' (lower + upper bounds, Eq. upper policy exploration) or "
                           "'cql' (baseline: greedy + epsilon exploration).")
_ROOT = flags.DEFINE_string("root_dir", None, "Run directory (checkpoints, logs, policies).")
_ENV_STEPS = flags.DEFINE_integer("num_env_steps", _D.num_env_steps,
                                  "Env steps of online interaction (all actors together).", lower_bound=1)
_ADDRESS = flags.DEFINE_string("reverb_address", None,
                               "host:port of a running Reverb server (binaries/reverb_server.py)"
                               "; default: start one in this process.")
_ACTORS = flags.DEFINE_integer("num_actors", _D.num_actors, "Actor processes to start.", lower_bound=0)
_BATCH = flags.DEFINE_integer("batch_size", _D.batch_size, "Transitions per learner step.", lower_bound=1)
_OFF_FRAC = flags.DEFINE_float("offline_fraction", _D.offline_fraction,
                               "Share of each batch drawn from the offline data (gridworld).", lower_bound=0.0, upper_bound=1.0)
_SPI = flags.DEFINE_float("samples_per_insert", _D.samples_per_insert,
                          "Rate limiter: sampled items per inserted env step (8 = batch 32, "
                          "one learner step per 4 env steps).", lower_bound=1e-6, upper_bound=1e6)
_MIN_SIZE = flags.DEFINE_integer("min_replay_size", _D.min_replay_size,
                                 "Items in the replay table before the first sample.", lower_bound=1)
_CAPACITY = flags.DEFINE_integer("replay_capacity", _D.replay_capacity, "Replay table size.", lower_bound=1)
_BETA = flags.DEFINE_float("beta", _D.beta, "beta of Eq. upper policy's safe set.")
_XDELTA = flags.DEFINE_float("explore_delta", _D.explore_delta,
                             "Fixed delta of the exploration (bounds) policy; unset (default): "
                             "delta ~ the belief b(h) in the policy state, drawn per episode "
                             "and updated from Q_l's Bellman errors (Eq. upper policy).",
                             lower_bound=1e-6, upper_bound=1 - 1e-6)
_XTEMP = flags.DEFINE_float("belief_temperature", None,
                            "Temperature of the exploration belief (unset: the offline run's, "
                            "from its summary.json; 1 if it has none).", lower_bound=1e-12,
                            upper_bound=1e12)
_XEPS = flags.DEFINE_float("explore_epsilon", _D.explore_epsilon, "Actors' epsilon.")
_PDELTA = flags.DEFINE_float("policy_delta", _D.policy_delta,
                             "delta of the exported Fixed-CCVL policy (Q_l greedy).")
_UALPHA = flags.DEFINE_float("upper_alpha", None, "alpha of the upper bound (default: alpha).")
_LR = flags.DEFINE_float("learning_rate", None,
                         "Adam learning rate of both bounds online (default: the offline one).")
_UPDATE = flags.DEFINE_integer("actor_update_period", _D.actor_update_period,
                               "Env steps between an actor's weight pulls.")
_PUSH = flags.DEFINE_integer("push_period", _D.push_period,
                             "Learner steps between weight pushes.")
_CKPT = flags.DEFINE_integer("checkpoint_interval", _D.checkpoint_interval,
                             "Learner (and Reverb) checkpoint every N learner steps.", lower_bound=1)
_LOG = flags.DEFINE_integer("log_interval", _D.log_interval, "Progress line every N steps.", lower_bound=1)
_EPISODES = flags.DEFINE_integer("eval_episodes", _D.eval_episodes,
                                  "Evaluation episodes at the end (0: none).", lower_bound=0)
_EXPORT = flags.DEFINE_bool("export_policies", True, "Write the SavedModels at the end.")
_EVAL_MAX = flags.DEFINE_integer("eval_max_steps", _D.eval_max_steps,
                                 "Step cap of an evaluation episode.", lower_bound=1)
_TIMEOUT = flags.DEFINE_float("sample_timeout_s", _D.sample_timeout_s,
                              "Seconds without a sample before checking server and actors.", lower_bound=1e-3, upper_bound=86400.0)
_SERVER_TIMEOUT = flags.DEFINE_float("server_timeout_s", _D.server_timeout_s,
                                     "Seconds before an unanswering Reverb server is lost.", lower_bound=1e-3, upper_bound=86400.0)
_PORT = flags.DEFINE_integer("reverb_port", 0, "Port of the in-process server (0: free port).", lower_bound=0, upper_bound=65535)
_PREP = flags.DEFINE_integer("prepare_gridworld_offline", 0,
                             "gridworld only: first train offline CCVL (both bounds) for this "
                             "many steps into --offline_dir if it has no checkpoint.")
_STRATEGY = flags.DEFINE_enum("strategy", "default", ["default", "mirrored"],
                              "tf.distribute strategy of the learner: 'mirrored' = "
                              "MirroredStrategy over the local GPUs (batch split across them).")
_SEED = flags.DEFINE_integer("seed", _D.seed, "Seed.", lower_bound=0)


def main(argv):
  del argv
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.ERROR)
  if not _OFFLINE.value or not _ROOT.value:
    raise app.UsageError("--offline_dir and --root_dir are required")
  import os
  if _PREP.value:
    if _GAME.value.lower() != online.GRIDWORLD:
      raise app.UsageError("--prepare_gridworld_offline needs --game=gridworld")
    if not os.path.isdir(os.path.join(_OFFLINE.value, "checkpoints")):
      online.train_offline_gridworld(_OFFLINE.value, _PREP.value, seed=_SEED.value,
                                     log=lambda s: print(s, flush=True), agent=_AGENT.value)
  cfg = online.OnlineConfig(
      offline_dir=_OFFLINE.value, game=_GAME.value, agent=_AGENT.value, root_dir=_ROOT.value,
      num_env_steps=_ENV_STEPS.value, reverb_address=_ADDRESS.value, num_actors=_ACTORS.value,
      batch_size=_BATCH.value, offline_fraction=_OFF_FRAC.value,
      samples_per_insert=_SPI.value, min_replay_size=_MIN_SIZE.value,
      replay_capacity=_CAPACITY.value, beta=_BETA.value, explore_delta=_XDELTA.value,
      belief_temperature=_XTEMP.value,
      explore_epsilon=_XEPS.value, policy_delta=_PDELTA.value, upper_alpha=_UALPHA.value, learning_rate=_LR.value,
      actor_update_period=_UPDATE.value, push_period=_PUSH.value,
      checkpoint_interval=_CKPT.value, log_interval=_LOG.value, eval_episodes=_EPISODES.value, export_policies=_EXPORT.value,
      eval_max_steps=_EVAL_MAX.value, sample_timeout_s=_TIMEOUT.value,
      server_timeout_s=_SERVER_TIMEOUT.value, reverb_port=_PORT.value, seed=_SEED.value)
  try:
    cfg.validate()
  except ValueError as e:
    raise app.UsageError(str(e))
  strategy = None
  if _STRATEGY.value == "mirrored":
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    print(f"MirroredStrategy over {strategy.num_replicas_in_sync} device(s).", flush=True)
    if cfg.batch_size % strategy.num_replicas_in_sync:
      raise app.UsageError(f"--batch_size={cfg.batch_size} must be divisible by the "
                           f"{strategy.num_replicas_in_sync} replicas")
  try:
    summary = online.run(cfg, log=lambda s: print(s, flush=True), strategy=strategy)
  except (ValueError, ConnectionError, RuntimeError, FloatingPointError) as e:
    sys.exit(f"finetune_online.py: error: {e}")
  print(f"Done: learner step {summary['step']}; evaluation {summary['last_eval']}"
        + (f"; policies in {summary['policy_dirs']['policy']}" if cfg.export_policies else "")
        + ".", flush=True)


if __name__ == "__main__":
  app.run(main)
