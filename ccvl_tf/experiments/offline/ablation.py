"""Ablation of the offline learners' settings on one Atari dataset.

More in docs/ablation.md "Module notes", `ccvl_tf/experiments/offline/ablation.py`.
"""
from __future__ import annotations

import concurrent.futures
import csv
import dataclasses
import json
import multiprocessing
import os
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import ccvl_tf  # noqa: F401

import numpy as np

from ccvl_tf.runtime import config_flags, run_settings
from ccvl_tf.runtime.config_flags import setting
from ccvl_tf.data import frame_store
from ccvl_tf.data import replay_files
from ccvl_tf.envs import gymnasium_name
from ccvl_tf.evaluation import rollouts
from ccvl_tf.runtime import strict_json

# TensorFlow and the modules that load it are imported in the functions that train or probe: a
# spawned worker imports this module (to find _worker_init) before _worker_init has quieted and
# configured TensorFlow, and binaries/ablate.py's --help stays without TensorFlow (~2.5 s).


@dataclasses.dataclass(frozen=True)
class Variant:
  """One ablation variant: an agent of the registry and the settings it changes.

  Attributes:
    agent: agent registry name ('cql', 'ccvl', 'bc', ...).
    settings: AgentSettings fields set (alpha, learning_rate, adam_epsilon, dr3_coef,
      target_update_period); the rest keep the agent's own defaults.
    ccvl_options: CCVL options as flags give them (count_weight, count_normalization, reading, ...).
    note: what the variant tests, for the table.
  """
  agent: str
  settings: Mapping[str, object] = dataclasses.field(default_factory=dict)
  ccvl_options: Mapping[str, object] = dataclasses.field(default_factory=dict)
  note: str = ""

  def describe(self) -> str:
    parts = [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
             for k, v in {**self.settings, **self.ccvl_options}.items()]
    return ", ".join(parts) if parts else "defaults"


# The ablation grid (docs/ablation.md): the agents' defaults, the factors one at a
# time, and the combinations the factors suggest. Names: <agent>_<changes>.
_A1 = {"alpha": 1.0}
_EPS = {"adam_epsilon": 1e-8}
_LR = {"learning_rate": 5e-4}
_NODR3 = {"dr3_coef": 0.0}
VARIANTS: Dict[str, Variant] = {
    "bc": Variant("bc", note="behaviour cloning, d3rlpy's defaults (lr 1e-3, Adam eps 1e-8)"),
    "bc_dopamine_eps": Variant("bc", {"adam_epsilon": 3.125e-4},
                               note="BC with Dopamine's Adam epsilon"),
    "cql": Variant("cql", note="CQL defaults (alpha 0.1, lr 5e-5, Adam eps 3.125e-4, DR3 0.03, "
                   "target period 2000)"),
    "cql_nodr3": Variant("cql", _NODR3, note="DR3 off"),
    "cql_alpha1": Variant("cql", _A1, note="the CQL authors' Atari alpha"),
    "cql_eps": Variant("cql", _EPS, note="Adam epsilon 1e-8 (PyTorch / d3rlpy default)"),
    "cql_alpha1_lr": Variant("cql", {**_A1, **_LR},
                             note="lr 5e-4 at alpha 1: learned at the demo's scale"),
    "cql_alpha1_nodr3": Variant("cql", {**_A1, **_NODR3}),
    "cql_alpha1_eps_nodr3": Variant("cql", {**_A1, **_EPS, **_NODR3}),
    "ccvl": Variant("ccvl", note="CCVL defaults (alpha 0.1, lr 5e-5, Adam eps 3.125e-4, DR3 "
                    "0.03, target period 2000, counts normalized to mean 1)"),
    "ccvl_nodr3": Variant("ccvl", _NODR3, note="DR3 off"),
    "ccvl_alpha1": Variant("ccvl", _A1),
    "ccvl_eps": Variant("ccvl", _EPS),
    "ccvl_alpha1_lr": Variant(
        "ccvl", {**_A1, **_LR}, note="lr 5e-4 at alpha 1: did not learn at the demo's scale"),
    "ccvl_alpha1_nodr3": Variant("ccvl", {**_A1, **_NODR3}),
    "ccvl_alpha1_eps_nodr3": Variant("ccvl", {**_A1, **_EPS, **_NODR3}),
    "ccvl_alpha1_eps_nodr3_nocount": Variant(
        "ccvl", {**_A1, **_EPS, **_NODR3}, {"count_weight": "off"},
        note="n(s)^-1 = 1: the weight alpha sqrt(log 1/delta_1)"),
    "ccvl_alpha1_eps_nodr3_rawcount": Variant(
        "ccvl", {**_A1, **_EPS, **_NODR3}, {"count_normalization": "none"},
        note="n(s)^-1 not divided by its running mean"),
    "ccvl_alpha1_eps_nodr3_target500": Variant(
        "ccvl", {**_A1, **_EPS, **_NODR3, "target_update_period": 500}),
    # Added after the first results (the phi collapse under DR3, CCVL unstable at lr 5e-4):
    # learning rates between Dopamine's 5e-5 and 5e-4, without DR3.
    "cql_alpha1_lr_nodr3": Variant("cql", {**_A1, **_LR, **_NODR3}),
    "ccvl_alpha1_lr_nodr3": Variant("ccvl", {**_A1, **_LR, **_NODR3}),
    "ccvl_alpha1_lr2.5e-4_nodr3": Variant("ccvl", {**_A1, "learning_rate": 2.5e-4, **_NODR3}),
    "ccvl_alpha1_lr1e-4_eps_nodr3": Variant(
        "ccvl", {**_A1, "learning_rate": 1e-4, **_EPS, **_NODR3}),
    "cql_alpha1_lr1e-4_eps_nodr3": Variant(
        "cql", {**_A1, "learning_rate": 1e-4, **_EPS, **_NODR3}),
    "ccvl_alpha0.3_lr2.5e-4_nodr3": Variant("ccvl", {"alpha": 0.3, "learning_rate": 2.5e-4,
                                                     **_NODR3}),
    # Around the first CCVL variant that formed state-dependent preferences (lr 1e-4, Adam
    # epsilon 1e-8, no DR3): the count weighting, alpha and the learning rate.
    "ccvl_alpha1_lr1e-4_eps_nodr3_nocount": Variant(
        "ccvl", {**_A1, "learning_rate": 1e-4, **_EPS, **_NODR3}, {"count_weight": "off"}),
    "ccvl_alpha0.3_lr1e-4_eps_nodr3": Variant(
        "ccvl", {"alpha": 0.3, "learning_rate": 1e-4, **_EPS, **_NODR3}),
    "ccvl_alpha1_lr2.5e-4_eps_nodr3": Variant(
        "ccvl", {**_A1, "learning_rate": 2.5e-4, **_EPS, **_NODR3}),
    "cql_alpha1_lr2.5e-4_eps_nodr3": Variant(
        "cql", {**_A1, "learning_rate": 2.5e-4, **_EPS, **_NODR3}),
}

