"""Collect an Atari dataset in the Dopamine replay checkpoint format (DQN Replay).

  python binaries/collect_dataset.py --game=Breakout --policy=random --steps=50000 \
      --output_dir=/tmp/breakout_random/1/replay_logs

``--policy`` is ``random`` (uniform over the minimal action set) or the directory
of a TF-Agents SavedModel policy (``PolicySaver`` export; it is called with
``get_initial_state`` / ``action``). The ALE runs with the paper's preprocessing
(ccvl_tf/envs/atari.py). Files: ``$store$_*_ckpt.N.gz``, ``add_count_ckpt.N.gz``,
``invalid_range_ckpt.N.gz`` per logged buffer (one every ``--replay_capacity - 1``
adds, as batch_rl's logger) plus ``ccvl_dataset.json`` (game, action count,
policy). Refuses to write into a directory that already holds a dataset.
Flags -> ccvl_tf.data.replay_writer.collect (no algorithm code here).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ccvl_tf  # noqa: E402,F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from ccvl_tf.data import dqn_replay  # noqa: E402
from ccvl_tf.data import replay_writer  # noqa: E402
from ccvl_tf.envs import atari  # noqa: E402

_GAME = flags.DEFINE_string("game", None, "Atari game, e.g. Breakout.", required=True)
_POLICY = flags.DEFINE_string("policy", "random",
                              "'random' or the directory of a TF-Agents SavedModel policy.")
_STEPS = flags.DEFINE_integer("steps", None, "Agent steps (transitions) to collect.",
                              required=True, lower_bound=1)
_OUT = flags.DEFINE_string("output_dir", None, "Directory for the checkpoint files.",
                           required=True)
_CAPACITY = flags.DEFINE_integer("replay_capacity", dqn_replay.DQN_REPLAY_CAPACITY,
                                 "Slots per checkpoint (the DQN Replay Dataset: 1,000,000).", lower_bound=4)
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the ALE (sticky actions) and random policy.", lower_bound=0)
_STICKY = flags.DEFINE_float("sticky_action_prob", atari.STICKY_ACTION_PROB,
                             "ALE repeat_action_probability.", lower_bound=0.0, upper_bound=1.0)
_EVERY = flags.DEFINE_integer("progress_every", 10_000, "Print progress every N steps.", lower_bound=1)


def _print_progress(p):
  ret = "-" if p["mean_return"] is None else "{:.1f}".format(p["mean_return"])
  print("step {step}/{num_steps}  {sps:.0f} steps/s  ETA {eta:.0f}s  episodes {ep}  "
        "mean raw return {ret}".format(step=p["step"], num_steps=p["num_steps"],
                                       sps=p["steps_per_s"], eta=p["eta_s"], ep=p["episodes"],
                                       ret=ret), flush=True)


def main(argv):
  del argv
  if _STEPS.value <= 0:
    raise app.UsageError("--steps must be positive")
  try:
    env = atari.AtariEnvironment(_GAME.value, seed=_SEED.value,
                                 sticky_action_prob=_STICKY.value)
  except ValueError as e:
    raise app.UsageError(str(e))
  if _POLICY.value == "random":
    policy = replay_writer.random_policy(env.num_actions, seed=_SEED.value)
  else:
    try:
      policy = replay_writer.saved_model_policy(_POLICY.value)
    except ValueError as e:
      raise app.UsageError(str(e))
  try:
    writer = replay_writer.DopamineReplayWriter(
        _OUT.value, replay_capacity=_CAPACITY.value,
        metadata=dict(game=env.game, num_actions=env.num_actions, action_set=env.action_set,
                      policy=_POLICY.value, steps=_STEPS.value, seed=_SEED.value,
                      sticky_action_prob=_STICKY.value))
  except FileExistsError as e:
    raise app.UsageError(str(e))
  print("collecting {} steps of {} ({} actions) with policy {} into {}".format(
      _STEPS.value, env.game, env.num_actions, _POLICY.value, _OUT.value), flush=True)
  summary = replay_writer.collect(env, policy, _STEPS.value, writer, progress=_print_progress,
                               progress_every=_EVERY.value)
  suffixes = writer.close()
  print("wrote checkpoints {} ({} complete episodes) to {}".format(
      suffixes, summary["episodes"], _OUT.value), flush=True)


if __name__ == "__main__":
  app.run(main)
