"""Offline training of CCVL on Atari from a DQN Replay (Dopamine-format) dataset.

  python binaries/train_offline.py --game=Breakout [--dataset_dir=DIR --subset=1%|5%|initial10%]
      [--agent=ccvl|fixed_ccvl|cql|rem|aevl|dqn] --num_steps=N --root_dir=DIR

Without --dataset_dir a small default dataset (--default_dataset_steps transitions of a
behaviour policy that plays: for Breakout a scripted paddle/ball tracker mixed with 25% random
actions; a uniformly random policy for games without a scripted player) is collected once in
the ALE and cached under root_dir. At the end: the confidence diagnostics and a results table
(random, behaviour, CCVL, Fixed-CCVL: mean score with 95% bootstrap CI) in results.md/.png. Progress (steps/s, ETA,
losses) goes to stdout, TensorBoard summaries to root_dir/summaries, checkpoints to
root_dir/checkpoints (a rerun resumes exactly where it stopped), the final policies to
root_dir/policy (the agent's evaluation policy; for ccvl the confidence-adaptive CCVL policy, plus
root_dir/policy_fixed for Fixed-CCVL) as SavedModels.
Flags -> OfflineConfig -> ccvl_tf.experiments.offline.run (no algorithm code here).
"""
import sys

from absl import app
from absl import flags
from absl import logging

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.experiments import agent_options
from ccvl_tf.experiments import offline

_D = offline.OfflineConfig()
_GAME = flags.DEFINE_string("game", _D.game, "Atari game (ALE name, e.g. Breakout, Pong).")
_ROOT = flags.DEFINE_string("root_dir", _D.root_dir,
                            "Run directory: checkpoints, summaries, eval.csv, policies.")
_DATA = flags.DEFINE_string("dataset_dir", None,
                            "Dopamine replay_logs directory of one run (DQN Replay Dataset "
                            "layout: <game>/<run>/replay_logs). Default: collect a small one.")
_SUBSET = flags.DEFINE_enum("subset", _D.subset, ["1%", "5%", "initial10%", "all"],
                            "Which part of the dataset to train on.")
_AGENT = flags.DEFINE_string(
    "agent", _D.agent, "Which learner (ccvl_tf.experiments.agent_registry): " + "; ".join(
        f"{s.name}: {s.description}" for s in offline.AGENT_REGISTRY.values() if s.offline)
    + ".")
_STEPS = flags.DEFINE_integer("num_steps", _D.num_steps, "Gradient steps in total.")
_BATCH = flags.DEFINE_integer("batch_size", _D.batch_size, "Transitions per batch.")
_ALPHA = flags.DEFINE_float("alpha", _D.alpha, "alpha, weight of the CCVL regularizer (>= 0).")
_N = flags.DEFINE_integer("num_deltas", _D.num_deltas, "N, deltas sampled per transition.")
_M = flags.DEFINE_integer("num_pairs", _D.num_pairs, "M, (delta1, delta2) pairs per delta.")
_PDELTA = flags.DEFINE_float("policy_delta", _D.policy_delta,
                             "delta of the greedy policy evaluated during training.")
_K = flags.DEFINE_integer("num_grid_deltas", _D.num_grid_deltas,
                          "K, the quantized delta grid of the exported policies.")
_TEMP = flags.DEFINE_float("belief_temperature", None,
                           "Temperature of the exported adaptive policy's belief update "
                           "(default: set from held-out data, 2 x the smallest mean squared "
                           "Bellman error over the grid).", lower_bound=1e-12, upper_bound=1e12)
agent_options.define_flags()  # CCVL's options, generated from agents.ccvl_agent.CCVLConfig
_CKPT = flags.DEFINE_integer("checkpoint_interval", _D.checkpoint_interval,
                             "Checkpoint every this many steps.")
_LOG = flags.DEFINE_integer("log_interval", _D.log_interval, "Progress line every N steps.")
_SUMM = flags.DEFINE_integer("summary_interval", _D.summary_interval,
                             "TensorBoard scalars every N steps.")
_EVAL = flags.DEFINE_integer("eval_interval", _D.eval_interval,
                             "Evaluate in the ALE every N steps (0: at the end only).")
_EPISODES = flags.DEFINE_integer("eval_episodes", _D.eval_episodes, "Episodes per evaluation.")
_EVAL_MAX = flags.DEFINE_integer("eval_max_steps", _D.eval_max_steps,
                                 "Agent-step cap of an evaluation episode.")
_DEF_STEPS = flags.DEFINE_integer("default_dataset_steps", _D.default_dataset_steps,
                                  "Size of the default dataset collected without --dataset_dir.")
_BEHAVIOUR = flags.DEFINE_enum(
    "default_dataset_policy", _D.default_dataset_policy, ["auto", "scripted", "random"],
    "Behaviour policy of the default dataset (no --dataset_dir): auto = the scripted player "
    "where the game has one (Breakout: paddle/ball from the ALE RAM), else uniformly random.")
_BEPS = flags.DEFINE_float("behaviour_epsilon", _D.behaviour_epsilon,
                           "The scripted player's probability of a uniformly random action.",
                           lower_bound=0.0, upper_bound=1.0)
_SEED = flags.DEFINE_integer("seed", _D.seed, "Seed of data order, deltas and evaluation.", lower_bound=0)
_ALLOW = flags.DEFINE_boolean(
    "allow_config_change", _D.allow_config_change,
    "Resume the checkpoints in --root_dir although they were trained with another agent, "
    "learning setting or dataset (by default such a resume is refused, listing the "
    "differences). num_steps, intervals and evaluation settings may always change.")


def main(argv):
  del argv
  if not flags.FLAGS["verbosity"].present:  # TF/TF-Agents INFO logs drown the progress lines
    logging.set_verbosity(logging.ERROR)
  cfg = offline.OfflineConfig(
      game=_GAME.value, root_dir=_ROOT.value, dataset_dir=_DATA.value, subset=_SUBSET.value,
      agent=_AGENT.value, num_steps=_STEPS.value, batch_size=_BATCH.value, alpha=_ALPHA.value,
      num_deltas=_N.value, num_pairs=_M.value, policy_delta=_PDELTA.value,
      num_grid_deltas=_K.value, belief_temperature=_TEMP.value,
      checkpoint_interval=_CKPT.value, log_interval=_LOG.value, summary_interval=_SUMM.value,
      eval_interval=_EVAL.value, eval_episodes=_EPISODES.value, eval_max_steps=_EVAL_MAX.value,
      default_dataset_steps=_DEF_STEPS.value, seed=_SEED.value,
      ccvl_options=agent_options.from_flags(), allow_config_change=_ALLOW.value,
      default_dataset_policy=_BEHAVIOUR.value, behaviour_epsilon=_BEPS.value)
  try:
    cfg.validate()
    from ccvl_tf.envs import atari
    atari.check_game(cfg.game)
  except ValueError as e:
    raise app.UsageError(str(e))
  from ccvl_tf import training
  try:
    summary = offline.run(cfg, log=lambda s: print(s, flush=True))
  except (ValueError, MemoryError, training.TrainingStopped) as e:
    # Bad data (names the file), a checkpoint of another run, a NaN loss (names the step and
    # the last good checkpoint): one clear line, no traceback.
    sys.exit(f"train_offline.py: error: {e}")
  print(f"Done: {summary['step']} steps; last evaluation {summary['last_eval']}; "
        f"policies in {', '.join(summary['exported_policies'].values())}.", flush=True)


if __name__ == "__main__":
  app.run(main)