ROW_COLUMNS = ("variant", "agent", "changes", "step", "score", "score_ci_low", "score_ci_high",
               "mean_length", "agreement", "greedy_mode_share", "cql_gap", "phi_dead_fraction",
               "phi_zero_states", "phi_sq_norm", "family_differs_any", "train_seconds")
PROBE_COLUMNS = ("variant", "step", "agreement", "greedy_mode_share", "cql_gap",
                 "phi_dead_fraction", "phi_zero_states", "phi_sq_norm", "family_differs_any")


def _parse_variants(text: str) -> List[str]:
  names = [t.strip() for t in str(text).split(",") if t.strip()]
  bad = [n for n in names if n not in VARIANTS]
  if bad:
    raise ValueError(f"--variants: unknown {bad}; valid: {', '.join(VARIANTS)}")
  if not names:
    raise ValueError(f"--variants is empty; valid: {', '.join(VARIANTS)}")
  return names


@dataclasses.dataclass
class AblationConfig:
  """Settings of binaries/ablate.py (its flags, ccvl_tf/runtime/config_flags.py)."""
  dataset_dir: str = setting("", "Dopamine replay_logs directory of the development data "
                             "(never the reported run's data).", flag_default=None,
                             required=True)
  heldout_dir: str = setting("", "Another collection of the same game, for the held-out "
                             "probe states.", flag_default=None, required=True)
  output_dir: str = setting("", "Output directory (resumable).", flag_default=None,
                            required=True, output="dir")
  game: str = setting("Breakout", "Atari game of the datasets.")
  variants: Sequence[str] = setting(tuple(VARIANTS), "Comma-separated variant names.",
                                    kind="csv", parse=_parse_variants)
  num_steps: int = run_settings.borrow("num_steps")  # per variant
  batch_size: int = run_settings.borrow("batch_size")
  probe_interval: int = setting(1_000, "Probe the held-out states every N steps.",
                                lower_bound=1)
  probe_states: int = setting(512, "Held-out states per probe.", lower_bound=1)
  # ALE evaluation episodes at the end (0: none).
  eval_episodes: int = run_settings.borrow("eval_episodes", lower_bound=0)
  eval_max_steps: int = run_settings.borrow("eval_max_steps")
  eval_epsilon: float = 0.001
  seed: int = run_settings.borrow("seed", 100)  # a development seed (>= 100)
  workers: int = run_settings.borrow("workers", 2)  # variants trained side by side
  threads_per_worker: int = run_settings.borrow("threads_per_worker")

  def validate(self) -> None:
    config_flags.check(self, prefix="--")
    gymnasium_name.refuse_gymnasium(self.game, "--game", "ablate.py trains on an Atari game's "
                                    "replay data (--dataset_dir, --heldout_dir)")
    _parse_variants(",".join(self.variants))
    for flag in ("dataset_dir", "heldout_dir"):
      # Local or remote (gs://...: tf.io.gfile).
      replay_files.check_input_dir(getattr(self, flag), f"--{flag}",
                                   "a Dopamine replay_logs directory")
    if _same_dir(self.dataset_dir, self.heldout_dir):
      raise ValueError("--heldout_dir must be another collection than --dataset_dir (held-out "
                       "states)")


