"""A run on a `Transitions` dataset (one's own data), in order: the learner of the method ->
training (progress with ETA, TensorBoard, checkpoints, exact resume) -> the method's policies
(CCVL: the confidence-adaptive policy and Fixed-CCVL's delta, chosen on held-out batches) ->
SavedModels -> with an environment, the results table (each policy, a uniformly random one and
the data's own episodes) -> summary.json.

Files under root_dir: checkpoints/, summaries/ (TensorBoard), eval.csv (evaluations during
training), <export name>/ (SavedModels: policy, and for CCVL policy_fixed), results.md /
results.csv / results.json / results.png (with an environment), summary.json.
"""
from __future__ import annotations

import csv
import dataclasses
import os
import time
from typing import Callable, Dict, List, Optional

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import numpy as np
from tf_agents.policies import random_tf_policy
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.algorithm import policies
from ccvl_tf.data import transitions as transitions_lib
from ccvl_tf.envs import factory
from ccvl_tf.evaluation import rollouts
from ccvl_tf.experiments import agent_registry
from ccvl_tf.experiments import tf_setup
from ccvl_tf.experiments.fit import settings as fit_settings
from ccvl_tf.experiments.offline import demo_report
from ccvl_tf.runtime import run_lock
from ccvl_tf.runtime import strict_json
from ccvl_tf.runtime import training

# The names of the table's rows, by export name (the method's own policy is named by METHOD).
ROW_NAMES = {"policy_fixed": "Fixed-CCVL", "policy_adaptive": "CCVL (adaptive)"}
METHOD_NAMES = {"ccvl": "CCVL (adaptive)", "fixed_ccvl": "Fixed-CCVL", "cql": "CQL",
                "rem": "REM", "aevl": "AEVL", "aevl_td": "AEVL (TD members)", "dqn": "DQN",
                "bc": "BC"}
CSV_FIELDS = ("policy", "episodes", "mean", "ci_low", "ci_high")
# Seed offsets of the run's random streams beside the training batches (seed itself).
HELD_OUT_SEED, EVAL_ENV_SEED, TABLE_SEED = 777, 10_000, 1_000_000


@dataclasses.dataclass
class Run:
  """What the stages of one run share."""
  data: transitions_lib.Transitions
  method: str
  settings: fit_settings.FitSettings
  spec: agent_registry.AgentSpec
  agent_settings: agent_registry.AgentSettings
  env: Optional[str]
  time_step_spec: object
  action_spec: object
  learner: object = None


def specs(data: transitions_lib.Transitions):
  """(time_step_spec, action_spec) of the data's observations and actions."""
  observation = tensor_spec.TensorSpec(data.observation_shape, data.observation_dtype,
                                       name="observation")
  action = tensor_spec.BoundedTensorSpec((), np.int32, 0, data.num_actions - 1, name="action")
  return ts.time_step_spec(observation), action


def env_spec(env: str):
  """(observation shape, observation dtype name, action count, canonical name) of the
  environment `env` (made once at seed 0 and closed), checked to be a valid game name first."""
  factory.check_game(env)
  game_env = factory.make_env(env, seed=0)
  try:
    obs = game_env.env.observation_spec()
    return (tuple(int(d) for d in obs.shape), np.dtype(obs.dtype).name,
            int(game_env.env.action_spec().maximum) + 1, game_env.game)
  finally:
    close = getattr(game_env.env, "close", None)
    if close is not None:
      close()


def spec_problems(env, data) -> List[str]:
  """What differs between an environment's (shape, dtype name, action count, ...) `env`
  (`env_spec`) and the data's (shape, dtype, action count) `data`, each as 'observations [6]
  vs the data's [4]'; [] when they agree."""
  (shape, dtype, actions), (data_shape, data_dtype, data_actions) = env[:3], data
  problems = []
  if tuple(shape) != tuple(data_shape):
    problems.append(f"observations {list(shape)} vs the data's {list(data_shape)}")
  if np.dtype(dtype) != np.dtype(data_dtype):
    problems.append(f"observation dtype {np.dtype(dtype).name} vs the data's "
                    f"{np.dtype(data_dtype).name}")
  if int(actions) != int(data_actions):
    problems.append(f"{actions} actions vs the data's {data_actions}")
  return problems


