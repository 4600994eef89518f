"""Offline training on Atari (DQN Replay / Dopamine format): one learner's run.

`run(config.resolve(cfg))`: `setup` (the dataset; the learner of the plan, which config.resolve
validated once)
-> `train` (ALE evaluations on the way) -> `export` (the policies) -> `confidence_diagnostics`
(CCVL) -> summary.json. `diagnose(root_dir)` computes the diagnostics of a run directory
again. Its settings: config.py; its data: dataset.py; its random streams: seeds.py.
More in docs/library.md "Module notes".
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Callable, Dict, Optional, Sequence, Tuple

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.algorithm import belief, policies
from ccvl_tf.evaluation import atari_vector, diagnostics, rollouts
from ccvl_tf.runtime import run_lock, strict_json
from ccvl_tf.runtime import training
from ccvl_tf.data import frame_store, replay_files
from ccvl_tf.envs import atari, scores
from ccvl_tf.experiments import agent_registry, tf_setup
from ccvl_tf.experiments.offline import confidence_report
from ccvl_tf.experiments.offline import config, dataset, phase_times, run_fingerprint
from ccvl_tf.experiments.offline.config import OfflineConfig
from ccvl_tf.experiments.offline.phase_times import PhaseTimes
from ccvl_tf.experiments.offline.seeds import Seeds


@dataclasses.dataclass
class Trained:
  """What run() leaves for the steps after it (binaries/train_offline.py: the reference agents
  and the results table, experiments/compare/offline_table.py)."""
  setup: Setup
  summary: Dict[str, object]          # as written to summary.json
  exports: Dict[str, object]          # export name -> the policy exported there
  adaptive_episode_scores: Optional[Sequence[float]]  # the diagnostics' (CCVL), else None
  checkpoint: str                     # the last good checkpoint
  timer: Optional[PhaseTimes] = None  # the phase times so far (printed at the end)


def run(plan: config.RunPlan, log: Callable[[str], None] = print) -> Trained:
  """The offline run of `plan` (config.resolve: the config validated and resolved once):
  data -> learner -> training -> exported policies -> diagnostics, and summary.json; one
  process per --root_dir (run_lock: another process's run there is refused, naming it). Takes
  --root_dir's lock for the run; a caller that also needs it after the run (the
  train_offline binary: the results table) holds it itself and calls `run_holding_lock`."""
  with run_lock.hold(plan.config.root_dir, "--root_dir"):
    return _run(plan, log)


def run_holding_lock(plan: config.RunPlan, log: Callable[[str], None] = print) -> Trained:
  """`run` for a caller that holds --root_dir's lock (run_lock.hold) across the run and what
  follows it (binaries/train_offline.py: compare.offline_table.run); RuntimeError if it does
  not (run_lock.require_held)."""
  run_lock.require_held(plan.config.root_dir, "offline.runner.run_holding_lock")
  return _run(plan, log)


def _run(plan: config.RunPlan, log: Callable[[str], None]) -> Trained:
  timer = PhaseTimes()
  run_setup = setup(plan, log, timer=timer)
  result = train(run_setup, log, timer)
  exports, extra, dirs = export(run_setup, result["checkpoint"], log, timer)
  adaptive_scores = None
  if run_setup.spec.train_key == "ccvl":
    with timer.phase("diagnostics"), training.writing(
        os.path.join(run_setup.root_dir, "diagnostics"), result["checkpoint"]):
      diag = confidence_diagnostics(run_setup, exports, log, timer,
                                    checkpoint=result["checkpoint"])
    adaptive_scores = diag.pop("adaptive_episode_scores")
    extra = dict(extra, diagnostics=diag)
  plan = run_setup.plan
  summary = dict(game=run_setup.game, agent=plan.agent, dataset_dir=run_setup.replay_dir,
                 subset=plan.data.subset, num_transitions=int(run_setup.batches.num_transitions),
                 step=result["step"], resumed_from=result["resumed_from"],
                 last_metrics=result["last_metrics"], last_eval=result["last_eval"],
                 machines=result["machines"],
                 checkpoint=result["checkpoint"], policy_dir=dirs["policy"],
                 fixed_policy_dir=dirs.get("policy_fixed"), exported_policies=dirs,
                 config=plan.record, settings=plan.learner.overrides,
                 learner_settings=plan.learner.resolved(), **extra, phase_times=timer.as_dict())
  write_summary(run_setup.root_dir, summary, result["checkpoint"])
  return Trained(setup=run_setup, summary=summary, exports=exports,
                 adaptive_episode_scores=adaptive_scores, checkpoint=result["checkpoint"],
                 timer=timer)


@dataclasses.dataclass
class Setup:
  """What the stages of an offline run share: its configuration resolved once (`plan`: the
  data's and the loop's settings, each learner's own config and fingerprint, the record), the
  data, the (fresh) learner of --agent and how a policy is scored."""
  plan: config.RunPlan
  game: str                   # the ALE name
  action_set: Tuple[int, ...]  # its ALE action ids (recorded with the exported policies)
  replay_dir: str
  store: Optional[frame_store.FrameStore]  # None with a checkpoint pool (batches.pool)
  batches: dataset.Batches
  evaluation: AtariEvaluation
  seeds: Seeds
  agent: object               # the learner (ccvl_tf/agents/learner.py)
  time_step_spec: object
  action_spec: object
  allow_config_change: bool   # --allow_config_change: resume checkpoints of another config
  # --distribute's strategy (None: one device); the learners are built under its scope.
  strategy: Optional[tf.distribute.Strategy] = None

  def build(self, learner: config.AgentPlan):
    """The learner of `learner` (--agent's or a reference agent's), its initial weights from
    the run's seed, built under --mixed_precision's policy and --distribute's strategy, with
    --jit_compile set (experiments/compute.py)."""
    compute = self.plan.config.compute
    with compute.building(self.strategy):
      agent = learner.build(self.time_step_spec, self.action_spec, self.seeds.weights())
    return compute.prepare(agent)

  def trainer(self, agent):
    """What the training loop steps for `agent`: itself, or under --distribute its step over
    the strategy's replicas (experiments/distributed.py)."""
    return self.plan.config.compute.trainer(agent, self.strategy)

  @property
  def root_dir(self) -> str:
    return self.plan.loop.root_dir

  @property
  def spec(self) -> agent_registry.AgentSpec:
    return self.plan.learner.spec

  @property
  def settings(self) -> agent_registry.AgentSettings:
    return self.plan.learner.settings


def setup(plan: config.RunPlan, log: Callable[[str], None], collect: bool = True,
          timer: Optional[PhaseTimes] = None) -> Setup:
  """What the stages share, from the run's plan (config.resolve: validated, each learner's own
  config, the stages' settings): TensorFlow's threads, the dataset (collected first when there
  is none and `collect`) and the learner of --agent; shared by run() and diagnose()."""
  cfg = plan.config
  gpus = tf_setup.visible_gpus()
  threads = tf_setup.configure_tensorflow(cfg.tf_threads, cfg.deterministic, log, gpus=gpus)
  log(tf_setup.device_line(gpus, threads["tf_threads"], cfg.deterministic))
  if cfg.mixed_precision == "float16":
    problem = tf_setup.float16_cpu_problem(gpus)
    if problem:
      raise ValueError(f"--mixed_precision=float16: {problem}")
  strategy = cfg.compute.strategy()
  if not cfg.compute.is_default:
    log(cfg.compute.describe(strategy))
  if strategy is not None and cfg.batch_size % strategy.num_replicas_in_sync:
    raise ValueError(f"--batch_size={cfg.batch_size} is not divisible by the "
                     f"{strategy.num_replicas_in_sync} replicas of --distribute={cfg.distribute}")
  os.makedirs(cfg.root_dir, exist_ok=True)
  log(plan.preset_line)
  env_factory = lambda seed: atari.AtariEnvironment(cfg.game, seed=seed)
  seeds = plan.data.seeds
  probe = env_factory(seeds.probe_env())
  data = dataset.open_dataset(plan.data, env_factory, probe.observation_spec().shape,
                              probe.num_actions, log, collect=collect, timer=timer,
                              game=probe.game, action_set=probe.action_set)
  plan = plan.with_dataset(data.identity, data.batches.num_transitions,
                           state_batches=data.batches.state_batches)
  time_step_spec = ts.time_step_spec(tensor_spec.from_spec(probe.observation_spec()))
  action_spec = tensor_spec.from_spec(probe.action_spec())
  run_setup = Setup(plan=plan, game=probe.game, action_set=tuple(probe.action_set),
                    replay_dir=data.replay_dir, store=data.store,
                    batches=data.batches, evaluation=AtariEvaluation.of(cfg), seeds=seeds,
                    agent=None, time_step_spec=time_step_spec, action_spec=action_spec,
                    allow_config_change=cfg.allow_config_change, strategy=strategy)
  run_setup.agent = run_setup.build(plan.learner)
  return run_setup


@dataclasses.dataclass(frozen=True)
class AtariEvaluation:
  """How the run scores a policy in the ALE: `episodes` episodes of `game` (--eval_episodes),
  epsilon `epsilon`, at most `max_steps` agent steps each (--eval_max_steps), on the vector
  environment or one environment after another (`env`, --eval_env)."""
  game: str
  episodes: int
  max_steps: int
  epsilon: float
  env: str
  belief_episodes: int        # --belief_episodes: episodes per belief of an adaptive policy

  @classmethod
  def of(cls, cfg: OfflineConfig) -> "AtariEvaluation":
    return cls(game=cfg.game, episodes=cfg.eval_episodes, max_steps=cfg.eval_max_steps,
               epsilon=cfg.eval_epsilon, env=cfg.eval_env, belief_episodes=cfg.belief_episodes)

  def slots(self, carries_belief: bool) -> int:
    """Vector slots of an evaluation: one per episode, or for a policy whose state carries a
    belief, one per sequence of `belief_episodes` episodes (at least 1)."""
    if not carries_belief:
      return min(self.episodes, atari_vector.MAX_SLOTS)
    return max(1, min(-(-self.episodes // self.belief_episodes), atari_vector.MAX_SLOTS))

  def __call__(self, policy, env_seed: int, seed: int, carries_belief: bool = False):
    """EpisodeRecords of `policy`: on the vector environment seeded `env_seed` (`slots`), or
    in one environment seeded `env_seed` with the epsilon RNG seeded `seed`."""
    if atari_vector.use_vector_env(self.game, self.env):
      return atari_vector.evaluate_atari(policy, self.game, self.episodes, seed=env_seed,
                                         epsilon=self.epsilon, max_episode_steps=self.max_steps,
                                         max_slots=self.slots(carries_belief))
    env = atari.AtariEnvironment(self.game, seed=env_seed, max_episode_steps=self.max_steps)
    return rollouts.run_episodes(
        policy, env, self.episodes, epsilon=self.epsilon, seed=seed,
        raw_score_fn=lambda e: e.episode_raw_return,
        max_total_steps=self.episodes * (self.max_steps + 2))


def train(run_setup: Setup, log, timer: Optional[PhaseTimes] = None) -> Dict[str, object]:
  """training.train of --agent on --num_steps batches, evaluating in the ALE every
  --eval_interval."""
  seeds, learner = run_setup.seeds, run_setup.plan.learner
  # policy.action traced once (tf.function) instead of running eagerly: ~5x faster per step.
  compiled_policy = rollouts.CompiledPolicy(run_setup.agent.policy)

  def evaluate(step):
    with phase_times.phase(timer, f"evaluation during training, step {step}"):
      records = run_setup.evaluation(compiled_policy, seeds.eval_env(step),
                                     seeds.eval_episodes(step))
    raw_scores = np.array([r.raw_score for r in records])
    # An episode shorter than the agent-step cap ended with the game; one at the cap did not
    # (in Breakout: a policy that never serves again after losing a life).
    out = {"mean_raw_score": float(raw_scores.mean()), "mean_length": float(
        np.mean([r.length for r in records])), "ended_share": float(
            np.mean([r.length < run_setup.evaluation.max_steps for r in records]))}
    try:
      out["normalized_score"] = float(np.mean(scores.normalized_score(run_setup.game,
                                                                      raw_scores)))
    except ValueError:
      pass  # a game without published reference scores
    return out

  with phase_times.phase(timer, f"training {learner.name}"):
    return training.train(run_setup.trainer(run_setup.agent), run_setup.batches.training,
                          run_setup.plan.loop,
                          evaluate=evaluate, log=log, fingerprint=learner.fingerprint,
                          allow_config_change=run_setup.allow_config_change,
                          **run_fingerprint.FINGERPRINT_CHECK)


def export(run_setup: Setup, last_good: str, log, timer: Optional[PhaseTimes] = None):
  """(exports, extra, dirs): the agent's policies (agent registry; Fixed-CCVL's delta is the
  lowest TD error against the target network on the held-out batches) as SavedModels in root_dir/<export name>."""
  agent = run_setup.agent
  with phase_times.phase(timer, "export (policies, Fixed-CCVL's delta)"):
    exports, extra = run_setup.spec.policies(agent, run_setup.time_step_spec,
                                             run_setup.action_spec,
                                             run_setup.batches.held_out(),
                                             run_setup.settings)
  if "fixed_delta" in extra:
    log(f"Fixed-CCVL delta (lowest TD error against the target network on the grid, over "
        f"{dataset.HELD_OUT_BATCHES} batches drawn from the training data after training): "
        f"{extra['fixed_delta']:.3f}; belief temperature {extra['belief_temperature']:.4g} "
        f"({extra['belief_temperature_source']})")
  dirs = {}
  for export_name, policy in exports.items():
    dirs[export_name] = os.path.join(run_setup.root_dir, export_name)
    with phase_times.phase(timer, "export (policies, Fixed-CCVL's delta)"), training.writing(
        dirs[export_name], last_good):
      policies.export_policy(policy, dirs[export_name], train_step=agent.train_step_counter,
                             game=run_setup.game, action_set=run_setup.action_set)
  log("Exported SavedModels: " + ", ".join(f"{d} ({n})" for n, d in dirs.items()) + ".")
  return exports, extra, dirs


def confidence_diagnostics(run_setup: Setup, exports, log,
                           timer: Optional[PhaseTimes] = None,
                           checkpoint: Optional[str] = None) -> Dict[str, object]:
  """The confidence diagnostics at the end of a CCVL run: the delta family, the count estimate
  (dataset vs random-policy and pixel-shuffled frames) and the belief over an evaluation of the
  adaptive policy (--eval_episodes episodes); files in root_dir/diagnostics (diagnostics.json
  naming the train step and `checkpoint` it describes), headline numbers in summary.json and
  TensorBoard (diagnostics/*), and the adaptive policy's episode scores under
  'adaptive_episode_scores'."""
  seeds, agent, evaluation = run_setup.seeds, run_setup.agent, run_setup.evaluation
  adaptive = exports.get("policy_adaptive", exports["policy"])
  with phase_times.phase(timer,
                         "evaluation: CCVL (adaptive), for the diagnostics and the table"):
    records = evaluation(rollouts.CompiledPolicy(adaptive), seeds.adaptive_eval(),
                         seeds.adaptive_eval(), carries_belief=True)
  out = confidence_report.report(
      agent, run_setup.batches.diagnostics_held_out,
      belief.delta_grid(run_setup.settings.num_grid_deltas),
      os.path.join(run_setup.root_dir, "diagnostics"),
      env_factory=lambda: atari.AtariEnvironment(evaluation.game, seed=seeds.diagnostics_env(),
                                                 max_episode_steps=evaluation.max_steps),
      records=records, seed=seeds.diagnostics(), checkpoint=checkpoint,
      initial_log_belief=getattr(adaptive, "initial_log_belief", None), log=log)
  summary = dict(out["summary"], adaptive_mean_raw_score=float(
      np.mean([r.raw_score for r in records])))
  writer = tf.summary.create_file_writer(os.path.join(run_setup.root_dir, "summaries"))
  with writer.as_default():
    for k, v in summary.items():
      tf.summary.scalar(f"diagnostics/{k}", v, step=int(agent.train_step_counter.numpy()))
  writer.flush()
  summary["adaptive_episode_scores"] = [float(r.raw_score) for r in records]
  return summary


def write_summary(root_dir: str, summary: Dict[str, object], last_good: str) -> None:
  """root_dir/summary.json, replaced at once (a failed write names the last good checkpoint);
  strict JSON: a NaN is null with `<key>_note` beside it saying why (ccvl_tf.runtime.strict_json; a
  diagnostic undefined on a grid of one delta: diagnostics.undefined_notes)."""
  notes = diagnostics.undefined_notes(summary["config"]["num_grid_deltas"])
  path = os.path.join(root_dir, "summary.json")
  with training.writing(path, last_good, [path + ".tmp"]):
    with open(path + ".tmp", "w") as f:
      strict_json.dump(summary, f, indent=2, default=float, notes=notes)
    os.replace(path + ".tmp", path)


def diagnose(root_dir: str, episodes: Optional[int] = None,
             log: Callable[[str], None] = print) -> Dict[str, float]:
  """binaries/diagnose.py: the confidence diagnostics of a finished (or interrupted)
  train_offline CCVL run, from its summary.json and newest intact checkpoint (a damaged one
  is skipped and named, as a resumed training does: training.restore_newest_intact); writes
  root_dir/diagnostics and returns the headline numbers. Holds the run directory's lock
  (run_lock): not while another process runs there."""
  plan = saved_ccvl_plan(root_dir, episodes, "the confidence diagnostics")
  with run_lock.hold(root_dir, "--root_dir"):
    run_setup, restored = restore_finished(plan, log, "the diagnostics", "diagnostics.json")
    exports, _ = run_setup.spec.policies(run_setup.agent, run_setup.time_step_spec,
                                         run_setup.action_spec, run_setup.batches.held_out(),
                                         run_setup.settings)
    summary = confidence_diagnostics(run_setup, exports, log, checkpoint=restored)
  summary.pop("adaptive_episode_scores", None)
  return summary


def saved_ccvl_plan(root_dir: str, episodes: Optional[int], what: str) -> config.RunPlan:
  """saved_plan of a CCVL run directory; ValueError naming --agent for another learner's."""
  plan = saved_plan(root_dir, episodes)
  if plan.learner.spec.train_key != "ccvl":
    raise ValueError(f"{root_dir} is a run of --agent={plan.agent}; {what} need a CCVL run "
                     f"(--agent=ccvl or fixed_ccvl)")
  return plan


def restore_finished(plan: config.RunPlan, log: Callable[[str], None], what: str,
                     record: str) -> Tuple[Setup, str]:
  """(setup without collecting, the checkpoint restored): the run's learner restored from its
  newest intact checkpoint (a damaged one skipped and named); a note when that step is not the
  one summary.json records. `what` and `record` name the output in the note."""
  root_dir = plan.loop.root_dir
  run_setup = setup(plan, log, collect=False)
  agent = run_setup.agent
  ckpt_dir = os.path.join(root_dir, "checkpoints")
  _, restored, skipped = training.restore_newest_intact(agent, ckpt_dir, log=log)
  if restored is None:
    raise ValueError(f"no checkpoint under {ckpt_dir}")
  log(f"Restored {'the older checkpoint ' if skipped else ''}{restored}"
      + (f"; skipped: {', '.join(os.path.basename(p) for p in skipped)}." if skipped else "."))
  step = int(agent.train_step_counter.numpy())
  recorded = _summary_step(root_dir)
  if recorded is not None and recorded != step:
    log(f"Note: {what} describe step {step} ({restored}), not step {recorded} of "
        f"summary.json and the exported policies; {record} records which.")
  return run_setup, restored


def _summary_step(root_dir: str) -> Optional[int]:
  """The train step summary.json records (None when it records none)."""
  with open(os.path.join(root_dir, "summary.json")) as f:
    step = json.load(f).get("step")
  return int(step) if isinstance(step, int) else None


def saved_plan(root_dir: str, episodes: Optional[int]) -> config.RunPlan:
  """The plan (config.resolve) of the OfflineConfig a run directory's summary.json records,
  with root_dir set to `root_dir`, no reference agents and `episodes` evaluation episodes when
  given; ValueError naming the file when it is missing, not strict JSON, or holds no usable
  'config' record."""
  path = os.path.join(root_dir, "summary.json")
  if not os.path.exists(path):
    raise ValueError(f"--root_dir {root_dir} has no summary.json: not a finished "
                     f"train_offline.py run directory")
  # The disk first: a run directory diagnostics cannot be written into is not the record's
  # fault.
  training.check_output_dir(root_dir, "--root_dir")
  try:
    with open(path) as f:
      text = f.read()
  except (OSError, UnicodeDecodeError) as e:
    raise ValueError(f"{path} cannot be read: {e}") from None
  try:
    saved = json.loads(text)  # leniently: runs written before strict JSON may hold a NaN
  except ValueError as e:
    raise ValueError(f"{path} is not valid JSON ({e}); a train_offline.py run writes it whole "
                     f"at its end, so it was truncated or edited: rerun train_offline.py with "
                     f"this --root_dir to write it again") from None
  record = saved.get("config") if isinstance(saved, dict) else None
  if not isinstance(record, dict):
    raise ValueError(f"{path} has no 'config' record of the run (a JSON object under "
                     f"\"config\", as train_offline.py writes it); rerun train_offline.py with "
                     f"this --root_dir to write it again")
  recorded = record.get("dataset_dir")
  if (isinstance(recorded, str) and recorded and not os.path.isabs(recorded)
      and not replay_files.is_remote(recorded) and not os.path.isdir(recorded)):
    raise ValueError(f"{path} records the dataset as {recorded!r}, relative to the directory "
                     f"train_offline.py ran in (runs made before datasets were recorded "
                     f"absolute), and there is no such directory here: run diagnose.py from "
                     f"that directory")
  try:
    cfg = config.from_record(record)
    cfg.root_dir = root_dir
    cfg.reference_agents = ()  # the diagnostics are --agent's
    if episodes is not None:
      cfg.eval_episodes = int(episodes)
    plan = config.resolve(cfg)
  except (TypeError, ValueError) as e:
    raise ValueError(f"{path}: its 'config' record is not a valid run configuration: "
                     f"{e}") from None
  return plan
