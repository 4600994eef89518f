"""The fine-tuning measurement (paper Table 6's shape) on MinAtar: offline runs of the MinAtar
comparison (binaries/compare.py --suite=minatar) fine-tuned online for the same number of
environment steps by every method, scored before and after.

More in docs/online.md "Module notes", `ccvl_tf/experiments/online/finetune_suite.py`.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Callable, Dict, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime import paths
from ccvl_tf.runtime import run_settings
from ccvl_tf.envs import factory
from ccvl_tf.envs import scores
from ccvl_tf.runtime import training
from ccvl_tf.runtime.config_flags import setting
from ccvl_tf.data import minatar_datasets
from ccvl_tf.experiments import agent_registry
from ccvl_tf.experiments.compare import config as compare_config
from ccvl_tf.experiments.compare import suites as compare_suites
from ccvl_tf.experiments.compare import units as compare_units
from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.experiments.online import finetune_report
# Where a run lives is the report's to say (it reads the runs); the suite writes them there.
from ccvl_tf.experiments.online.finetune_report import run_dir
from ccvl_tf.runtime import strict_json

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))  # ccvl_tf/experiments/online/<this file>
FINETUNE = os.path.join(_REPO_ROOT, "binaries", "finetune_online.py")
# Fine-tune --agent -> the comparison's method whose offline run it starts from.
OFFLINE_METHOD = {agent: {"ccvl": "CCVL", "cql": "CQL"}[offline]
                  for agent, offline in online_config.OFFLINE_AGENT.items()}


def _parse_list(text) -> tuple:
  if isinstance(text, str):
    return tuple(t.strip() for t in text.split(",") if t.strip())
  return tuple(text)


# Each field compared when a run of the measurement resumes or is reused (each run is a
# finetune_online.py run: OnlineConfig.fingerprint compares what it is given), or not, and why.
@config_flags.compared_settings(
    compared=("compare_dir", "dataset", "eval_episodes", "eval_max_steps", "min_replay_size",
              "alpha", "schedule", "online_counts"),
    not_compared={
        "data_dir": "the reference scores the report normalizes with, read at every report",
        "output_dir": "where the measurement writes",
        "games": "which runs the table holds; each run is stored under its own name",
        "seeds": "which runs the table holds; each run is stored under its own seed",
        "methods": "which runs the table holds; each run is stored under its own name",
        "num_env_steps": "the budget: a larger one continues each run where it stopped",
        "eval_interval": "which steps are evaluated; each evaluation measures the same way",
        "bootstrap_reps": "the report's intervals, recomputed from the stored scores"})
@dataclasses.dataclass(frozen=True)
class FinetuneSuiteConfig:
  """Settings of the measurement; its `setting` fields are binaries/finetune_minatar.py's
  flags."""
  compare_dir: str = setting("", "--output_dir of compare.py --suite=minatar (its runs/ hold "
                             "the offline checkpoints).", flag_default=None)
  data_dir: str = setting("", "The MinAtar datasets' root (minatar_scores.json: reference "
                          "scores for the normalized score).", flag_default=None)
  output_dir: str = setting("", "Output directory (resumable).", flag_default=None,
                            output="dir")
  dataset: str = setting("1%", "Dataset kind of the offline runs (1%, 5%, Initial 10%).")
  games: Sequence[str] = setting(("Breakout", "SpaceInvaders"), "MinAtar games.", kind="csv",
                                 parse=_parse_list)
  seeds: Sequence[str] = setting(("0", "1", "2"), "Seeds (of the offline runs and the "
                                 "fine-tunes).", kind="csv", parse=_parse_list)
  methods: Sequence[str] = setting(online_config.AGENTS, "Fine-tune agents: "
                                   + ", ".join(online_config.AGENTS) + ".", kind="csv",
                                   parse=_parse_list)
  # The same for every method; an evaluation also before the first online step.
  num_env_steps: int = run_settings.borrow("num_env_steps", 10_000)
  eval_interval: int = run_settings.borrow("eval_interval", 625, lower_bound=1)
  eval_episodes: int = run_settings.borrow("eval_episodes")
  eval_max_steps: int = run_settings.borrow("eval_max_steps", 10_000)  # MinAtar's own cap
  min_replay_size: int = run_settings.borrow("min_replay_size", 500)
  bootstrap_reps: int = run_settings.borrow("bootstrap_reps", lower_bound=100)  # rliable's
  # finetune_online.py --alpha for every run.
  alpha: Optional[float] = config_flags.borrow(ccvl_agent.CCVLConfig, "alpha",
                                               "each offline run's")
  schedule: str = online_config.schedule_setting(online_config.DETERMINISTIC)
  # finetune_online.py --online_counts for every run.
  online_counts: str = config_flags.borrow(online_config.OnlineConfig, "online_counts",
                                           default=config_flags.DECLARED)

  def validate(self) -> None:
    for game in self.games:
      factory.refuse_gymnasium(game, "--games", "finetune_minatar.py fine-tunes MinAtar games "
                               "(Breakout, SpaceInvaders, ...) from a compare.py comparison")
    for name in ("compare_dir", "data_dir", "output_dir"):
      if not getattr(self, name):
        raise ValueError(f"--{name} is required")
    training.check_input_dir(self.compare_dir, "--compare_dir", "a compare.py --output_dir")
    compare_config.parse_datasets(self.dataset)
    bad = [m for m in self.methods if m not in online_config.AGENTS]
    if bad or not self.methods:
      raise ValueError(f"--methods: unknown {bad}; valid: {', '.join(online_config.AGENTS)}")
    if self.schedule not in online_config.SCHEDULES:
      raise ValueError(f"--schedule must be one of {', '.join(online_config.SCHEDULES)}, got "
                       f"{self.schedule!r}")
    config_flags.check(self, prefix="--")  # the declared bounds (--alpha: CCVLConfig's)
    if self.online_counts not in ("grow", "offline"):
      raise ValueError(f"--online_counts must be 'grow' or 'offline', got "
                       f"{self.online_counts!r}")
    if not self.games or not self.seeds:
      raise ValueError("--games and --seeds must not be empty")
    for s in self.seeds:
      if not str(s).isdigit():
        raise ValueError(f"--seeds must be integers >= 0, got {s!r}")
    refs = minatar_datasets.load_scores(self.data_dir)  # FileNotFoundError says how to make it
    missing = [g for g in self.games if not scores.has_reference(g, refs)]
    if missing:
      raise ValueError(f"--data_dir {self.data_dir}: no usable reference scores (random and "
                       f"data DQN) for {', '.join(missing)} in minatar_scores.json")

  @property
  def dataset_kind(self) -> str:
    return compare_config.parse_datasets(self.dataset)[0]


def offline_dir(cfg: FinetuneSuiteConfig, method: str, game: str, seed: int) -> str:
  """The comparison's training root of the offline run `method` starts from."""
  return compare_units.train_dir(cfg.compare_dir, OFFLINE_METHOD[method], cfg.dataset_kind,
                                 game, seed)