def _same_dir(a: str, b: str) -> bool:
  """Whether two directory paths name one directory: local ones made absolute, remote ones
  (``gs://...``) compared as written, without a trailing "/"."""
  def norm(p: str) -> str:
    return p.rstrip("/") if replay_files.is_remote(p) else os.path.abspath(p)
  return norm(a) == norm(b)


# ------------------------------------------------------------------------------ one variant
def _load_store(replay_dir: str, num_actions: int):
  return frame_store.FrameStore.from_replay(replay_dir, "all", num_actions=num_actions)


def probe_batch(store, num_states: int, seed: int) -> Dict[str, np.ndarray]:
  """`num_states` held-out transitions (observation, action) drawn once from `store`."""
  # Here: pipeline loads TensorFlow (see the note at the top).
  from ccvl_tf.data import pipeline  # pylint: disable=g-import-not-at-top
  return {k: np.asarray(v) for k, v in pipeline.sample_batch(store, num_states, seed, 0).items()}


def probe(agent, probe: Mapping[str, np.ndarray], num_actions: int,
          grid: Optional[Sequence[float]] = None) -> Dict[str, float]:
  """The held-out measurements of one agent (see the module notes, step 2)."""
  # Here: TensorFlow (see the note at the top).
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from ccvl_tf.agents import q_agent_base  # pylint: disable=g-import-not-at-top
  from ccvl_tf.evaluation import policy_diagnostics  # pylint: disable=g-import-not-at-top
  obs, acts = probe["observation"], np.asarray(probe["action"], np.int64)
  delta = float(getattr(agent.config, "policy_delta", 0.5))
  stats = policy_diagnostics.family_action_stats(
      agent.q_network, obs, acts, [delta], num_actions)
  out = {"agreement": stats["agreement"][0], "greedy_mode_share": stats["greedy_mode_share"][0],
         "cql_gap": stats["cql_gap"][0]}
  phi = np.concatenate([np.asarray(agent.online_network.phi_model(
      {"observation": obs[i:i + 256]})) for i in range(0, len(obs), 256)], 0)
  out.update({k: float(v) for k, v in q_agent_base.feature_metrics(tf.constant(phi)).items()})
  if grid is not None:
    out["family_differs_any"] = policy_diagnostics.family_action_stats(
        agent.q_network, obs, acts, grid, num_actions)["differs_any"]
  return out


