"""Are a CCVL run's random-policy diagnostic frames covered by its dataset in pixel space?
(docs/results/exact_gram.md, exploratory.)

  python tools/random_frames_coverage.py RUN_DIR

The 256 random-policy frames of the run's count diagnostics (the same seeds) and 256 dataset
frames outside a 20,000-frame reference sample of the dataset: each one's Euclidean distance
(newest frame, raw pixels) to its nearest neighbour in the reference sample, and the ROC AUC
of that distance as a random-vs-dataset classifier (above 0.5: random frames lie farther).
"""
import sys

import numpy as np

from ccvl_tf.envs import atari
from ccvl_tf.evaluation import diagnostics
from ccvl_tf.experiments.offline import confidence_report, runner

REFERENCE, PROBES, CHUNK = 20_000, 256, 2_000


def _newest_frame(obs: np.ndarray) -> np.ndarray:
  """[B, 84, 84, 4] uint8 stacks -> [B, 7056] float32 (the newest frame's pixels)."""
  return obs[..., -1].reshape(len(obs), -1).astype(np.float32)


def main(root_dir: str) -> None:
  plan = runner.saved_ccvl_plan(root_dir, None, "the coverage check")
  run_setup = runner.setup(plan, lambda m: None, collect=False)
  seeds, store = run_setup.seeds, run_setup.store
  env = atari.AtariEnvironment(run_setup.evaluation.game, seed=seeds.diagnostics_env(),
                               max_episode_steps=run_setup.evaluation.max_steps)
  rand = confidence_report.random_policy_observations(env, PROBES, seeds.diagnostics())
  perm = np.random.default_rng(0).permutation(store.num_transitions)
  ref_idx, probe_idx = perm[:REFERENCE], perm[REFERENCE:REFERENCE + PROBES]
  ref = np.concatenate([_newest_frame(store.observations(ref_idx[i:i + CHUNK]))
                        for i in range(0, REFERENCE, CHUNK)])                # [R, 7056]
  ref_sq = (ref ** 2).sum(1)

  def nearest(obs):
    x = _newest_frame(obs)
    d2 = (x ** 2).sum(1)[:, None] + ref_sq[None] - 2.0 * x @ ref.T        # [P, R]
    return np.sqrt(np.maximum(d2.min(1), 0.0))

  d_rand, d_data = nearest(rand), nearest(store.observations(probe_idx))
  for name, d in (("random_policy", d_rand), ("held-out dataset", d_data)):
    print(f"{name}: NN distance to {REFERENCE} dataset frames: median {np.median(d):.1f}, "
          f"mean {d.mean():.1f}, share at distance 0: {(d == 0).mean():.3f}")
  print("AUC of the NN distance (random-policy vs dataset frames):",
        diagnostics.roc_auc(d_data, d_rand))


if __name__ == "__main__":
  main(sys.argv[1])