def ensure_offline_summary(cfg: FinetuneSuiteConfig, method: str, game: str, seed: int,
                           log: Callable[[str], None]) -> str:
  """The offline run's summary.json (what the fine-tune reads: game, agent, alpha, |D|, the
  belief temperature). Comparisons made before compare.py wrote it have none: it is written
  here from the comparison's own definitions at its default settings (the learner's alpha,
  the dataset's size) and the CCVL result file's belief temperature, and the log says so."""
  root = offline_dir(cfg, method, game, seed)
  path = os.path.join(root, "summary.json")
  if paths.exists(path):
    return root
  if not paths.isdir(os.path.join(root, "checkpoints")):
    raise ValueError(f"no offline run of {OFFLINE_METHOD[method]} for {game} seed {seed} "
                     f"({root}/checkpoints missing); run compare.py --suite=minatar "
                     f"--methods={OFFLINE_METHOD[method]} --datasets={cfg.dataset} "
                     f"--games={game} --output_dir={cfg.compare_dir} first")
  if paths.is_remote(root):
    raise ValueError(f"{path} is missing (the comparison predates it) and cannot be written "
                     f"into the remote --compare_dir {cfg.compare_dir}: copy the comparison "
                     f"to a local directory and give that as --compare_dir, which writes it")
  ccfg = compare_config.CompareConfig(suite="minatar", output_dir=cfg.compare_dir,
                                      data_dir=cfg.data_dir)
  suite = compare_suites.MinAtarSuite(ccfg)
  data = suite.data(game, cfg.dataset_kind, seed, suite.default_batch_size)
  spec = agent_registry.get_agent_spec(compare_config.METHODS[OFFLINE_METHOD[method]])
  tss, act = suite.specs(game)
  learner = spec.build(tss, act, compare_units.agent_settings(suite, data, seed))
  more = {}
  result = compare_units.result_path(cfg.compare_dir, "CCVL", cfg.dataset_kind, game, seed)
  if OFFLINE_METHOD[method] == "CCVL" and paths.exists(result):
    more["belief_temperature"] = float(json.loads(paths.read_text(result))["belief_temperature"])
  steps = int(json.loads(paths.read_text(os.path.join(root, "train_seconds.json")))["steps"])
  compare_units.write_train_summary(root, suite.env_name(game), spec.train_key, learner,
                                    data.size, steps, **more)
  log(f"{root}: wrote the summary.json this comparison predates (its default settings; "
      f"{json.load(open(path))})")
  return root


