"""The count estimate of a finished train_offline CCVL run, with its own precision and with the
exact Gram of the final network over every dataset state (docs/exact_gram.md, "after the runs").

  python tools/exact_gram_check.py --root_dir=RUN [--root_dir=RUN2 ...]

Prints, per run, ROC AUCs of n(s)^-1 on the diagnostics' states (the same 256 dataset states,
random-policy and pixel-shuffled frames as the run's diagnostics) for (a) the precision the run
trained with last and (b) a fresh exact Gram (counts.LinearInverseCounts gram_source='exact',
the run's ridge settings) over all the dataset's states through the final torso, and the mean
raw n(s)^-1 over a 2,000-state sample of the data under each.
"""
import json
import sys

import numpy as np
import tensorflow as tf
from absl import app, flags

from ccvl_tf.algorithm import counts as counts_lib
from ccvl_tf.envs import atari
from ccvl_tf.evaluation import diagnostics
from ccvl_tf.experiments.offline import confidence_report, runner

flags.DEFINE_multi_string("root_dir", [], "train_offline.py CCVL run directories.")
FLAGS = flags.FLAGS


def _check(root_dir: str) -> dict:
  plan = runner.saved_ccvl_plan(root_dir, None, "the check")
  run_setup, _ = runner.restore_finished(plan, lambda s: None, "the check", "-")
  agent, seeds = run_setup.agent, run_setup.seeds
  cfg = agent.config
  seen, _ = confidence_report.dataset_observations_and_actions(
      run_setup.batches.diagnostics_held_out(), 256)
  env = atari.AtariEnvironment(run_setup.evaluation.game, seed=seeds.diagnostics_env(),
                               max_episode_steps=run_setup.evaluation.max_steps)
  unseen = {"random_policy": confidence_report.random_policy_observations(
                env, 256, seeds.diagnostics()),
            "shuffled_pixels": diagnostics.unseen_observations(
                seen, np.random.default_rng(seeds.diagnostics()), kind="shuffled_pixels")}
  phi = lambda obs: tf.constant(confidence_report._phi(agent, obs))     # noqa: E731
  fresh = counts_lib.LinearInverseCounts(
      agent.online_network.phi_dim, run_setup.store.num_transitions, ridge=cfg.count_ridge,
      ridge_mode=cfg.count_ridge_mode, gram_source="exact")
  fresh.refresh_exact(agent._phi_fn(tf.convert_to_tensor(obs))
                      for obs in run_setup.batches.state_batches(0)())
  sample = next(iter(run_setup.batches.state_batches(2000)()))
  out = {}
  for name, est in (("trained", agent.counts), ("fresh_exact_all", fresh)):
    row = {"mean_raw_data": float(np.mean(est.raw_inverse_count(phi(sample)).numpy()))}
    inv_seen = est.raw_inverse_count(phi(seen)).numpy()
    for kind, obs in unseen.items():
      row[f"count_auc_{kind}"] = diagnostics.count_separation(
          inv_seen, est.raw_inverse_count(phi(obs)).numpy())["auc"]
    out[name] = row
  if agent.exact_gram:
    out["first_mean"] = float(agent.counts.first_mean.numpy())
  return out


def main(argv):
  del argv
  for root_dir in FLAGS.root_dir:
    print(root_dir, json.dumps(_check(root_dir), indent=1), flush=True)


if __name__ == "__main__":
  sys.exit(app.run(main))