def run_variant(cfg: AblationConfig, name: str, log: Callable[[str], None] = print
                ) -> Dict[str, object]:
  """Trains, probes and scores one variant (resumable: a finished variant's result file is
  returned as it is)."""
  # A result per (variant, steps): a rerun with more --num_steps resumes the training.
  result_path = os.path.join(cfg.output_dir, "results", f"{name}_{cfg.num_steps}.json")
  if os.path.exists(result_path):
    with open(result_path) as f:
      return json.load(f)
  # Here: TensorFlow and the modules that load it (see the note at the top).
  import keras  # pylint: disable=g-import-not-at-top
  from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top
  from ccvl_tf.algorithm import belief, networks  # pylint: disable=g-import-not-at-top
  from ccvl_tf.runtime import training  # pylint: disable=g-import-not-at-top
  from ccvl_tf.data import pipeline  # pylint: disable=g-import-not-at-top
  from ccvl_tf.envs import atari  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments import agent_registry  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline import demo_report  # pylint: disable=g-import-not-at-top

  variant = VARIANTS[name]
  probe_env = atari.AtariEnvironment(cfg.game, seed=cfg.seed)
  num_actions = probe_env.num_actions
  store = _load_store(cfg.dataset_dir, num_actions)
  probes = probe_batch(_load_store(cfg.heldout_dir, num_actions), cfg.probe_states, cfg.seed)
  keras.utils.set_random_seed(cfg.seed)
  time_step_spec = ts.time_step_spec(tensor_spec.from_spec(probe_env.observation_spec()))
  action_spec = tensor_spec.from_spec(probe_env.action_spec())
  settings = agent_registry.make_settings(
      network_config=networks.QNetworkConfig(torso="nature"),
      dataset_size=float(store.num_transitions), ccvl_options=dict(variant.ccvl_options),
      reward_clip=1.0, seed=cfg.seed, **dict(variant.settings))
  agent = agent_registry.get_agent_spec(variant.agent).build(time_step_spec, action_spec,
                                                             settings)
  grid = (belief.delta_grid(settings.num_grid_deltas)
          if agent_registry.get_agent_spec(variant.agent).train_key == "ccvl" else None)
  root = os.path.join(cfg.output_dir, "runs", name)
  compiled = rollouts.CompiledPolicy(agent.policy)
  final = {}

  def evaluate(step):
    del step
    return probe(agent, probes, num_actions, grid)

  t0 = time.time()
  loop = training.LoopConfig(root_dir=root, num_steps=cfg.num_steps,
                             checkpoint_interval=cfg.probe_interval, log_interval=1_000,
                             summary_interval=100, eval_interval=cfg.probe_interval)
  res = training.train(agent, lambda start: pipeline.transition_dataset(
      store, cfg.batch_size, seed=cfg.seed, start_batch=start), loop, evaluate=evaluate,
                       log=lambda s: log(f"[{name}] {s}"))
  evals = training.load_eval_record(root)["evals"]
  last = dict(evals[str(res["step"])])
  if cfg.eval_episodes:  # the ALE score of the final greedy policy (kept in the result file)
    env = atari.AtariEnvironment(cfg.game, seed=cfg.seed + 10_000,
                                 max_episode_steps=cfg.eval_max_steps)
    records = rollouts.run_episodes(
        compiled, env, cfg.eval_episodes, epsilon=cfg.eval_epsilon, seed=cfg.seed + 20_000,
        raw_score_fn=lambda e: e.episode_raw_return,
        max_total_steps=cfg.eval_episodes * (cfg.eval_max_steps + 2))
    row = demo_report.score_row(name, [r.raw_score for r in records])
    final.update(scores=row["scores"], lengths=[int(r.length) for r in records])
    last.update(score=row["mean"], score_ci_low=row["ci_low"], score_ci_high=row["ci_high"],
                mean_length=float(np.mean(final["lengths"])))
  result = {"variant": name, "agent": variant.agent, "changes": variant.describe(),
            "note": variant.note, "step": res["step"], **last,
            "train_seconds": time.time() - t0, "last_metrics": res["last_metrics"],
            "probes": [{"step": int(s), **v} for s, v in sorted(evals.items(),
                                                                  key=lambda kv: int(kv[0]))],
            **final}
  os.makedirs(os.path.dirname(result_path), exist_ok=True)
  with open(result_path + ".tmp", "w") as f:
    strict_json.dump(result, f, indent=1)
  os.replace(result_path + ".tmp", result_path)
  return result


# ------------------------------------------------------------------------------ the pool
def _worker_init(threads: int, parent_pid: Optional[int] = None) -> None:
  # Here: the worker's start, in order: quiet_start before TensorFlow, then tf_setup.
  from ccvl_tf.runtime import quiet, worker_lifetime  # pylint: disable=g-import-not-at-top
  worker_lifetime.die_with_parent(parent_pid)  # no orphans training on after a killed parent
  quiet.quiet_start()  # a spawned worker imports TensorFlow afresh
  from ccvl_tf.experiments import tf_setup  # pylint: disable=g-import-not-at-top
  tf_setup.configure_tensorflow(threads, deterministic=False)


