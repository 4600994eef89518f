"""Parity and speed of the vector evaluation environment against the sequential one
(docs/results/benchmarks.md, "Evaluation on ale_py's vector environment").

  frames      ccvl_tf.envs.atari.AtariEnvironment and AtariVectorEnvironment on the same ALE
              seeds, driven by the same fixed action sequence: the newest preprocessed frame
              compared after reset and after k steps (mean / max absolute pixel difference,
              share of pixels that differ), and whether the game itself stayed identical
              (the rewards and episode ends of the two).
  scripted    the observation-reading Breakout player (ccvl_tf.envs.scripted.
              breakout_pixel_actions; the RAM player cannot run in the vector environment,
              which exposes no RAM) through both paths: epsilon 0 on the same per-episode ALE
              seeds (paired: identical scores?), and with evaluation epsilon --epsilon
              (two samples: means with bootstrap CIs, Mann-Whitney and KS p-values).
  throughput  agent steps per second of one policy (a SavedModel, or a random-init CCVL
              adaptive policy) over the same episodes and cap through both paths, measured
              back to back --repeats times.

  .venv/bin/python tools/vector_parity.py --what=frames,scripted,throughput \
      --policy_dir=runs/breakout_demo/policy --output=results/vector_parity.json
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ccvl_tf  # noqa: E402,F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np  # noqa: E402

from ccvl_tf.evaluation import atari_vector, rollouts  # noqa: E402
from ccvl_tf.envs import atari, scripted  # noqa: E402
from ccvl_tf.runtime import strict_json  # noqa: E402

_Step = collections.namedtuple("_Step", ["action", "state", "info"])


class PixelPlayer:
  """breakout_pixel_actions as a batched policy (any batch size, stateless)."""

  def get_initial_state(self, batch_size=1):
    del batch_size
    return ()

  def action(self, time_step, state):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    obs = np.asarray(time_step.observation)
    return _Step(tf.constant(scripted.breakout_pixel_actions(obs), tf.int32), state, ())


def frames(games, seeds, steps, log):
  """Frame differences and game identity on the same seeds and actions."""
  out = []
  for game, seed in [(g, s) for g in games for s in seeds]:
    seq = atari.AtariEnvironment(game, seed=int(seed), max_episode_steps=10**6)
    vec = atari_vector.AtariVectorEnvironment(game, 1, max_episode_steps=10**6, num_threads=1)
    actions = np.random.default_rng(1000 + int(seed)).integers(seq.num_actions,
                                                                 size=max(steps))
    a_obs = seq.reset().observation
    b_obs = vec.reset([seed])[0]
    rows = []
    same_game, t = True, 0
    checkpoints = sorted(set(steps) | {0})
    for t in range(max(steps) + 1):
      if t in checkpoints:
        d = np.abs(a_obs[..., -1].astype(np.int32) - b_obs[..., -1].astype(np.int32))
        rows.append(dict(step=t, mean_abs=float(d.mean()), max_abs=int(d.max()),
                         share_differing=float((d > 0).mean()),
                         stack_mean_abs=float(np.abs(a_obs.astype(np.int32)
                                                     - b_obs.astype(np.int32)).mean())))
      if t == max(steps):
        break
      ts = seq.step(np.int32(actions[t]))
      obs, raw, ended, _ = vec.step(actions[t:t + 1])
      a_obs, b_obs = ts.observation, obs[0]
      if seq.last_raw_reward != raw[0] or bool(ts.is_last()) != bool(ended[0]):
        same_game = False
      if ts.is_last() or ended[0]:
        break
    vec.close()
    out.append(dict(game=game, seed=int(seed), same_game=same_game, steps_run=t, frames=rows))
    log(f"[frames] {game} seed {seed}: {t} steps, same game {same_game}; " + ", ".join(
        f"step {r['step']}: mean {r['mean_abs']:.4f} max {r['max_abs']} "
        f"share {r['share_differing']:.4f}" for r in rows))
  return out


def _sequential_scores(policy, seeds, epsilon, cap, eps_seed):
  """One episode per seed in a fresh sequential environment (the vector slots' seeds)."""
  scores, steps = [], 0
  for k, s in enumerate(seeds):
    env = atari.AtariEnvironment("Breakout", seed=int(s), max_episode_steps=cap)
    rec = rollouts.run_episodes(policy, env, 1, epsilon=epsilon, seed=eps_seed + k,
                                  raw_score_fn=lambda e: e.episode_raw_return)[0]
    scores.append(rec.raw_score)
    steps += rec.length
  return scores, steps


def _vector_scores(policy, episodes, epsilon, cap, seed):
  env = atari_vector.AtariVectorEnvironment("Breakout", episodes, max_episode_steps=cap)
  try:
    recs = atari_vector.run_batched_episodes(policy, env, episodes, epsilon=epsilon, seed=seed)
  finally:
    env.close()
  return [r.raw_score for r in recs], sum(r.length for r in recs)


def _compare(a, b, reps=2000):
  from scipy import stats  # pylint: disable=g-import-not-at-top
  a, b = np.asarray(a, float), np.asarray(b, float)
  rng = np.random.default_rng(0)

  def ci(x):
    means = x[rng.integers(x.size, size=(reps, x.size))].mean(axis=1)
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]
  return dict(sequential=dict(mean=float(a.mean()), ci95=ci(a), scores=a.tolist()),
              vector=dict(mean=float(b.mean()), ci95=ci(b), scores=b.tolist()),
              mann_whitney_p=float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue),
              ks_p=float(stats.ks_2samp(a, b).pvalue))