def check_env(env: str, data: transitions_lib.Transitions) -> str:
  """The canonical name of `env` after checking that its observations and actions are the
  data's (one line naming both otherwise)."""
  spec = env_spec(env)
  problems = spec_problems(spec, (data.observation_shape, data.observation_dtype,
                                  data.num_actions))
  if problems:
    raise ValueError(f"env={env!r} does not match the data ({data.source}): "
                     + "; ".join(problems))
  return spec[3]


def plan(data, method: str, env: Optional[str], settings: fit_settings.FitSettings,
         learner_values: Dict[str, object], network_config=None) -> Run:
  """The run resolved once: settings validated, the learner's config, the network."""
  if not isinstance(data, transitions_lib.Transitions):
    raise TypeError(f"data must be a ccvl_tf.Transitions, got {type(data).__name__}")
  settings.validate()
  spec = agent_registry.get_agent_spec(method, flag="method")
  if (settings.belief_prior != "uniform"
      and method not in agent_registry.BELIEF_PRIOR_AGENTS):
    raise ValueError(f"belief_prior={settings.belief_prior} is a setting of the adaptive "
                     f"policy of {', '.join(agent_registry.BELIEF_PRIOR_AGENTS)}; method="
                     f"{method} has none: leave it out")
  image = len(data.observation_shape) == 3
  values = fit_settings.agent_values_for(learner_values, method, image)
  if network_config is None:
    network_config = fit_settings.network_config(settings, data.observation_shape,
                                                 data.observation_dtype)
  agent_settings = spec.resolve(agent_registry.AgentSettings(
      network_config=network_config, dataset_size=float(data.num_transitions),
      agent_values=values, num_grid_deltas=settings.num_grid_deltas,
      belief_temperature=settings.belief_temperature, belief_prior=settings.belief_prior,
      seed=settings.seed))
  canonical = None if env is None else check_env(env, data)
  tss, action_spec = specs(data)
  return Run(data, method, settings, spec, agent_settings, canonical, tss, action_spec)


def data_spec(data: transitions_lib.Transitions) -> Dict[str, object]:
  """What the data's observations and actions are, as summary.json records them: an
  environment the run is fine-tuned in later must give the same (experiments/online/
  own_data.py)."""
  return {"observation_shape": [int(d) for d in data.observation_shape],
          "observation_dtype": np.dtype(data.observation_dtype).name,
          "num_actions": int(data.num_actions)}


def configure_tensorflow(settings: fit_settings.FitSettings,
                         log: Callable[[str], None]) -> Dict[str, object]:
  """TensorFlow's intra- / inter-op threads and op determinism of the run, set as
  train_offline.py's Atari route sets them (tf_setup.configure_tensorflow: the threads where no
  GPU is visible; a process whose TensorFlow already runs keeps its count and says so), and
  the device line; returns what is in force (summary.json 'tensorflow')."""
  gpus = tf_setup.visible_gpus()
  in_force = tf_setup.configure_tensorflow(settings.tf_threads, settings.deterministic, log,
                                           gpus=gpus)
  log(tf_setup.device_line(gpus, in_force["tf_threads"], settings.deterministic))
  return in_force


def fingerprint(run: Run) -> Dict[str, object]:
  """What the trained weights depend on: a resume with anything else is refused."""
  s = run.settings
  return {"train_key": run.spec.train_key, "config": run.agent_settings.agent_config.record(),
          "network": dataclasses.asdict(run.agent_settings.network_config),
          "data": run.data.fingerprint(), "num_transitions": int(run.data.num_transitions),
          "batch_size": int(s.batch_size), "seed": int(s.seed)}


def table_seed(seed: int, row: int) -> int:
  """The evaluation seed of the results table's row `row` (0: the method's own policy) in a
  run of training seed `seed`."""
  return int(seed) + TABLE_SEED + int(row)