def offline_states(cfg: FinetuneSuiteConfig, game: str, seed: int, suite=None,
                   size: int = 512) -> str:
  """<output_dir>/offline_states/<Game>_seed<k>.npz: `size` states of the offline dataset
  (the held-out batches of the MinAtar comparison's data of this game, kind and seed), for
  the penalty diagnostic of the CCVL fine-tunes (finetune_online.py --offline_states); written
  once."""
  path = os.path.join(cfg.output_dir, "offline_states", f"{game}_seed{seed}.npz")
  if os.path.exists(path):
    return path
  if suite is None:
    suite = compare_suites.MinAtarSuite(compare_config.CompareConfig(
        suite="minatar", output_dir=cfg.compare_dir, data_dir=cfg.data_dir))
  observations, n = [], 0
  for batch in suite.data(game, cfg.dataset_kind, seed, 256).held_out():
    observations.append(np.asarray(batch["observation"]))
    n += len(observations[-1])
    if n >= size:
      break
  os.makedirs(os.path.dirname(path), exist_ok=True)
  np.savez_compressed(path + ".tmp.npz", observation=np.concatenate(observations)[:size])
  os.replace(path + ".tmp.npz", path)
  return path


def run_finished(root: str) -> bool:
  path = os.path.join(root, "summary.json")
  if not os.path.exists(path):
    return False
  summary = json.load(open(path))
  return summary.get("step") == summary.get("final_step")


def finetune_args(cfg: FinetuneSuiteConfig, method: str, game: str, seed: int,
                  offline: str, states: Optional[str] = None) -> list:
  """The finetune_online.py flags of one run (everything else at OnlineConfig's defaults;
  `states`: the offline states of the penalty diagnostic)."""
  return [f"--game=minatar/{game}", f"--agent={method}", f"--offline_dir={offline}",
          f"--root_dir={run_dir(cfg, method, game, seed)}", f"--seed={seed}",
          f"--num_env_steps={cfg.num_env_steps}", f"--eval_interval={cfg.eval_interval}",
          f"--eval_episodes={cfg.eval_episodes}", f"--eval_max_steps={cfg.eval_max_steps}",
          f"--min_replay_size={cfg.min_replay_size}", "--replay_capacity=1000000",
          "--num_actors=1", "--export_policies=false",
          f"--checkpoint_interval={cfg.eval_interval}", f"--log_interval={cfg.eval_interval}",
          f"--online_counts={cfg.online_counts}", f"--schedule={cfg.schedule}"
          ] + ([] if cfg.alpha is None else [f"--alpha={cfg.alpha}"]) + (
              [] if states is None else [f"--offline_states={states}"])


def run(cfg: FinetuneSuiteConfig, log: Callable[[str], None] = print) -> Dict[str, str]:
  """Every (method, game, seed) run in turn (finished ones skipped), then the report."""
  cfg.validate()
  os.makedirs(os.path.join(cfg.output_dir, "logs"), exist_ok=True)
  with open(os.path.join(cfg.output_dir, "config.json"), "w") as f:
    strict_json.dump(dataclasses.asdict(cfg), f, indent=2)
  units = [(g, int(s), m) for g in cfg.games for s in cfg.seeds for m in cfg.methods]
  suite = compare_suites.MinAtarSuite(compare_config.CompareConfig(  # data loaded when used
      suite="minatar", output_dir=cfg.compare_dir, data_dir=cfg.data_dir))
  for i, (game, seed, method) in enumerate(units):
    root = run_dir(cfg, method, game, seed)
    if run_finished(root):
      log(f"[{i + 1}/{len(units)}] {method} {game} seed {seed}: done (skipped)")
      continue
    if cfg.schedule == online_config.DETERMINISTIC and os.path.isdir(root):
      log(f"[{i + 1}/{len(units)}] {method} {game} seed {seed}: {root} holds an unfinished "
          f"run, which --schedule=deterministic cannot resume; starting it again")
      shutil.rmtree(root)
    offline = ensure_offline_summary(cfg, method, game, seed, log)
    states = (offline_states(cfg, game, seed, suite)
              if online_config.OFFLINE_AGENT[method] == "ccvl" else None)
    log_path = os.path.join(cfg.output_dir, "logs", f"{method}_{game}_seed{seed}.log")
    t0 = time.time()
    log(f"[{i + 1}/{len(units)}] {method} {game} seed {seed}: fine-tuning {offline} "
        f"(log {log_path})")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = _REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    with open(log_path, "a") as out:
      code = subprocess.call([sys.executable, FINETUNE] + finetune_args(
          cfg, method, game, seed, offline, states), stdout=out, stderr=subprocess.STDOUT, env=env,
          cwd=_REPO_ROOT)
    if code != 0:
      tail = open(log_path).read()[-1500:]
      raise RuntimeError(f"{method} {game} seed {seed}: finetune_online.py exited with code "
                         f"{code}; see {log_path}:\n{tail}")
    log(f"  done in {time.time() - t0:.0f}s")
  return finetune_report.write_report(cfg, log)