def _worker_run(cfg: AblationConfig, name: str) -> Dict[str, object]:
  log_path = os.path.join(cfg.output_dir, "logs", f"{name}.log")
  os.makedirs(os.path.dirname(log_path), exist_ok=True)
  with open(log_path, "a") as f:
    def log(line):
      f.write(line + "\n")
      f.flush()
    return run_variant(cfg, name, log)


def run(cfg: AblationConfig, log: Callable[[str], None] = print) -> List[Dict[str, object]]:
  """Runs every variant of `cfg.variants` (finished ones are read back), then writes the
  report; returns the result dicts in `cfg.variants` order."""
  cfg.validate()
  os.makedirs(cfg.output_dir, exist_ok=True)
  results: Dict[str, Dict[str, object]] = {}
  ctx = multiprocessing.get_context("spawn")
  log(f"ablation: {len(cfg.variants)} variants, {cfg.num_steps} steps each, {cfg.workers} "
      f"worker(s); logs in {os.path.join(cfg.output_dir, 'logs')}")
  with concurrent.futures.ProcessPoolExecutor(
      max_workers=min(cfg.workers, len(cfg.variants)), mp_context=ctx,
      initializer=_worker_init, initargs=(cfg.threads_per_worker, os.getpid())) as pool:
    futures = {pool.submit(_worker_run, cfg, name): name for name in cfg.variants}
    for fut in concurrent.futures.as_completed(futures):
      name = futures[fut]
      results[name] = fut.result()
      r = results[name]
      log(f"[done] {name}: score {r.get('score', float('nan')):.2f}, agreement "
          f"{r['agreement']:.2f}, greedy mode share {r['greedy_mode_share']:.2f}, CQL gap "
          f"{r['cql_gap']:.3f}, dead units {r['phi_dead_fraction']:.2f}")
  ordered = [results[n] for n in cfg.variants]
  write_report(cfg.output_dir, ordered)
  return ordered


# ------------------------------------------------------------------------------ the report
def _fmt(x, spec=".2f") -> str:
  return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, spec)


def render_table(results: Sequence[Mapping[str, object]]) -> str:
  """Markdown: one row per variant (score with its 95% CI, the probes at the last step)."""
  lines = ["| variant | changes | score [95% CI] | agreement | greedy mode share | CQL gap | "
           "dead units | zero states | mean abs(phi)^2 | family differs |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
  for r in results:
    score = (f"{_fmt(r.get('score'))} [{_fmt(r.get('score_ci_low'))}, "
             f"{_fmt(r.get('score_ci_high'))}]" if "score" in r else "-")
    lines.append(
        f"| {r['variant']} | {r['changes']} | {score} | {_fmt(r['agreement'])} | "
        f"{_fmt(r['greedy_mode_share'])} | {_fmt(r['cql_gap'], '.3f')} | "
        f"{_fmt(r['phi_dead_fraction'])} | {_fmt(r['phi_zero_states'])} | "
        f"{_fmt(r['phi_sq_norm'], '.3g')} | {_fmt(r.get('family_differs_any'))} |")
  return "\n".join(lines) + "\n"


def write_report(output_dir: str, results: Sequence[Mapping[str, object]]) -> None:
  """rows.csv, probes.csv, table.md and curves.png of finished variants."""
  with open(os.path.join(output_dir, "rows.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, ROW_COLUMNS, extrasaction="ignore")
    w.writeheader()
    for r in results:
      w.writerow(r)
  with open(os.path.join(output_dir, "probes.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, PROBE_COLUMNS, extrasaction="ignore")
    w.writeheader()
    for r in results:
      for p in r["probes"]:
        w.writerow({"variant": r["variant"], **p})
  with open(os.path.join(output_dir, "table.md"), "w") as f:
    f.write(render_table(results))
  # Here: matplotlib (~250 ms to import) only when the figure is drawn.
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, 3, figsize=(15, 4))
  for r in results:
    steps = [p["step"] for p in r["probes"]]
    for ax, key in zip(axes, ("agreement", "cql_gap", "phi_dead_fraction")):
      ax.plot(steps, [p[key] for p in r["probes"]], marker=".", label=r["variant"])
  for ax, title in zip(axes, ("agreement with the data's action", "CQL gap (log A: none)",
                              "dead feature units")):
    ax.set_title(title)
    ax.set_xlabel("gradient step")
    ax.grid(alpha=0.3)
  axes[0].legend(fontsize="x-small")
  fig.tight_layout()
  fig.savefig(os.path.join(output_dir, "curves.png"), dpi=100)
  plt.close(fig)
