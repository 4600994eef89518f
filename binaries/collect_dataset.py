"""Collect an Atari dataset in the Dopamine replay checkpoint format (DQN Replay), or a
Gymnasium environment's dataset as one .npz.

  python binaries/collect_dataset.py --game=Breakout --policy=random --steps=50000 \
      --output_dir=/tmp/breakout_random/1/replay_logs
  python binaries/collect_dataset.py --game=gymnasium:CartPole-v1 --policy=random \
      --steps=10000 --output=/tmp/cartpole_random.npz

``--policy`` is ``random`` (uniform over the minimal action set) or the directory
of a TF-Agents SavedModel policy (``PolicySaver`` export; it is called with
``get_initial_state`` / ``action``). The ALE runs with the paper's preprocessing
(ccvl_tf/envs/atari.py). Files: ``$store$_*_ckpt.N.gz``, ``add_count_ckpt.N.gz``,
``invalid_range_ckpt.N.gz`` per logged buffer (one every ``--replay_capacity - 1``
adds, as batch_rl's logger) plus ``ccvl_dataset.json`` (game, action count,
policy). Refuses to write into a directory that already holds a dataset.
``--num_envs=N`` (N > 1, random policy) steps N copies of ale_py's vector environment side by
side (ccvl_tf.data.vector_collection). Flags -> ccvl_tf.data.replay_writer.collect /
vector_collection.collect_random (no algorithm code here).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ccvl_tf  # noqa: E402,F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from ccvl_tf.runtime import config_flags  # noqa: E402
from ccvl_tf.runtime import training  # noqa: E402
from ccvl_tf.data import replay_writer  # noqa: E402
from ccvl_tf.data import vector_collection  # noqa: E402
from ccvl_tf.envs import atari  # noqa: E402
from ccvl_tf.evaluation import atari_vector, rollouts  # noqa: E402
from ccvl_tf.experiments.offline import default_dataset  # noqa: E402
from ccvl_tf.experiments.offline import gym_dataset  # noqa: E402

config_flags.define(default_dataset.CollectConfig)  # the `setting` fields of CollectConfig


def _print_progress(p):
  ret = "-" if p["mean_return"] is None else "{:.1f}".format(p["mean_return"])
  print("step {step}/{num_steps}  {sps:.0f} steps/s  ETA {eta:.0f}s  episodes {ep}  "
        "mean raw return {ret}".format(step=p["step"], num_steps=p["num_steps"],
                                       sps=p["steps_per_s"], eta=p["eta_s"], ep=p["episodes"],
                                       ret=ret), flush=True)


def main(argv):
  del argv
  cfg = config_flags.from_flags(default_dataset.CollectConfig)
  if cfg.steps <= 0:
    raise app.UsageError("--steps must be positive")
  given = [name for name in default_dataset.ATARI_ONLY + default_dataset.GYMNASIUM_ONLY
           if flags.FLAGS[name].present]
  try:
    config_flags.check(cfg, prefix="--")
    cfg.check_game_flags(given)
  except ValueError as e:
    raise app.UsageError(str(e))
  if cfg.gymnasium:
    try:
      gym_dataset.run(cfg, log=lambda line: print(line, flush=True))
    except ValueError as e:
      raise app.UsageError(str(e))
    except OSError as e:
      sys.exit(f"collect_dataset.py: error: could not write {e.filename or cfg.output}: "
               f"{e.strerror or e}")
    return
  try:
    training.check_output_dir(cfg.output_dir, "--output_dir")  # a file, read-only, too long
    env = atari.AtariEnvironment(cfg.game, seed=cfg.seed,
                                 sticky_action_prob=cfg.sticky_action_prob)
  except ValueError as e:
    raise app.UsageError(str(e))
  try:
    _collect(cfg, env)
  except FileExistsError as e:
    raise app.UsageError(str(e))
  except OSError as e:  # a write refused on the way (read-only, disk full): one line
    sys.exit(f"collect_dataset.py: error: could not write {e.filename or cfg.output_dir}: "
             f"{e.strerror or e}")


def _collect(cfg, env):
  """The collection of `cfg` (CollectConfig) in `env`: policy, writer, steps, metadata."""
  if cfg.num_envs > 1 and cfg.policy != "random":
    raise app.UsageError(f"--num_envs={cfg.num_envs} runs a random policy on the vector "
                         f"environment; --policy={cfg.policy} needs --num_envs=1")
  if cfg.policy == "random":
    policy = replay_writer.random_policy(env.num_actions, seed=cfg.seed)
  else:
    try:
      policy = rollouts.saved_model_policy(cfg.policy, env)
    except ValueError as e:
      raise app.UsageError(str(e))
  writer = replay_writer.DopamineReplayWriter(
      cfg.output_dir, replay_capacity=cfg.replay_capacity,
      metadata=dict(game=env.game, num_actions=env.num_actions, action_set=env.action_set,
                    policy=cfg.policy, steps=cfg.steps, seed=cfg.seed,
                    sticky_action_prob=cfg.sticky_action_prob,
                    **({"collection_env": "vector", "num_envs": cfg.num_envs}
                       if cfg.num_envs > 1 else {})))
  print("collecting {} steps of {} ({} actions) with policy {} on {} into {}".format(
      cfg.steps, env.game, env.num_actions, cfg.policy,
      f"{cfg.num_envs} copies of the vector environment" if cfg.num_envs > 1 else
      "one environment", cfg.output_dir), flush=True)
  if cfg.num_envs > 1:
    vec = atari_vector.AtariVectorEnvironment(cfg.game, cfg.num_envs,
                                              sticky_action_prob=cfg.sticky_action_prob)
    try:
      summary = vector_collection.collect_random(vec, cfg.steps, writer, cfg.seed,
                                                 progress=_print_progress,
                                                 progress_every=cfg.progress_every)
    finally:
      vec.close()
  else:
    summary = replay_writer.collect(env, policy, cfg.steps, writer, progress=_print_progress,
                                    progress_every=cfg.progress_every)
  suffixes = writer.close()
  print("wrote checkpoints {} ({} complete episodes) to {}".format(
      suffixes, summary["episodes"], cfg.output_dir), flush=True)

if __name__ == "__main__":
  config_flags.run(main)
