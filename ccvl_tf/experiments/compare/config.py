"""The comparison's names and settings: methods, suites, dataset kinds, `CompareConfig`.

What `binaries/compare.py`'s flags become (`parse_methods`, `parse_datasets`, `CompareConfig`),
and the names every part of the comparison shares (runner.py has the overview).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Optional, Sequence

from ccvl_tf.agents import aevl_agent, ccvl_agent, rem_agent
from ccvl_tf.runtime import config_flags, run_settings
from ccvl_tf.envs import factory
from ccvl_tf.envs import scores
from ccvl_tf.runtime.config_flags import borrow, setting
from ccvl_tf.experiments import agent_options
from ccvl_tf.experiments import agent_registry


# Display name (as in the paper's tables) -> agent registry name.
METHODS: Dict[str, str] = {
    "REM": "rem", "CQL": "cql", "AEVL": "aevl", "Fixed-CCVL": "fixed_ccvl", "CCVL": "ccvl",
    "DQN": "dqn", "AEVL-TD": "aevl_td", "BC": "bc",
}
# The methods a comparison runs by default: behaviour cloning (the anchor every offline table
# reports: is the data learnable at all?) and the paper's methods in its table order.
DEFAULT_METHODS = scores.TABLE_METHODS
# The agents' settings a comparison borrows as its own fields (None: not given).
AGENT_SETTINGS = ("alpha", "learning_rate", "adam_epsilon", "target_update_period",
                  "num_heads", "num_members", "num_deltas", "num_pairs", "dr3_coef")
SUITES = ("gridworld", "minatar", "atari")
DATASET_KINDS = scores.PAPER_DATASETS
# Dataset kind -> subset name of ccvl_tf.data.dqn_replay (minatar / atari).
SUBSET_OF_KIND = {"1%": "1%", "5%": "5%", "Initial 10%": "initial10%"}
SCORE_COLUMNS = ("method", "dataset", "game", "seed", "score", "normalized_score",
                 "train_steps", "train_seconds", "eval_seconds", "tf_threads", "deterministic")
EVAL_EPSILON = 0.001  # the paper's evaluation epsilon
ENGINES = ("local", "ray")  # where the units run: this machine's processes, a Ray cluster


def parse_methods(text: str) -> List[str]:
  """'REM,cql,fixed_ccvl' -> ['REM', 'CQL', 'Fixed-CCVL'] (display names; case, '-' and '_'
  insensitive). Raises ValueError listing the valid names for an unknown one."""
  canon = {k.lower().replace("-", "").replace("_", ""): k for k in METHODS}
  out = []
  for name in [t.strip() for t in text.split(",") if t.strip()]:
    key = name.lower().replace("-", "").replace("_", "")
    if key not in canon:
      raise ValueError(f"--methods: unknown method {name!r}; valid methods: "
                       f"{', '.join(METHODS)}")
    if canon[key] not in out:
      out.append(canon[key])
  if not out:
    raise ValueError(f"--methods is empty; valid methods: {', '.join(METHODS)}")
  return out


def parse_datasets(text: str) -> List[str]:
  """'1%,5%,initial10%' -> dataset kinds; ValueError listing the valid ones."""
  canon = {k.lower().replace(" ", ""): k for k in DATASET_KINDS}
  out = []
  for name in [t.strip() for t in text.split(",") if t.strip()]:
    key = name.lower().replace(" ", "").replace("_", "")
    if key not in canon:
      raise ValueError(f"--datasets: unknown dataset kind {name!r}; valid kinds: "
                       f"{', '.join(DATASET_KINDS)} (initial10% is accepted for Initial 10%)")
    out.append(canon[key])
  if not out:
    raise ValueError(f"--datasets is empty; valid kinds: {', '.join(DATASET_KINDS)}")
  return out


def slug(text: str) -> str:
  """A file-system name: 'Initial 10%' -> 'initial10pct', 'Fixed-CCVL' -> 'fixed-ccvl'."""
  return text.lower().replace(" ", "").replace("%", "pct")


# The defaults of the agents' settings as their flags' help states them.
_EACH_AGENT = "each agent's; CCVL's {default}"
_SUITE = "the suite's, else each agent's; CCVL's {default}"


# Each field compared when a finished unit is reused or a unit's training resumed
# (units.changed_units, units.train_fingerprint), or not, and why.
@config_flags.compared_settings(
    compared=("suite", "num_steps", "eval_episodes", "eval_max_steps", "batch_size", "alpha",
              "learning_rate", "adam_epsilon", "target_update_period", "num_heads",
              "num_members", "num_grid_deltas", "num_deltas", "num_pairs",
              "belief_temperature", "dr3_coef", "ccvl_options", "data_dir", "data_run"),
    not_compared={
        "output_dir": "where the comparison writes",
        "methods": "which units the table holds; each unit is stored under its own name",
        "datasets": "which units the table holds; each unit is stored under its own name",
        "games": "which units the table holds; each unit is stored under its own name",
        "seeds": "which units the table holds; each unit is stored under its own seed",
        "first_seed": "which units the table holds; each unit is stored under its own seed",
        "bootstrap_reps": "the report's intervals, recomputed from the stored scores",
        "checkpoint_interval": "how often the (exact-resume) checkpoints are written",
        "workers": "how many units run side by side; each unit's numbers are its own",
        "threads_per_worker": "the float rounding of CPU kernels only, no random stream "
                              "(recorded in each row)",
        "deterministic": "no bit changed on CPU at a fixed thread count (recorded in each row)",
        "engine": "what runs the units; the rows are the same whichever runs them",
        "ray_address": "where the Ray cluster is",
        "ray_num_gpus": "the GPU share of a Ray task"})
@dataclasses.dataclass
class CompareConfig:
  """Settings of one comparison; the `setting` fields are binaries/compare.py's flags
  (ccvl_tf/runtime/config_flags.py). None = the suite's default.

  Attributes:
    suite: one of SUITES.
    output_dir: where runs/, results/, scores.csv, table.md, iqm.png go.
    methods: display names (METHODS keys).
    datasets: dataset kinds (DATASET_KINDS).
    games: None = the suite's games.
    seeds: number of seeds per (method, dataset, game): first_seed .. first_seed+seeds-1.
    first_seed: the first seed (0 for reported tables; >= 100 for a development split that
      chooses defaults, docs/agent.md).
    num_steps: gradient steps per training (None: suite default; atari: 6.25M / 12.5M).
    eval_episodes, eval_max_steps: evaluation episodes per run and their step cap.
    batch_size: transitions per batch.
    alpha, learning_rate, adam_epsilon, target_update_period, dr3_coef, num_deltas (CCVL N),
      num_pairs (CCVL M), num_heads (REM H), num_members (AEVL E): the agents' settings,
      declared in their configs (ccvl_tf/agents/*_agent.py) and borrowed here (None: the suite's,
      else each agent's own).
    num_grid_deltas (CCVL K), belief_temperature (None: CCVL's from held-out data, AEVL's
      config default): the evaluation policies' settings.
    ccvl_options: CCVL's own options (objective, counts, belief_resample), declared once in
      ccvl_tf.agents.ccvl_agent.CCVLConfig (experiments/agent_options.py); unset = CCVLConfig's.
    data_dir: minatar / atari dataset root; data_run: which logged run of each game (None: the
      suite's first, minatar 0 = make_minatar_datasets.py's default seed, atari 1).
    bootstrap_reps: rliable bootstrap replications for the CIs.
    checkpoint_interval: training checkpoints (resume inside one training).
    workers: trainings run side by side, each in its own process (1: in this process). The
      small MinAtar / gridworld networks use ~1 core each, so workers = cores is ~cores x
      faster (docs/compare.md). Methods that share a trained learner (Fixed-CCVL and CCVL)
      always run in the same worker, one after the other.
    threads_per_worker: TensorFlow intra/inter-op threads of every unit, whatever `workers`
      is (default 1), so that a unit's numerics do not depend on the pool size: reductions
      are ordered differently with another thread count, and with near-tied Q-values the
      greedy action follows that float noise. Recorded in each result row (`tf_threads`).
    deterministic: tf.config.experimental.enable_op_determinism() in every unit's process
      (recorded as `deterministic`); off by default: on CPU it changed no bit at a fixed
      thread count (BUILD.md, tools/determinism_cost.py).
    engine: 'local' (this process, or `workers` spawned processes) or 'ray' (one Ray task per
      unit, ray_engine.py; Ray schedules them on the cluster's nodes, `threads_per_worker`
      CPUs and `ray_num_gpus` GPUs each). The rows are the same whichever runs them.
    ray_address: the Ray cluster (ray.init's `address`; None: Ray's default).
    ray_num_gpus: GPUs per unit's Ray task (a fraction < 1 shares one GPU).
  """
  suite: str = setting("gridworld", f"One of: {', '.join(SUITES)}.")
  output_dir: str = setting("results/compare", "Output directory (resumable).",
                            flag_default=None, output="dir")
  methods: Sequence[str] = setting(DEFAULT_METHODS,
                                   f"Comma-separated, from: {', '.join(METHODS)}.",
                                   kind="csv", parse=parse_methods)
  datasets: Sequence[str] = setting(DATASET_KINDS,
                                    "Dataset kinds, comma-separated: 1%,5%,initial10%.",
                                    kind="csv", parse=parse_datasets)
  games: Optional[Sequence[str]] = setting(None, "Games (default: all of the suite's).",
                                           kind="list")
  seeds: int = setting(3, "Number of seeds per method/dataset/game: "
                       "--first_seed .. --first_seed + N - 1.")
  first_seed: int = run_settings.borrow("first_seed")
  num_steps: Optional[int] = run_settings.borrow(
      "num_steps", None, "the suite's; atari: 6.25M on 1%, 12.5M on 5% / initial 10%")
  eval_episodes: Optional[int] = run_settings.borrow("eval_episodes", None, "the suite's")
  eval_max_steps: Optional[int] = run_settings.borrow("eval_max_steps", None, "the suite's")
  batch_size: Optional[int] = run_settings.borrow("batch_size", None, "the suite's, 32")
  alpha: Optional[float] = borrow(ccvl_agent.CCVLConfig, "alpha", _EACH_AGENT)
  learning_rate: Optional[float] = borrow(ccvl_agent.CCVLConfig, "learning_rate", _SUITE)
  adam_epsilon: Optional[float] = borrow(ccvl_agent.CCVLConfig, "adam_epsilon", _SUITE)
  target_update_period: Optional[int] = borrow(ccvl_agent.CCVLConfig, "target_update_period",
                                               _SUITE)
  num_heads: Optional[int] = borrow(rem_agent.REMConfig, "num_heads")
  num_members: Optional[int] = borrow(aevl_agent.AEVLConfig, "num_members")
  num_grid_deltas: int = run_settings.borrow("num_grid_deltas")
  num_deltas: Optional[int] = borrow(ccvl_agent.CCVLConfig, "num_deltas")
  num_pairs: Optional[int] = borrow(ccvl_agent.CCVLConfig, "num_pairs")
  belief_temperature: Optional[float] = run_settings.borrow("belief_temperature")
  dr3_coef: Optional[float] = borrow(ccvl_agent.CCVLConfig, "dr3_coef",
                                     "the suite's -- 0 on gridworld and MinAtar -- else each "
                                     "agent's; CCVL's {default}")
  ccvl_options: Dict[str, object] = dataclasses.field(default_factory=dict)
  data_dir: Optional[str] = setting(
      None, "minatar: root of binaries/make_minatar_datasets.py output; atari: "
      "DQN Replay root <data_dir>/<Game>/<run>/replay_logs.")
  data_run: Optional[int] = setting(None, "Which logged run of each game to use (default: "
                                    "minatar 0, atari 1).")
  bootstrap_reps: int = run_settings.borrow("bootstrap_reps")
  checkpoint_interval: Optional[int] = None
  workers: int = run_settings.borrow("workers")
  # Recorded in scores.csv (tf_threads, deterministic).
  threads_per_worker: int = run_settings.borrow("threads_per_worker")
  deterministic: bool = run_settings.borrow("deterministic")
  engine: str = setting("local", "Where the units run: 'local' (this machine: in this process, "
                        "or --workers processes) or 'ray' (one Ray task per unit on a Ray "
                        "cluster, --ray_address; docs/compare.md).", enum_values=ENGINES)
  ray_address: Optional[str] = setting(
      None, "--engine=ray: the cluster to run on, as ray.init(address=...) takes it: 'auto' (the "
      "cluster `ray start` runs on this machine) or HOST:PORT of its head node (unset: Ray's "
      "default, RAY_ADDRESS if set, else a Ray instance started here for this run).")
  ray_num_gpus: float = setting(0.0, "--engine=ray: GPUs each unit's task asks Ray for (a "
                                "fraction below 1 shares a GPU between tasks; above 1, a "
                                "whole number).")

  def validate(self) -> None:
    if self.suite not in SUITES:
      raise ValueError(f"--suite must be one of {', '.join(SUITES)}, got {self.suite!r}")
    for g in self.games or ():
      factory.refuse_gymnasium(g, "--games", f"--suite={self.suite} trains on the suite's own "
                               f"datasets (gridworld, MinAtar or Atari replay data)")
    for m in self.methods:
      if m not in METHODS:
        raise ValueError(f"--methods: unknown method {m!r}; valid methods: "
                         f"{', '.join(METHODS)}")
    for d in self.datasets:
      if d not in DATASET_KINDS:
        raise ValueError(f"--datasets: unknown dataset kind {d!r}; valid kinds: "
                         f"{', '.join(DATASET_KINDS)}")
    for name in ("seeds", "num_steps", "eval_episodes", "eval_max_steps", "batch_size",
                 "num_grid_deltas", "bootstrap_reps", "checkpoint_interval", "workers",
                 "threads_per_worker"):
      v = getattr(self, name)
      if v is not None and (isinstance(v, bool) or int(v) != v or v < 1):
        raise ValueError(f"--{name} must be an integer >= 1, got {v!r}")
    if isinstance(self.first_seed, bool) or int(self.first_seed) != self.first_seed or \
        self.first_seed < 0:
      raise ValueError(f"--first_seed must be an integer >= 0, got {self.first_seed!r}")
    if self.adam_epsilon is not None and not (math.isfinite(self.adam_epsilon)
                                              and self.adam_epsilon > 0):
      raise ValueError(f"--adam_epsilon must be a finite number > 0, got {self.adam_epsilon!r}")
    config_flags.check(self, prefix="--")  # the agents' settings: their declared bounds
    if self.belief_temperature is not None and not (
        math.isfinite(self.belief_temperature) and self.belief_temperature > 0):
      raise ValueError(f"--belief_temperature must be a finite number > 0 (or unset), got "
                       f"{self.belief_temperature!r}")
    agent_options.validate(self.ccvl_options)
    # A setting no method of the comparison takes is refused; one that some methods take
    # applies to those (each unit's config resolves the settings its agent takes).
    agents = [METHODS[m] for m in self.methods]
    given = [n for n in AGENT_SETTINGS if getattr(self, n) is not None] + list(
        self.ccvl_options)
    agent_registry.check_taken(given, agents, f"--methods={','.join(self.methods)}",
                               AGENT_SETTINGS + agent_options.CCVL_OPTIONS)
    believers = agent_registry.BELIEF_AGENTS
    if self.belief_temperature is not None and not any(a in believers for a in agents):
      raise ValueError(f"--belief_temperature is a setting of the belief policies of "
                       f"{', '.join(m for m, a in METHODS.items() if a in believers)}; "
                       f"--methods={','.join(self.methods)} has none of them: leave it out")
    self._validate_engine()
    if self.suite in ("minatar", "atari") and not self.data_dir:
      raise ValueError(f"--suite={self.suite} needs --data_dir (the dataset root; "
                       + ("make it with python binaries/make_minatar_datasets.py "
                          "--output_dir=DIR" if self.suite == "minatar" else
                          "DQN Replay layout <data_dir>/<Game>/<run>/replay_logs") + ")")

  def _validate_engine(self) -> None:
    """--engine and its settings: each given only where it does something."""
    if self.engine not in ENGINES:
      raise ValueError(f"--engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
    g = self.ray_num_gpus
    if isinstance(g, bool) or not isinstance(g, (int, float)) or not math.isfinite(g) or g < 0 \
        or (g > 1 and g != int(g)):
      raise ValueError(f"--ray_num_gpus must be a fraction in [0, 1] or a whole number of GPUs "
                       f"(Ray's rule), got {g!r}")
    if self.engine == "local":
      for name, unset in (("ray_address", None), ("ray_num_gpus", 0)):
        if getattr(self, name) != unset:
          raise ValueError(f"--{name} is a setting of --engine=ray; add --engine=ray or "
                           "leave it out")
    elif self.workers != 1:
      raise ValueError(f"--workers={self.workers} sizes the local process pool; with "
                       "--engine=ray, Ray runs one task per unit on the cluster's free CPUs "
                       "(--threads_per_worker each): leave --workers out")