def episodes_in(env: str, policy, episodes: int, seed: int, *,
                max_steps: Optional[int] = None, epsilon: float = 0.0):
  """EpisodeRecords of `policy` (run_episodes' interface) over `episodes` episodes of `env`
  (one environment seeded EVAL_ENV_SEED + seed; a belief is carried over all of them)."""
  game_env = factory.make_env(env, seed=EVAL_ENV_SEED + seed, max_episode_steps=max_steps)
  return rollouts.run_episodes(policy, game_env.env, episodes, epsilon=epsilon, seed=seed,
                               raw_score_fn=game_env.raw_score_fn)


def _evaluate(policy, run: Run, episodes: int, seed: int):
  """`episodes_in` the run's environment with its evaluation settings, `policy` compiled."""
  s = run.settings
  return episodes_in(run.env, rollouts.CompiledPolicy(policy), episodes, seed,
                     max_steps=s.eval_max_steps, epsilon=s.eval_epsilon)


def train(run: Run, log: Callable[[str], None]) -> Dict[str, object]:
  """training.train of the run's learner (built from the seed) on the data's batches."""
  s = run.settings
  keras.utils.set_random_seed(s.seed)  # the initial weights: a function of the seed
  run.learner = run.spec.build(run.time_step_spec, run.action_spec, run.agent_settings)
  evaluate = None
  if run.env is not None and s.eval_episodes > 0:
    def evaluate(step):
      records = _evaluate(run.learner.policy, run, s.eval_episodes, s.seed + step)
      return {"mean_raw_score": float(np.mean([r.raw_score for r in records])),
              "mean_length": float(np.mean([r.length for r in records]))}
  loop = training.LoopConfig(
      root_dir=s.root_dir, num_steps=s.num_steps, checkpoint_interval=s.checkpoint_interval,
      log_interval=s.log_interval, summary_interval=max(1, min(100, s.log_interval)),
      eval_interval=s.eval_interval)
  return training.train(
      run.learner, lambda start: run.data.batches(s.batch_size, s.seed, start), loop,
      evaluate=evaluate, log=log, fingerprint=fingerprint(run),
      remedy="Use another root_dir for another dataset, method or settings.")


def export(run: Run, log) -> tuple:
  """(policies, extra, dirs): the method's policies (CCVL: adaptive and Fixed-CCVL, whose delta
  has the lowest TD error against the target network on held-out batches) as SavedModels."""
  s = run.settings
  stream = run.data.batches(s.batch_size, s.seed + HELD_OUT_SEED)
  held_out = [next(stream) for _ in range(s.held_out_batches)]
  exports, extra = run.spec.policies(run.learner, run.time_step_spec, run.action_spec,
                                     held_out, run.agent_settings)
  if "fixed_delta" in extra:
    log(f"Fixed-CCVL delta (lowest TD error against the target network over "
        f"{s.held_out_batches} held-out batches): {extra['fixed_delta']:.3f}; belief "
        f"temperature {extra['belief_temperature']:.4g} ({extra['belief_temperature_source']})")
  dirs = {}
  for name, policy in exports.items():
    dirs[name] = os.path.join(s.root_dir, name)
    policies.export_policy(policy, dirs[name], train_step=run.learner.train_step_counter,
                           **({} if run.env is None else {"game": run.env}))
  log("Exported SavedModels: " + ", ".join(f"{d} ({n})" for n, d in dirs.items()) + ".")
  return exports, extra, dirs


def data_episode_returns(data: transitions_lib.Transitions) -> np.ndarray:
  """The undiscounted return of each of the data's episodes, summed over its transitions."""
  return np.bincount(data.episode, weights=data.reward.astype(np.float64))


