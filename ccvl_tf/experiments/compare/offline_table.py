"""train_offline.py's results table: the reference agents (--reference_agents) trained beside
the run's agent on the same data, steps, seed and preset, and the table of every policy's
scores (root_dir/results.md), both added to the run's summary.json."""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict

from ccvl_tf.algorithm import policies
from ccvl_tf.runtime import machine
from ccvl_tf.runtime import run_lock, training
from ccvl_tf.experiments.compare import config as compare_config
from ccvl_tf.experiments.offline import demo_report, phase_times, placement, run_fingerprint
from ccvl_tf.experiments.offline import config as offline_config
from ccvl_tf.experiments.offline import runner as offline


def run(cfg: offline_config.OfflineConfig, trained: offline.Trained,
        log: Callable[[str], None] = print) -> Dict[str, object]:
  """Trains the reference agents, writes results.md (and its plots), says where the scores fall
  against the reported demo (placement.py) and adds 'references', 'results_table' and
  'placement' to summary.json (and the phase times of these steps to its 'phase_times',
  printed as a table at the end); returns the summary. Writes in --root_dir under the lock its
  caller holds across the run and this (run_lock.hold around offline.runner.run_holding_lock
  and this call, as binaries/train_offline.py does); RuntimeError if the caller does not hold
  it (run_lock.require_held)."""
  run_lock.require_held(cfg.root_dir, "compare.offline_table.run")
  return _run(cfg, trained, log)


def _run(cfg: offline_config.OfflineConfig, trained: offline.Trained,
         log: Callable[[str], None]) -> Dict[str, object]:
  run_setup, timer = trained.setup, trained.timer
  references = train_references(cfg, run_setup, log, timer)
  precomputed = ({} if trained.adaptive_episode_scores is None
                 else {"CCVL (adaptive)": trained.adaptive_episode_scores})
  with training.writing(os.path.join(cfg.root_dir, "results.md"), trained.checkpoint):
    results_table = demo_report.results_table(
        cfg, run_setup.game, run_setup.replay_dir, run_setup.spec, trained.exports,
        precomputed, log, references={n: r["policy"] for n, r in references.items()},
        timer=timer)
  # Where the scores fall against the reported demo: the trained networks differ between
  # machines, so a run is placed against the reported seeds' range, not matched to one run.
  last = (trained.summary.get("machines") or [None])[-1]  # None: trained before runs said
  placed = placement.place(dict(run_setup.plan.record,
                                learner_settings=run_setup.plan.learner.resolved()),
                           results_table, machine=None if last is None else machine.describe(last))
  for line in placed:
    log(line)
  added = dict(references={n: {k: v for k, v in r.items() if k != "policy"}
                           for n, r in references.items()},
               results_table=results_table, placement=placed)
  summary = {}
  for key, value in trained.summary.items():  # summary.json's key order: added after 'settings'
    summary[key] = value
    if key == "settings":
      summary.update(added)
  if timer is not None:
    summary["phase_times"] = timer.as_dict()
  offline.write_summary(cfg.root_dir, summary, trained.checkpoint)
  if timer is not None:
    log(timer.render())
  return summary


def train_references(cfg: offline_config.OfflineConfig, run_setup: offline.Setup,
                     log, timer=None) -> Dict[str, Dict]:
  """Trains each of --reference_agents (other than --agent's learner) on the same data, steps,
  seed and preset, in root_dir/reference/<agent> (resumable, fingerprinted; no evaluation
  during training), and exports its policy there. Returns {display name: {'policy',
  'root_dir', 'policy_dir', 'step', 'settings', 'learner_settings', 'last_metrics'}} in
  --reference_agents
  order."""
  display = {v: k for k, v in compare_config.METHODS.items()}
  make_dataset = run_setup.batches.training
  plan = run_setup.plan
  out = {}
  for name in cfg.reference_agents:
    if name not in plan.learners or name == plan.agent:
      continue  # --agent's learner (same train key): trained already
    learner = plan.learners[name]
    root = os.path.join(plan.loop.root_dir, "reference", name)
    agent = run_setup.build(learner)  # as --agent's: precision, XLA, replicas
    log(f"Reference agent {name}: training {plan.loop.num_steps} steps in {root}.")
    loop = dataclasses.replace(plan.loop, root_dir=root, eval_interval=0)
    with phase_times.phase(timer, f"training {name}"):
      result = training.train(
          run_setup.trainer(agent), make_dataset, loop, log=lambda line, n=name: log(f"[{n}] {line}"),
          fingerprint=learner.fingerprint, allow_config_change=run_setup.allow_config_change,
          **run_fingerprint.FINGERPRINT_CHECK)
    exports, _ = learner.spec.policies(agent, run_setup.time_step_spec, run_setup.action_spec,
                                       run_setup.batches.held_out(), learner.settings)
    policy_dir = os.path.join(root, "policy")
    with phase_times.phase(timer, f"export {name}"), training.writing(policy_dir,
                                                                      result["checkpoint"]):
      policies.export_policy(exports["policy"], policy_dir, train_step=agent.train_step_counter,
                             game=run_setup.game, action_set=run_setup.action_set)
    out[display.get(name, name)] = dict(
        policy=exports["policy"], root_dir=root, policy_dir=policy_dir, step=result["step"],
        settings=learner.overrides, learner_settings=learner.resolved(),
        last_metrics=result["last_metrics"])
  return out
