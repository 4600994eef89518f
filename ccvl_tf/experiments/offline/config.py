"""The settings of one offline run (binaries/train_offline.py's flags) and what is derived from
them alone: validation, the record summary.json keeps, and the run's configuration resolved
once (`resolve` -> `RunPlan`): what each stage takes (the data's, the training loop's
settings), each learner's own config (a CCVLConfig, CQLConfig, BCConfig, ...: alpha, lr and
the rest in force) and the run's fingerprint (made by run_fingerprint.py).

`OfflineConfig` holds the run-level settings and embeds the agent settings given as flags
(`agent_values`, declared once in the agents' configs, experiments/agent_options.py); the
--preset's values fill in what was not given (presets.py). More in docs/library.md.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Mapping, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import numpy as np
from absl import flags as absl_flags

from ccvl_tf.runtime import config_flags, run_settings, training
from ccvl_tf.algorithm import networks
from ccvl_tf.runtime.config_flags import setting
from ccvl_tf.data import replay_files
from ccvl_tf.data import replay_pool
from ccvl_tf.data import replay_source
from ccvl_tf.envs import atari
from ccvl_tf.envs import factory
from ccvl_tf.experiments import agent_options, agent_registry, compute
from ccvl_tf.experiments.offline import dataset, default_dataset, presets, run_fingerprint
from ccvl_tf.experiments.offline.seeds import Seeds
from ccvl_tf.agents import q_agent_base

# The agent settings train_offline.py takes as flags, declared in ccvl_tf.agents.ccvl_agent.CCVLConfig
# (experiments/agent_options.py); the given ones are OfflineConfig.agent_values.
AGENT_FLAGS = agent_options.TRAINING + agent_options.CCVL_SAMPLING + agent_options.CCVL_OPTIONS

# The help endings of the run settings a preset sets ("the --preset's: demo ..., paper ...").
_RUN_NOTES = presets.run_notes()

# Their defaults as their help states them: the --preset's where it sets one, else the agent's.
AGENT_FLAG_NOTES = {
    **{name: "the --preset's, else {default}" for name in agent_options.TRAINING},
    **{name: "the paper preset's " + repr(value) + ", else {default}"
       for name, value in presets.PAPER_READING.items()}}


def parse_reference_agents(text) -> tuple:
  """'bc,cql' -> ('bc', 'cql'); 'none' or '' -> (); unknown names: ValueError listing the
  valid ones."""
  names = [t.strip() for t in str(text).split(",") if t.strip() and t.strip() != "none"]
  for name in names:
    agent_registry.get_agent_spec(name, flag="--reference_agents")
  return tuple(dict.fromkeys(names))


@dataclasses.dataclass(frozen=True)
class DiagnoseConfig:
  """Settings of binaries/diagnose.py (its flags, ccvl_tf/runtime/config_flags.py)."""
  root_dir: str = setting(help="A train_offline.py run directory (CCVL).", flag_default=None,
                          required=True, output="dir")
  episodes: Optional[int] = setting(None, "Evaluation episodes of the adaptive "
                                    "policy for the belief (default: the run's --eval_episodes).")


# Each field compared when a run resumes or a finished run is reused (changed_settings; on a
# resume, the learned function's share of them: `fingerprint`), or not, and why. tf_threads
# and deterministic change only the float rounding, not a random stream or the method:
# tf_threads the reduction order of CPU kernels (BUILD.md "What is and is not
# bit-reproducible": 1 vs 2 threads moved the networks by <= 5e-3 relative; on a GPU it is
# not applied at all), deterministic no bit on CPU at a fixed thread count. --jit_compile and
# --distribute are compared: XLA and the replicas change which deltas CCVL draws.
@config_flags.compared_settings(
    compared=("game", "dataset_dir", "subset", "pool_checkpoints", "pool_swap_steps", "agent",
              "num_steps", "batch_size", "preset", "agent_values", "num_grid_deltas",
              "reference_agents", "belief_temperature", "belief_prior", "eval_interval",
              "eval_episodes",
              "eval_max_steps", "eval_epsilon", "eval_env", "belief_episodes",
              "default_dataset_steps", "default_dataset_policy", "default_dataset_env",
              "behaviour_epsilon", "seed", "eval_seed", "mixed_precision", "jit_compile",
              "distribute"),
    not_compared={
        "root_dir": "where the run writes",
        "allow_config_change": "the flag that allows a change",
        "tf_threads": "the float rounding of CPU kernels only, no random stream",
        "deterministic": "no bit changed on CPU at a fixed thread count",
        "log_interval": "how often progress is printed",
        "summary_interval": "how often TensorBoard scalars are written",
        "checkpoint_interval": "how often the (exact-resume) checkpoints are written"})
@dataclasses.dataclass
class OfflineConfig:
  """Settings of one offline run; the `setting` fields are train_offline.py's flags
  (ccvl_tf/runtime/config_flags.py).

  The defaults are the CPU demo (`make demo`): 17,500 gradient steps of batch 32 on 50k
  transitions of a scripted Breakout player, the smallest budget at which behaviour cloning
  learns that data (docs/budget.md). The paper's scale (GPU): --preset=paper on a DQN Replay
  run's subset (README "Paper scale").

  The run settings a preset sets (presets.RUN_SETTINGS: steps, evaluation, intervals,
  reference agents) are None here when not given and filled from --preset and --subset when
  the config is made; to change the preset or subset of a config, make a new one
  (dataclasses.replace keeps the values filled in).
  """
  game: str = setting("Breakout", "Atari game (ALE name, any case, e.g. Breakout); with "
                      "--dataset, the environment (e.g. gymnasium:CartPole-v1).")
  root_dir: str = setting("runs/breakout",
                          "Run directory: checkpoints, summaries, eval.csv, policies.",
                          output="dir")
  dataset_dir: Optional[str] = setting(
      None, "A run's replay_logs dir (<game>/<run>/replay_logs; comma-separated runs with "
      "--pool_checkpoints). Default: collect a small one.")
  subset: str = setting("all", "Which part of the dataset to train on.",
                        enum_values=["1%", "5%", "initial10%", "all"])
  pool_checkpoints: int = setting(
      0, "Checkpoints of the dataset held in memory at a time: 0 = the whole dataset (--subset "
      "of --dataset_dir) in memory; K > 0 = a pool of K of its checkpoints, like batch_rl's "
      "FixedReplayBuffer, drawn anew every --pool_swap_steps train steps from --seed, every "
      "checkpoint drawn once in every ceil(checkpoints / K) draws (data/replay_pool.py; "
      "docs/data.md 'Checkpoint pool'): a full run (50 checkpoints of 1M transitions, 354 GB) "
      "in the memory of K.", lower_bound=0)
  pool_swap_steps: int = setting(
      replay_pool.BATCH_RL_SWAP_STEPS, "With --pool_checkpoints: train steps between two "
      "draws of the pool (the default: batch_rl's, 5 new checkpoints every iteration of "
      "250,000 agent steps = 62,500 gradient steps).", lower_bound=1, needs="pool_checkpoints")
  agent: str = setting(
      "ccvl", "Which learner (experiments/agent_registry.py): " + "; ".join(
          f"{s.name}: {s.description}" for s in agent_registry.AGENT_REGISTRY.values()
          if s.offline) + ".")
  num_steps: int = run_settings.borrow("num_steps", None, _RUN_NOTES["num_steps"])
  batch_size: int = run_settings.borrow("batch_size")
  preset: str = setting(
      "demo", "Training settings of the learners: demo = the CPU demo's (docs/budget.md); "
      "paper = the paper's (Atari, DQN Replay; docs/agent.md). A flag given wins.",
      enum_values=["demo", "paper"])
  # The agent settings given as flags (AGENT_FLAGS: CCVLConfig fields, the training ones shared
  # by every learner of the run); the --preset's values and the agent's defaults fill the rest.
  agent_values: Dict[str, object] = dataclasses.field(default_factory=dict)
  num_grid_deltas: int = run_settings.borrow("num_grid_deltas")
  reference_agents: Optional[Sequence[str]] = setting(
      None, "Agents trained beside --agent on the same data, steps and preset, for "
      "the results table (e.g. bc,cql; 'none' for none).", kind="csv", flag_default=None,
      default_note=_RUN_NOTES["reference_agents"],
      parse=lambda text: None if text is None else parse_reference_agents(text))
  belief_temperature: Optional[float] = run_settings.borrow("belief_temperature")
  belief_prior: str = run_settings.borrow("belief_prior", default=config_flags.DECLARED)
  checkpoint_interval: int = run_settings.borrow("checkpoint_interval", None,
                                                 _RUN_NOTES["checkpoint_interval"])
  log_interval: int = run_settings.borrow("log_interval")
  summary_interval: int = setting(100, "TensorBoard scalars every N steps.",
                                  lower_bound=1, parse_bounds=False)
  eval_interval: int = run_settings.borrow("eval_interval", None,
                                           _RUN_NOTES["eval_interval"])
  # Also the episodes of each row of the results table.
  eval_episodes: int = run_settings.borrow("eval_episodes", None,
                                           _RUN_NOTES["eval_episodes"])
  eval_max_steps: int = run_settings.borrow("eval_max_steps", None,
                                            _RUN_NOTES["eval_max_steps"])
  eval_epsilon: float = 0.001
  eval_env: str = setting(
      "vector", "Where the Atari evaluations run: vector = all episodes of an evaluation side "
      "by side in ale_py's AtariVectorEnv, one batched policy call per step, one policy state "
      "(belief) per episode (ccvl_tf/evaluation/atari_vector.py); sequential = one environment, "
      "one episode after another, one policy state carried across them.",
      enum_values=["vector", "sequential"])
  belief_episodes: int = setting(
      10, "Episodes the adaptive policy's belief is carried over in a vector evaluation: the "
      "adaptive policy plays eval_episodes / this sequences side by side, each of this many "
      "episodes one after another with one belief (the paper adapts delta over 10 evaluation "
      "trajectories). 1: a fresh belief per episode, whose delta (drawn at the episode's start) "
      "then comes from the uniform prior. The sequential environment carries one belief over "
      "all its episodes.", lower_bound=1)
  default_dataset_steps: int = setting(
      default_dataset.DEFAULT_DATASET_STEPS,
      "Size of the default dataset collected without --dataset_dir.", lower_bound=1,
      parse_bounds=False)
  # Behaviour policy of the default dataset: 'auto' (scripted player where the game has one,
  # else random), 'scripted' or 'random'; and the scripted player's random-action probability.
  default_dataset_policy: str = setting(
      "auto", "Behaviour policy of the default dataset (no --dataset_dir): auto = the scripted "
      "player where the game has one (Breakout: paddle/ball from the ALE RAM), else uniformly "
      "random.", enum_values=["auto", "scripted", "random"])
  default_dataset_env: str = setting(
      "auto", "Where the default dataset is collected: auto = a uniformly random policy on "
      f"{default_dataset.VECTOR_COLLECTION_ENVS} copies of ale_py's vector environment side by "
      "side, the scripted player (it reads the ALE RAM) in one environment, and a cached "
      "dataset used whichever way it was collected; vector = the vector environment (random "
      "policy only); sequential = one environment for every policy. The two ways give "
      "different samples of the same policy.",
      enum_values=list(default_dataset.COLLECTION_ENVS))
  behaviour_epsilon: float = setting(
      default_dataset.DEFAULT_BEHAVIOUR_EPSILON,
      "The scripted player's probability of a uniformly random "
      "action.", lower_bound=0.0, upper_bound=1.0)
  # Resume checkpoints although their fingerprint (agent, learning settings, dataset) differs.
  allow_config_change: bool = setting(
      False, "Resume the checkpoints in --root_dir although they were trained with another "
      "agent, learning setting or dataset (by default such a resume is refused, listing the "
      "differences). num_steps, intervals and evaluation settings may always change.")
  seed: int = run_settings.borrow("seed")
  # Scores of several training seeds are compared on one set of episodes when each run takes
  # the same --eval_seed (demo_seeds.py does): the table then separates the networks'
  # variation from the episodes'.
  eval_seed: Optional[int] = setting(
      None, "Seed of the evaluation episodes (the evaluations during training, the adaptive "
      "policy's episodes of the diagnostics, the results table's rows); default: --seed.",
      lower_bound=0)
  # A fixed thread count gives one network per seed on machines with other core counts
  # (tools/determinism_cost.py).
  tf_threads: int = run_settings.borrow("tf_threads")
  # Off by default: on CPU op determinism changed no bit at a fixed thread count (BUILD.md,
  # tools/determinism_cost.py); it matters on GPU.
  deterministic: bool = run_settings.borrow("deterministic")
  # How the learners compute (experiments/compute.py); the defaults train bit for bit as
  # before these settings existed.
  mixed_precision: str = setting(
      "off", "Mixed precision of the learners' networks (keras mixed precision: float16 or "
      "bfloat16 compute, float32 variables; float16 with dynamic loss scaling, "
      "keras.optimizers.LossScaleOptimizer). Faster on GPUs with tensor cores; slower on CPU "
      "(BUILD.md, GPU notes).", enum_values=list(compute.PRECISION_POLICIES))
  jit_compile: bool = setting(
      False, "XLA-compile the learners' loss-and-gradient step (tf.function jit_compile).")
  distribute: str = setting(
      "none", "none = one device; mirrored = tf.distribute.MirroredStrategy over every "
      "visible GPU (else every logical CPU device): each batch split evenly across the "
      "replicas, gradients averaged (--batch_size must be divisible by their number).",
      enum_values=list(compute.STRATEGIES))

  @property
  def compute(self) -> compute.Compute:
    """--mixed_precision, --jit_compile, --distribute (experiments/compute.py)."""
    return compute.Compute(mixed_precision=self.mixed_precision, jit_compile=self.jit_compile,
                           distribute=self.distribute)

  def __post_init__(self):
    # The run settings not given: the preset's for the subset (an unknown preset or subset
    # leaves them unset; validate() names the flag).
    if self.preset in presets.PRESET_NAMES:
      for key, value in presets.run_values(self.preset, self.subset).items():
        if getattr(self, key) is None:
          setattr(self, key, value)
    # One spelling per game (atari.canonical_game): --game=breakout and --game=Breakout share
    # one default dataset, one fingerprint and one summary. An unknown name stays as given
    # for validate() to refuse.
    try:
      self.game = atari.canonical_game(self.game)
    except ValueError:
      pass
    # One spelling per local dataset too: absolute, normalized, and the replay_logs directory
    # itself (replay_source.resolve_replay_dir), so `testdata/.../1` from one directory and
    # `/abs/.../1/replay_logs/` from another are one dataset to the fingerprint, and
    # summary.json's record reads back from any working directory (diagnose.py).
    # Each of several runs' directories (--pool_checkpoints) the same way.
    # A local directory whose name holds a comma is kept whole for validate() to name.
    whole = os.path.expanduser((self.dataset_dir or "").strip())
    if "," in whole and not replay_files.is_remote(whole) and os.path.exists(whole):
      self.dataset_dir = os.path.abspath(whole)
    elif self.dataset_dir:
      self.dataset_dir = ",".join(
          d if replay_files.is_remote(d) else replay_source.resolve_replay_dir(
              os.path.abspath(os.path.expanduser(d)))
          for d in dataset.dataset_dirs(self.dataset_dir))

  def validate(self):
    """ValueError naming the flag: an unknown agent, an agent setting out of bounds, an
    unusable --dataset_dir or --root_dir, a setting outside its declaration
    (config_flags.check), a batch larger than the default dataset."""
    presets.validate(self.preset)  # before the settings it fills in are read
    agent_registry.get_agent_spec(self.agent)  # unknown names: a ValueError listing the valid ones
    for name in self.reference_agents:
      agent_registry.get_agent_spec(name, flag="--reference_agents")
    agent_options.validate(self.agent_values)
    agent_registry.check_taken(self.agent_values, [self.agent], f"--agent={self.agent}",
                               AGENT_FLAGS)
    if self.mixed_precision != "off":  # before any data is read (compute.prepare reads back)
      for name in (self.agent,) + tuple(self.reference_agents):
        if not agent_registry.get_agent_spec(name).mixed_precision:
          flag = "--agent" if name == self.agent else "--reference_agents"
          raise ValueError(f"--mixed_precision={self.mixed_precision} does not reach the network "
                           f"of {flag}={name} (TF-Agents' QNetwork, legacy tf_keras, computes in "
                           f"float32): leave --mixed_precision off, or {name} out")
    believers = agent_registry.BELIEF_AGENTS
    if self.belief_temperature is not None and not any(
        a in believers for a in (self.agent,) + tuple(self.reference_agents)):
      raise ValueError(f"--belief_temperature is a setting of the belief policies of "
                       f"{', '.join(believers)}; neither --agent={self.agent} nor "
                       f"--reference_agents={','.join(self.reference_agents) or 'none'} "
                       f"has one: leave it out")
    priors = agent_registry.BELIEF_PRIOR_AGENTS
    # (A value outside the choices: config_flags.check below names them.)
    if self.belief_prior in run_settings.BELIEF_PRIORS[1:] and not any(
        a in priors for a in (self.agent,) + tuple(self.reference_agents)):
      raise ValueError(f"--belief_prior={self.belief_prior} is a setting of the adaptive policy "
                       f"of {', '.join(priors)}; neither --agent={self.agent} nor "
                       f"--reference_agents={','.join(self.reference_agents) or 'none'} "
                       f"has one: leave it out")
    runs = dataset.dataset_dirs(self.dataset_dir)
    whole = os.path.expanduser((self.dataset_dir or "").strip())
    if len(runs) > 1 and not replay_files.is_remote(whole) and os.path.exists(whole):
      raise ValueError(f"--dataset_dir {self.dataset_dir}: the path holds a comma, which "
                       f"separates the runs of a pool (--pool_checkpoints); give the "
                       f"directory through a path without a comma (e.g. a symlink)")
    if len(runs) > 1 and not self.pool_checkpoints:
      raise ValueError(f"--dataset_dir names {len(runs)} directories ({self.dataset_dir}); "
                       f"several runs are read as a checkpoint pool only: give "
                       f"--pool_checkpoints=K (K of their checkpoints in memory at a time)")
    resolved = [d if replay_files.is_remote(d) else os.path.realpath(d) for d in runs]
    if len(set(resolved)) != len(resolved):  # a symlink or '..' to a run given already too
      raise ValueError(f"--dataset_dir names a directory twice: {self.dataset_dir}"
                       + ("" if len(set(runs)) != len(runs) else
                          " (two spellings resolve to one directory)"))
    for run_dir in runs or ([self.dataset_dir] if self.dataset_dir is not None else []):
      try:
        _check_dataset_dir(run_dir)
      except ValueError as e:
        if len(runs) < 2:
          raise
        raise ValueError(f"{e} (one of the {len(runs)} runs --dataset_dir names, split at its "
                         f"commas)") from None
    training.check_output_dir(self.root_dir, "--root_dir")
    if self.belief_temperature is not None and not (
        np.isfinite(self.belief_temperature) and self.belief_temperature > 0):
      raise ValueError(f"--belief_temperature must be a finite number > 0 (or unset: from the "
                       f"held-out data), got {self.belief_temperature!r}")
    config_flags.check(self, prefix="--")
    factory.refuse_gymnasium(
        self.game, "--game", "without --dataset, train_offline.py trains on an Atari game's "
        "DQN Replay data; a Gymnasium environment's own data: --dataset=DATA.npz (e.g. "
        "collect_dataset.py --game=gymnasium:<EnvId> --output=DATA.npz)")
    atari.check_game(self.game)  # unknown names: a ValueError listing the valid ones
    if self.dataset_dir is None and self.batch_size > self.default_dataset_steps:
      raise ValueError(f"--batch_size={self.batch_size} is larger than the default dataset "
                       f"(--default_dataset_steps={self.default_dataset_steps} transitions)")
    if not 0.0 <= self.eval_epsilon <= 1.0:
      raise ValueError(f"--eval_epsilon must be in [0, 1], got {self.eval_epsilon!r}")



def _check_dataset_dir(path: str) -> None:
  """ValueError naming --dataset_dir when `path` is not a replay directory that can be read."""
  # Local paths: os.path.isdir; gs://..., ram://...: tf.io.gfile (replay_files.path_isdir).
  try:
    found = replay_files.path_isdir(path)
  except replay_files.UnreachableError as e:
    cause = e.__cause__ or e
    raise ValueError(f"--dataset_dir {path} could not be reached "
                     f"({type(cause).__name__}: {replay_files.error_text(cause)}); a gs:// "
                     f"path needs network access and, for a non-public bucket, Google "
                     f"credentials (BUILD.md, 'Reading the DQN Replay Dataset from Google "
                     f"Cloud Storage')") from e
  if not found:
    what = ("is a file, not a directory" if replay_files.path_exists(path)
            else "does not exist")
    raise ValueError(f"--dataset_dir {path} {what} (expected a Dopamine "
                     f"replay_logs directory with $store$_observation_ckpt.N.gz files)")
  # A game folder (<game>/<run>/replay_logs) given for a run's replay_logs: named before
  # any data is read.
  source = replay_source.ReplaySource(path)
  game_folder = source.game_folder_error()
  if game_folder is not None:
    raise ValueError(f"--dataset_dir {game_folder}")
  # A directory without checkpoint files: named before the game's environment starts and the
  # frames are read.
  if not any(replay_files.CKPT_RE.match(n) for n in source.names or ()):
    raise ValueError(f"--dataset_dir {path} holds no Dopamine checkpoint files (expected a "
                     f"replay_logs directory with $store$_observation_ckpt.N.gz files)")




def ccvl_options(cfg: OfflineConfig) -> Dict[str, object]:
  """The CCVL options (agent_options.CCVL_OPTIONS) given as flags."""
  return {k: v for k, v in cfg.agent_values.items() if k in agent_options.CCVL_OPTIONS}


def record(cfg: OfflineConfig) -> Dict[str, object]:
  """The config as summary.json keeps it (diagnose.py reads it back with `from_record`): the
  run's fields, each of the AGENT_FLAGS outside the CCVL options by name (N, M, policy_delta
  in force; a training setting not given: None) and the CCVL options given as
  'ccvl_options'."""
  options = ccvl_options(cfg)
  out = dataclasses.asdict(cfg)
  given = out.pop("agent_values")
  for name in AGENT_FLAGS:
    if name in agent_options.CCVL_SAMPLING:
      out[name] = agent_options.value(given, name)
    elif name not in agent_options.CCVL_OPTIONS:
      out[name] = given.get(name)
  out["ccvl_options"] = options
  return out


def config_from_args(args: Sequence[str]) -> OfflineConfig:
  """The OfflineConfig train_offline.py makes of the command-line flags `args` (parsed on a
  flag set of their own, not the process's): what another process's run was given."""
  fv = absl_flags.FlagValues()
  config_flags.define(OfflineConfig, flag_values=fv)
  agent_options.define_flags(AGENT_FLAGS, flag_values=fv, default_notes=AGENT_FLAG_NOTES)
  try:
    fv(["train_offline.py", *args])
  except absl_flags.Error as e:
    raise ValueError(str(e)) from None
  return config_flags.from_flags(OfflineConfig, flag_values=fv,
                                 agent_values=agent_options.from_flags(AGENT_FLAGS, fv))


# Record fields a run of other flags may differ in and still be the same run's results
# (OfflineConfig's classification, with the reasons beside it).
_NOT_COMPARED = tuple(config_flags.comparison(OfflineConfig).not_compared)


def changed_settings(saved: Mapping[str, object], cfg: OfflineConfig) -> List[str]:
  """'name: recorded -> now' for each setting of the record `saved` (a finished run's
  summary.json 'config') that the run config `cfg` would set otherwise: the CCVL options that
  change what is learned (run_fingerprint.effective_ccvl_options: an explicit default is no change) and every
  other recorded field but those of _NOT_COMPARED."""
  now = record(cfg)
  out = []
  defaults = {f.name: f.default for f in dataclasses.fields(OfflineConfig)}
  for key in sorted(set(saved) | set(now)):
    if key in _NOT_COMPARED:
      continue
    if key not in saved and key in defaults and now.get(key) == defaults[key]:
      continue  # a setting added since the record was written, left at its default
    a, b = saved.get(key), now.get(key)
    if key == "ccvl_options":
      a, b = (run_fingerprint.effective_ccvl_options(a or {}),
              run_fingerprint.effective_ccvl_options(b or {}))
    if isinstance(a, tuple):
      a = list(a)
    if isinstance(b, tuple):
      b = list(b)
    if a != b:
      out.append(f"{key}: {a!r} -> {b!r}")
  return out


def from_record(saved: Dict[str, object]) -> OfflineConfig:
  """The OfflineConfig of a summary.json's 'config' (`record`), for --agent's learner alone
  (runner.saved_plan): the record keeps N, M and policy_delta in force whatever the agent, so
  they are read back only for an agent that takes them (a CQL run's record is not refused for
  CCVL's settings it never used)."""
  fields = {f.name for f in dataclasses.fields(OfflineConfig)}
  spec = agent_registry.AGENT_REGISTRY.get(saved.get("agent"))
  values = {k: v for k, v in saved.items() if k in AGENT_FLAGS and v is not None
            and (k not in agent_options.CCVL_SAMPLING or spec is None or k in spec.takes)}
  values.update(saved.get("ccvl_options") or {})
  return OfflineConfig(agent_values=values,
                       **{k: v for k, v in saved.items() if k in fields})


def default_dataset_spec(cfg: OfflineConfig) -> default_dataset.DefaultDataset:
  """The default dataset of this run (used without --dataset_dir)."""
  return default_dataset.DefaultDataset(
      root_dir=cfg.root_dir, game=cfg.game, steps=cfg.default_dataset_steps,
      policy=cfg.default_dataset_policy, env=cfg.default_dataset_env,
      behaviour_epsilon=cfg.behaviour_epsilon, seed=cfg.seed)


@dataclasses.dataclass(frozen=True)
class AgentPlan:
  """One learner of the run, --agent or one of --reference_agents: its registry entry, its
  training settings in force (the preset's under the flags given: summary.json's 'settings'),
  what its builder takes (AgentSettings holding the agent's own config, e.g. a CCVLConfig, and
  |D| once the data is loaded) and, with the data, its run fingerprint."""
  name: str
  spec: agent_registry.AgentSpec
  overrides: Dict[str, object]
  settings: agent_registry.AgentSettings
  fingerprint: Optional[Dict[str, object]] = None

  @property
  def config(self) -> q_agent_base.CommonQConfig:
    """The agent's own config (CCVLConfig: N, M, alpha, ...; CQLConfig; BCConfig; ...)."""
    return self.settings.agent_config

  def resolved(self) -> Dict[str, object]:
    """What trains this learner, every setting in force (summary.json's 'learner_settings'):
    the agent config's record (CCVL: the reading and its options, the delta head, the count
    estimate's settings), the network's architecture, and the policies' grid and belief
    settings; not only the flags given ('settings', 'config')."""
    s = self.settings
    config = s.agent_config
    network = s.network_config
    return {"agent_config": type(config).__name__ if config is not None else None,
            **(config.record() if config is not None else {}),
            "network": dataclasses.asdict(network) if network is not None else None,
            "num_grid_deltas": s.num_grid_deltas, "belief_temperature": s.belief_temperature,
            "belief_prior": s.belief_prior, "reward_clip": s.reward_clip}

  def build(self, time_step_spec, action_spec, weights_seed: int):
    """The learner, its initial weights a function of `weights_seed` (Seeds.weights)."""
    keras.utils.set_random_seed(weights_seed)
    return self.spec.build(time_step_spec, action_spec, self.settings)


@dataclasses.dataclass(frozen=True)
class RunPlan:
  """An offline run's configuration resolved once (`resolve`): what each stage takes.

  Attributes:
    agent: --agent.
    data: the dataset's settings (dataset.open_dataset).
    loop: the training loop of --agent (root_dir, --num_steps, the intervals).
    learners: --agent's AgentPlan, then each of --reference_agents trained beside it (those
      of another train key), in their order.
    record: the config as summary.json keeps it (`record`; `from_record` reads it back).
    preset_line: the line that starts the run (the preset and the settings it gives).
    config: the OfflineConfig it was resolved from, validated (the run-level settings the
      stages read directly: root_dir, the game, threads, evaluation).
  """
  agent: str
  data: dataset.DataSettings
  loop: training.LoopConfig
  learners: Dict[str, AgentPlan]
  record: Dict[str, object]
  preset_line: str
  config: OfflineConfig

  @property
  def learner(self) -> AgentPlan:
    return self.learners[self.agent]

  def with_dataset(self, identity: Dict[str, object], num_transitions: int,
                   state_batches=None) -> "RunPlan":
    """The plan once the data is loaded: each learner's |D| (`num_transitions`, the frame
    store's), the dataset's states (`state_batches`: dataset.Batches.state_batches, for CCVL's
    exact count Gram) and its run fingerprint (`fingerprint`; `identity`:
    dataset.dataset_identity)."""
    learners = {name: dataclasses.replace(
        plan, settings=dataclasses.replace(plan.settings, dataset_size=float(num_transitions),
                                           state_batches=state_batches),
        fingerprint=run_fingerprint.fingerprint(self.record, plan, identity,
                                                num_transitions))
                for name, plan in self.learners.items()}
    return dataclasses.replace(self, learners=learners)


def resolve(cfg: OfflineConfig) -> RunPlan:
  """The run's configuration, made once from `cfg`: validated; each learner's training
  settings (the preset's under the flags given) and its own config (the agent config's
  defaults, those settings and the agent settings given, the learner's seed), checked against
  the agent's declarations before any data is read or collected; the data's and the training
  loop's settings; the record and the preset line. The one place an offline run's config is
  validated: the stages take the plan, not the config."""
  cfg.validate()
  default, saved = default_dataset_spec(cfg), record(cfg)
  seeds = Seeds(cfg.seed, cfg.eval_seed)
  specs = {name: agent_registry.get_agent_spec(name)
           for name in (cfg.agent,) + tuple(a for a in cfg.reference_agents if a != cfg.agent)}
  overrides = {spec.train_key: presets.resolve(cfg.preset, spec.train_key, cfg.agent_values)
               for spec in specs.values()}
  # The line names every reference agent, also one that shares --agent's learner.
  preset_line = presets.describe(cfg.preset, [s.train_key for s in specs.values()],
                                 cfg.agent_values)
  given = {k: v for k, v in cfg.agent_values.items() if k not in agent_options.TRAINING}
  learners = {}
  for name in specs:
    spec: agent_registry.AgentSpec = specs[name]
    if name != cfg.agent and spec.train_key == specs[cfg.agent].train_key:
      continue  # trained as --agent already
    settings = spec.resolve(agent_registry.AgentSettings(
        network_config=networks.QNetworkConfig(torso="nature"),
        agent_values=dict(given, **overrides[spec.train_key]),
        num_grid_deltas=cfg.num_grid_deltas, belief_temperature=cfg.belief_temperature,
        belief_prior=cfg.belief_prior, reward_clip=1.0, seed=seeds.learner()))
    agent_config: q_agent_base.CommonQConfig = settings.agent_config
    agent_config.validate()  # against the agent's declarations: the preset's values too
    learners[name] = AgentPlan(name=name, spec=spec, overrides=overrides[spec.train_key],
                               settings=settings)
  pool = None
  if cfg.pool_checkpoints:
    pool = dataset.PoolSettings(checkpoints=cfg.pool_checkpoints, swap_steps=cfg.pool_swap_steps,
                                final_draw=max(cfg.num_steps - 1, 0) // cfg.pool_swap_steps)
  data = dataset.DataSettings(
      dataset_dir=cfg.dataset_dir, subset=cfg.subset, batch_size=cfg.batch_size,
      num_deltas=saved["num_deltas"], seeds=seeds, default=default, pool=pool)
  loop = training.LoopConfig(
      root_dir=cfg.root_dir, num_steps=cfg.num_steps, checkpoint_interval=cfg.checkpoint_interval,
      log_interval=cfg.log_interval, summary_interval=cfg.summary_interval,
      eval_interval=cfg.eval_interval)
  return RunPlan(agent=cfg.agent, data=data, loop=loop, learners=learners, record=saved,
                 preset_line=preset_line, config=dataclasses.replace(cfg))