def scripted_scores(episodes, epsilon, cap, seed, log):
  seeds = atari_vector.slot_seeds(seed, episodes)
  player = PixelPlayer()
  seq0, _ = _sequential_scores(player, seeds, 0.0, cap, seed)
  vec0, _ = _vector_scores(player, episodes, 0.0, cap, seed)
  paired = dict(sequential=seq0, vector=vec0,
                identical=int(sum(x == y for x, y in zip(seq0, vec0))), episodes=episodes)
  log(f"[scripted] epsilon 0, same seeds: {paired['identical']}/{episodes} identical scores; "
      f"sequential {seq0}; vector {vec0}")
  seq, _ = _sequential_scores(player, seeds, epsilon, cap, seed)
  vec, _ = _vector_scores(player, episodes, epsilon, cap, seed)
  two = _compare(seq, vec)
  log(f"[scripted] epsilon {epsilon}: sequential {two['sequential']['mean']:.2f} "
      f"{two['sequential']['ci95']}, vector {two['vector']['mean']:.2f} {two['vector']['ci95']}, "
      f"Mann-Whitney p {two['mann_whitney_p']:.3f}, KS p {two['ks_p']:.3f}")
  return dict(paired_epsilon0=paired, epsilon=epsilon, two_sample=two)


def _policy(policy_dir):
  if policy_dir:
    saved, _ = rollouts.load_saved_policy(policy_dir)
    return rollouts.CompiledPolicy(saved), policy_dir
  from ccvl_tf.experiments.offline import config  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top
  from ccvl_tf.algorithm import policies  # pylint: disable=g-import-not-at-top
  env = atari.AtariEnvironment("Breakout")
  tss = ts.time_step_spec(tensor_spec.from_spec(env.observation_spec()))
  cfg = config.OfflineConfig(root_dir="/tmp/unused")
  agent = config.resolve(cfg).with_dataset({}, 50_000).learner.build(
      tss, tensor_spec.from_spec(env.action_spec()), cfg.seed)
  del tf
  adaptive = policies.ConfidenceAdaptivePolicy(tss, tensor_spec.from_spec(env.action_spec()),
                                               agent.q_network, num_grid_deltas=8, reward_clip=1.0)
  return rollouts.CompiledPolicy(adaptive), "random-init CCVL adaptive policy"


def throughput(policy_dir, episodes, cap, repeats, seed, log):
  policy, name = _policy(policy_dir)
  seeds = atari_vector.slot_seeds(seed, episodes)
  # Trace both paths once before timing.
  _sequential_scores(policy, seeds[:1], 0.001, 5, seed)
  _vector_scores(policy, episodes, 0.001, 5, seed)
  rows = []
  for r in range(repeats):
    t = time.perf_counter()
    _, s_steps = _sequential_scores(policy, seeds, 0.001, cap, seed + r)
    s_time = time.perf_counter() - t
    t = time.perf_counter()
    _, v_steps = _vector_scores(policy, episodes, 0.001, cap, seed + r)
    v_time = time.perf_counter() - t
    rows.append(dict(sequential_steps=s_steps, sequential_s=s_time,
                     sequential_steps_per_s=s_steps / s_time, vector_steps=v_steps,
                     vector_s=v_time, vector_steps_per_s=v_steps / v_time,
                     speedup=(v_steps / v_time) / (s_steps / s_time)))
    log(f"[throughput] {name}, {episodes} episodes, cap {cap}: sequential {s_steps} steps in "
        f"{s_time:.1f}s ({s_steps / s_time:.0f}/s); vector {v_steps} steps in {v_time:.1f}s "
        f"({v_steps / v_time:.0f}/s); x{rows[-1]['speedup']:.2f}")
  return dict(policy=name, episodes=episodes, cap=cap, repeats=rows,
              load_average=list(os.getloadavg()))


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--what", default="frames,scripted,throughput")
  p.add_argument("--games", default="Breakout,Pong,SpaceInvaders", help="frames: games")
  p.add_argument("--seeds", type=int, default=3, help="frames: seeds 0..N-1")
  p.add_argument("--frame_steps", default="1,10,100,500")
  p.add_argument("--episodes", type=int, default=20, help="scripted: episodes per path")
  p.add_argument("--epsilon", type=float, default=0.25, help="scripted: evaluation epsilon")
  p.add_argument("--max_steps", type=int, default=2000, help="agent-step cap per episode")
  p.add_argument("--policy_dir", default="", help="throughput: SavedModel (default: random "
                 "init CCVL adaptive policy)")
  p.add_argument("--throughput_episodes", type=int, default=10)
  p.add_argument("--throughput_max_steps", type=int, default=300)
  p.add_argument("--repeats", type=int, default=2)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--output", default="")
  a = p.parse_args(argv)
  what = set(a.what.split(","))
  log = lambda line: print(line, flush=True)  # noqa: E731
  out = {}
  if "frames" in what:
    out["frames"] = frames(a.games.split(","), range(a.seeds),
                           [int(x) for x in a.frame_steps.split(",")], log)
  if "scripted" in what:
    out["scripted"] = scripted_scores(a.episodes, a.epsilon, a.max_steps, a.seed, log)
  if "throughput" in what:
    out["throughput"] = throughput(a.policy_dir, a.throughput_episodes,
                                   a.throughput_max_steps, a.repeats, a.seed, log)
  if a.output:
    os.makedirs(os.path.dirname(os.path.abspath(a.output)), exist_ok=True)
    with open(a.output, "w") as f:
      strict_json.dump(out, f, indent=1)


if __name__ == "__main__":
  main()