def results_table(run: Run, exports, log) -> List[Dict[str, object]]:
  """One row per policy (the method's, then a uniformly random policy, then the data's own
  episodes): mean return over eval_episodes episodes with its 95% bootstrap CI; the adaptive
  policy's row also lists the squared Bellman errors its belief summed in each episode
  (`rollouts.sq_error_fields`: results.json, not results.csv)."""
  s = run.settings
  rows = []
  named = [(METHOD_NAMES.get(run.method, run.method) if n == "policy" else ROW_NAMES.get(n, n),
            p) for n, p in exports.items()]
  named.append(("random", random_tf_policy.RandomTFPolicy(run.time_step_spec, run.action_spec)))
  for i, (name, policy) in enumerate(named):
    t0 = time.time()
    records = _evaluate(policy, run, s.eval_episodes, table_seed(s.seed, i))
    # The adaptive policy's row: also its belief's per-episode summed squared Bellman errors.
    rows.append(dict(demo_report.score_row(name, [r.raw_score for r in records]),
                     **rollouts.sq_error_fields(records)))
    log(f"  {name}: {rows[-1]['mean']:.2f} over {s.eval_episodes} episodes "
        f"({time.time() - t0:.1f} s)")
  returns = data_episode_returns(run.data)
  if returns.size:
    rows.append(dict(demo_report.score_row("data (its episodes)", returns), episodes=int(
        returns.size)))
  return rows


def write_results(root_dir: str, rows, env: str, note: str) -> Dict[str, str]:
  """results.md / .csv / .json / .png under root_dir; their paths."""
  paths = {k: os.path.join(root_dir, f"results.{k}") for k in ("md", "csv", "json", "png")}
  with open(paths["md"], "w") as f:
    f.write(demo_report.render(rows, env, note))
  with open(paths["csv"], "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
  with open(paths["json"], "w") as f:
    strict_json.dump(list(rows), f, indent=1)
  demo_report.plot_rows(paths["png"], rows, env)
  return {f"results_{k}": v for k, v in paths.items()}


def run(data, method: str, env: Optional[str], settings: fit_settings.FitSettings,
        learner_values: Dict[str, object], network_config=None,
        log: Callable[[str], None] = print):
  """The run (module docstring); returns (learner, policies, paths, table, summary)."""
  r = plan(data, method, env, settings, learner_values, network_config)
  s = r.settings
  tensorflow = configure_tensorflow(s, log)
  with run_lock.hold(s.root_dir, "root_dir"):
    log(f"{method} on {r.data.num_transitions:,} transitions of {r.data.source} "
        f"({r.data.num_actions} actions, observations {list(r.data.observation_shape)} "
        f"{np.dtype(r.data.observation_dtype).name}); torso "
        f"{r.agent_settings.network_config.torso}; {s.num_steps:,} steps of batch "
        f"{s.batch_size}")
    result = train(r, log)
    exports, extra, dirs = export(r, log)
    table: List[Dict[str, object]] = []
    paths = dict(root_dir=s.root_dir, checkpoints=os.path.join(s.root_dir, "checkpoints"),
                 summaries=os.path.join(s.root_dir, "summaries"),
                 summary=os.path.join(s.root_dir, "summary.json"), **dirs)
    if r.env is not None and s.eval_episodes > 0:
      log(f"Results table: {s.eval_episodes} episodes of {r.env} per policy")
      table = results_table(r, exports, log)
      paths.update(write_results(s.root_dir, table, r.env, ""))
    # Fine-tuning starts from this record (experiments/online/own_data.py): the data's spec,
    # the network, the learner's config, the reward handling (rewards as the data gives them:
    # no clip) and, for CCVL, the belief temperature.
    summary = dict(route=fit_settings.ROUTE, method=method, env=r.env, data=r.data.source,
                   num_transitions=int(r.data.num_transitions), data_spec=data_spec(r.data),
                   step=int(result["step"]),
                   settings=dataclasses.asdict(s), config=r.agent_settings.agent_config.record(),
                   network=dataclasses.asdict(r.agent_settings.network_config),
                   reward_clip=r.agent_settings.reward_clip, tensorflow=tensorflow,
                   last_eval=result.get("last_eval"), machines=result["machines"],
                   **{k: v for k, v in extra.items()},
                   results=[{k: v for k, v in row.items() if k != "scores"} for row in table],
                   exported_policies=dirs)
    with open(paths["summary"] + ".tmp", "w") as f:
      strict_json.dump(summary, f, indent=2, default=float)
    os.replace(paths["summary"] + ".tmp", paths["summary"])
  return r.learner, exports, paths, table, summary
