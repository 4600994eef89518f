"""Evaluating an exported policy: the body of binaries/evaluate.py.

`run(EvaluateConfig(...))` runs a SavedModel policy (ccvl_tf.algorithm.policies.export_policy) for
`seeds` runs x `episodes` episodes in the environment of `game` (ccvl_tf.envs.factory.make_env:
'gridworld', 'minatar/<Game>', 'gymnasium:<EnvId>' or an Atari game) and writes to output_dir:
  returns.csv   per episode: length, return, raw and normalized score
  delta.csv     per episode: mean/first/last delta acted under, the belief's argmax at its end
  summary.json  mean, IQM over runs with its 95% stratified bootstrap CI (rliable)
  results.csv   one row per run (method, dataset, game, seed, score), the format of
                ccvl_tf.evaluation.reporting.read_results_csv
  returns.png, delta.png
Each run r uses seed first_seed + r for the environment, the epsilon RNG and the policy's delta
sampler, and one policy state carried across all its episodes.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import List, Optional

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
from tqdm import tqdm

from ccvl_tf.runtime import config_flags, paths, run_settings
from ccvl_tf.evaluation import rollouts, score_stats
from ccvl_tf.evaluation import reporting
from ccvl_tf.data import minatar_datasets
from ccvl_tf.envs import factory
from ccvl_tf.runtime.config_flags import setting
from ccvl_tf.runtime import strict_json
from ccvl_tf.runtime import writes


@dataclasses.dataclass
class EvaluateConfig:
  """Settings of one evaluation; the `setting` fields are the flags of binaries/evaluate.py
  (ccvl_tf/runtime/config_flags.py).

  Attributes:
    policy_dir: the exported policy (SavedModel directory with policy_specs.pbtxt).
    game: 'gridworld', 'minatar/<Game>', 'gymnasium:<EnvId>' or an Atari game
      (ccvl_tf.envs.factory).
    output_dir: where the outputs go.
    episodes: evaluation episodes per run (paper: 100).
    seeds: number of runs, seeds first_seed, first_seed + 1, ...
    first_seed: the seed of the first run.
    epsilon: evaluation epsilon-greedy applied by the loop (paper: 0.001; 0 when the export
      already is epsilon-greedy).
    max_episode_steps: cap on agent steps per episode (None: the environment's own).
    bootstrap_reps: rliable bootstrap replications of the CIs.
    method, dataset: labels written to results.csv.
    data_dir: MinAtar only: the dataset root of make_minatar_datasets.py, whose
      minatar_scores.json gives the reference scores (random, DQN) of the normalized score;
      None: MinAtar scores are reported raw.
    progress: a tqdm bar on stderr.
  """
  policy_dir: str = setting("", "Exported policy (SavedModel) directory.", flag_default=None)
  game: str = setting(
      "", "'gridworld', a MinAtar game as 'minatar/<Game>' (e.g. minatar/Breakout), a "
      "Gymnasium environment with a Discrete action space as 'gymnasium:<EnvId>' (e.g. "
      "gymnasium:CartPole-v1; scored by its raw return, not normalized) or an Atari game name "
      "(e.g. Pong).", flag_default=None)
  output_dir: str = setting("", "Where to write the outputs.", flag_default=None, output="dir")
  episodes: int = setting(100, "Evaluation episodes per seed (paper: 100).", lower_bound=1)
  seeds: int = setting(1, "Number of evaluation runs (seeds first_seed, ...).", lower_bound=1)
  first_seed: int = run_settings.borrow("first_seed")
  epsilon: float = setting(
      0.001, "Evaluation epsilon-greedy (paper: 0.001); 0 if the export already is.",
      lower_bound=0.0, upper_bound=1.0)
  max_episode_steps: Optional[int] = setting(
      None, "Cap on agent steps per episode (default: the env's own).", lower_bound=1)
  bootstrap_reps: int = run_settings.borrow("bootstrap_reps")
  method: str = setting("policy", "Method label written to results.csv.")
  dataset: str = setting("", "Dataset label written to results.csv.")
  data_dir: Optional[str] = setting(
      None, "MinAtar only: the dataset root of make_minatar_datasets.py; its "
      "minatar_scores.json gives the random and DQN reference scores of the normalized score "
      "(unset: MinAtar scores are reported raw).")
  progress: bool = True

  def validate(self) -> None:
    if int(self.episodes) != self.episodes or self.episodes < 1:
      raise ValueError(f"--episodes must be an integer >= 1, got {self.episodes!r}")
    if int(self.seeds) != self.seeds or self.seeds < 1:
      raise ValueError(f"--seeds must be an integer >= 1, got {self.seeds!r}")
    if not 0.0 <= self.epsilon <= 1.0:
      raise ValueError(f"--epsilon must be in [0, 1], got {self.epsilon!r}")
    config_flags.check(self, prefix="--")
    if self.data_dir and not factory.is_minatar(self.game):
      raise ValueError(f"--data_dir gives MinAtar reference scores, but --game={self.game!r} is "
                       f"not a MinAtar game ('minatar/<Game>')")


def run(cfg: EvaluateConfig) -> dict:
  """Evaluates cfg.policy_dir and writes the outputs (module docstring); returns the summary.

  Raises:
    ValueError: bad settings, a directory that is not a SavedModel, a policy whose actions or
      observations do not fit the game, an unknown game (listing the valid ones).
    FileNotFoundError: cfg.data_dir without minatar_scores.json (saying how to make it).
  """
  cfg.validate()
  rollouts.check_saved_model_dir(cfg.policy_dir)  # before anything slow
  references = minatar_datasets.load_scores(cfg.data_dir) if cfg.data_dir else None
  probe = factory.make_env(cfg.game, cfg.first_seed, cfg.max_episode_steps,
                           references=references)
  action_spec = probe.env.action_spec()
  saved, meta = rollouts.load_saved_policy(
      cfg.policy_dir, num_actions=int(action_spec.maximum) - int(action_spec.minimum) + 1,
      observation_shape=probe.env.observation_spec().shape,
      observation_dtype=probe.env.observation_spec().dtype,
      game=probe.game, action_set=getattr(probe.env, "action_set", None))
  if meta.get("game_note"):
    print(f"Note: {meta['game_note']}.", file=sys.stderr, flush=True)
  os.makedirs(cfg.output_dir, exist_ok=True)
  records = _run_seeds(cfg, saved, probe, references)
  return _write_outputs(cfg, probe, records, meta)


def _run_seeds(cfg: EvaluateConfig, saved, probe: factory.GameEnv,
               references) -> List[rollouts.EpisodeRecord]:
  """cfg.seeds runs of cfg.episodes episodes (run 0 in `probe`, each other run in a new
  environment of its seed), with a progress bar when cfg.progress."""
  bar = None
  if cfg.progress:
    bar = tqdm(total=cfg.episodes * cfg.seeds, desc=f"evaluate {cfg.game}", unit="episode",
               file=sys.stderr, dynamic_ncols=True)
  records: List[rollouts.EpisodeRecord] = []
  try:
    for run in range(cfg.seeds):
      seed = cfg.first_seed + run
      ev = probe if run == 0 else factory.make_env(cfg.game, seed, cfg.max_episode_steps,
                                                   references=references)

      def on_episode(rec, run=run):
        if bar is not None:
          d = f"{np.mean(rec.deltas):.3f}" if rec.deltas else "-"
          bar.set_postfix_str(f"seed {run} ep {rec.episode} return {rec.raw_score:.4g} "
                              f"delta {d}")
          bar.update(1)

      def on_step(ep_steps, total, run=run):
        if bar is not None and ep_steps % 1000 == 0:  # long Atari episodes
          bar.set_postfix_str(f"seed {run} episode step {ep_steps}")

      records += rollouts.run_episodes(
          saved, ev.env, cfg.episodes, run=run, epsilon=cfg.epsilon, seed=seed,
          raw_score_fn=ev.raw_score_fn, on_episode=on_episode, on_step=on_step)
  finally:
    if bar is not None:
      bar.close()
  return records


def _write_outputs(cfg: EvaluateConfig, probe: factory.GameEnv,
                   records: List[rollouts.EpisodeRecord], meta: dict) -> dict:
  """returns.csv, delta.csv, results.csv, summary.json, returns.png, delta.png; the summary."""
  out = cfg.output_dir
  raw = np.array([r.raw_score for r in records])
  normalized = (probe.normalize(raw) if probe.normalize is not None
                else np.full(raw.shape, np.nan))
  reporting.write_returns_csv(os.path.join(out, "returns.csv"), records, normalized)
  reporting.write_delta_csv(os.path.join(out, "delta.csv"), records)
  reporting.write_results_csv(os.path.join(out, "results.csv"), [
      dict(method=cfg.method, dataset=cfg.dataset, game=probe.game, seed=cfg.first_seed + run,
           score=raw[[i for i, r in enumerate(records) if r.run == run]].mean())
      for run in range(cfg.seeds)])
  if probe.normalize is not None:
    summary = score_stats.summarize(records, probe.normalize, reps=cfg.bootstrap_reps,
                                   seed=cfg.first_seed)
  else:
    summary = {"num_runs": cfg.seeds, "num_episodes": len(records),
               "raw_return_mean": float(raw.mean()),
               "note": f"no reference scores for {probe.game!r}: normalized scores not computed"
                       + (" (MinAtar: pass --data_dir)" if factory.is_minatar(cfg.game) else "")}
  summary.update({
      "game": probe.game, "policy_dir": (cfg.policy_dir if paths.is_remote(cfg.policy_dir)
                                     else os.path.abspath(cfg.policy_dir)),
      "episodes_per_run": cfg.episodes, "seeds": [cfg.first_seed + r for r in range(cfg.seeds)],
      "epsilon": cfg.epsilon, "score": probe.score_name, "policy_specs": {
          k: list(v) if isinstance(v, tuple) else v for k, v in meta.items()},
      "raw_iqm_over_episodes": score_stats.iqm(raw),
  })
  deltas = [np.mean(r.deltas) if r.deltas else np.nan for r in records]
  if any(np.isfinite(deltas)):
    summary["delta_mean"] = float(np.nanmean(deltas))
  writes.write_atomic(os.path.join(out, "summary.json"),
                      lambda f: strict_json.dump(summary, f, indent=2, sort_keys=True))
  reporting.plot_runs(os.path.join(out, "returns.png"), records,
                      normalized if probe.normalize is not None else raw,
                      "normalized score" if probe.normalize is not None else probe.score_name,
                      f"{summary['game']}: per-episode score")
  reporting.plot_runs(os.path.join(out, "delta.png"), records, deltas,
                      "mean delta acted under", f"{summary['game']}: delta per episode")
  return summary
