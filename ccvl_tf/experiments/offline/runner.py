# Over ~500 lines on purpose: one run's config, its set-up (data, memory limits, learner) and its
# phases in order; the reports and presets it calls are modules of their own.
"""Offline training on Atari (DQN Replay / Dopamine format): data -> learner -> policy -> eval.

More in docs/library.md "Module notes", `ccvl_tf/experiments/offline/runner.py`.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Callable, Dict, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import keras
import numpy as np
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf import belief, networks, policies, rollouts, scores, training
from ccvl_tf.config_flags import setting
from ccvl_tf.data import dqn_replay, frame_store, pipeline, replay_files
from ccvl_tf.envs import atari, atari_vector
from ccvl_tf.experiments import agent_options, agent_registry, tf_setup
from ccvl_tf.experiments.offline import confidence_report, default_dataset, presets
from ccvl_tf.experiments.offline import phase_times
from ccvl_tf.experiments.offline.phase_times import PhaseTimes

# The settings a preset gives and a flag may override (presets.PRESET_FIELDS).
PRESET_FLAGS = presets.PRESET_FIELDS
# The agent settings train_offline.py takes as flags, declared in agents.ccvl_agent.CCVLConfig
# (experiments/agent_options.py); the given ones are OfflineConfig.agent_values.
AGENT_FLAGS = agent_options.TRAINING + agent_options.CCVL_SAMPLING + agent_options.CCVL_OPTIONS

# Their defaults as their help states them: the --preset's where it sets one, else the agent's.
AGENT_FLAG_NOTES = {name: "the --preset's, else {default}" for name in PRESET_FLAGS}


@dataclasses.dataclass(frozen=True)
class Seeds:
  """Every random stream of an offline run, derived from --seed in this one place. The values
  are fixed: checkpoints, run fingerprints and reported scores depend on them."""
  base: int

  def weights(self) -> int:  # the learners' initial weights (keras.utils.set_random_seed)
    return self.base

  def learner(self) -> int:  # the learner's own draws (AgentSettings.seed: its deltas)
    return self.base

  def data_order(self) -> int:  # the training batches
    return self.base

  def probe_env(self) -> int:  # the environment read for the game's specs
    return self.base

  def diagnostics(self) -> int:  # the confidence report's own draws
    return self.base

  def held_out(self) -> int:  # the batches that pick Fixed-CCVL's delta and set the belief
    return self.base + 777

  def diagnostics_held_out(self) -> int:  # the batches of the confidence diagnostics
    return self.base + 778

  def eval_env(self, step: int) -> int:  # the environment of the evaluation at `step`
    return self.base + 10_000 + step

  def eval_episodes(self, step: int) -> int:  # that evaluation's exploration draws
    return self.base + step

  def adaptive_eval(self) -> int:  # the adaptive policy's episodes in the diagnostics
    return self.base + 30_000

  def diagnostics_env(self) -> int:  # the environments of the count diagnostics
    return self.base + 40_000


def parse_reference_agents(text) -> tuple:
  """'bc,cql' -> ('bc', 'cql'); 'none' or '' -> (); unknown names: ValueError listing the
  valid ones."""
  names = [t.strip() for t in str(text).split(",") if t.strip() and t.strip() != "none"]
  for name in names:
    agent_registry.get_agent_spec(name, flag="--reference_agents")
  return tuple(dict.fromkeys(names))


@dataclasses.dataclass(frozen=True)
class DiagnoseConfig:
  """Settings of binaries/diagnose.py (its flags, ccvl_tf/config_flags.py)."""
  root_dir: str = setting(help="A train_offline.py run directory (CCVL).", flag_default=None,
                          required=True)
  episodes: Optional[int] = setting(None, "Evaluation episodes of the adaptive "
                                    "policy for the belief (default: the run's --eval_episodes).")


@dataclasses.dataclass
class OfflineConfig:
  """Settings of one offline run; the `setting` fields are train_offline.py's flags
  (ccvl_tf/config_flags.py).

  The defaults are the CPU demo (`make demo`, about 10 minutes on 2 cores): 10k gradient steps
  on 50k random-policy transitions. The paper's scale (GPU): a DQN Replay run's 1% subset,
  --num_steps=6250000, --eval_max_steps=27000, --eval_episodes=100 (README "Paper scale").
  """
  game: str = setting("Breakout", "Atari game (ALE name, e.g. Breakout, Pong).")
  root_dir: str = setting("runs/breakout",
                          "Run directory: checkpoints, summaries, eval.csv, policies.")
  dataset_dir: Optional[str] = setting(
      None, "Dopamine replay_logs directory of one run (DQN Replay Dataset "
      "layout: <game>/<run>/replay_logs). Default: collect a small one.")
  subset: str = setting("all", "Which part of the dataset to train on.",
                        enum_values=["1%", "5%", "initial10%", "all"])
  agent: str = setting(
      "ccvl", "Which learner (ccvl_tf.experiments.agent_registry): " + "; ".join(
          f"{s.name}: {s.description}" for s in agent_registry.AGENT_REGISTRY.values()
          if s.offline) + ".")
  num_steps: int = setting(10_000, "Gradient steps in total.")
  batch_size: int = setting(32, "Transitions per batch.")
  preset: str = setting(
      "demo", "Training settings of the learners: demo = chosen on development data for the "
      "CPU demo's scale (docs/ablation.md); paper = the paper's Atari settings (Dopamine / "
      "DR3), for 6.25M steps on the DQN Replay Dataset. Flags given explicitly win.",
      enum_values=["demo", "paper"])
  # The agent settings given as flags (AGENT_FLAGS: CCVLConfig fields, the training ones shared
  # by every learner of the run); the --preset's values and the agent's defaults fill the rest.
  agent_values: Dict[str, object] = dataclasses.field(default_factory=dict)
  num_grid_deltas: int = setting(8, "K, the quantized delta grid of the exported policies.",
                                 upper_bound=1024)
  reference_agents: Sequence[str] = setting(
      ("bc", "cql"), "Agents trained beside --agent on the same data, steps and preset, for "
      "the results table (e.g. bc,cql; 'none' for none).", kind="csv",
      parse=lambda text: parse_reference_agents(text))
  belief_temperature: Optional[float] = setting(
      None, "Temperature of the exported adaptive policy's belief update "
      "(default: set from held-out data, 2 x the smallest mean squared "
      "Bellman error over the grid).", lower_bound=1e-12, upper_bound=1e12)
  checkpoint_interval: int = setting(2_500, "Checkpoint every this many steps.")
  log_interval: int = setting(500, "Progress line every N steps.")
  summary_interval: int = setting(100, "TensorBoard scalars every N steps.")
  eval_interval: int = setting(5_000, "Evaluate in the ALE every N steps (0: at the end only).")
  eval_episodes: int = setting(10, "Episodes per evaluation (and per row of the results "
                               "table).")
  # Agent steps per evaluation episode. The paper caps episodes at 27,000 (108k frames); the
  # default here is the CPU demo's 2,000 so that a policy that never serves in Breakout cannot
  # stall the demo. Pass --eval_max_steps=27000 for the paper's protocol.
  eval_max_steps: int = setting(2_000, "Agent-step cap of an evaluation episode.")
  eval_epsilon: float = 0.001
  eval_env: str = setting(
      "vector", "Where the Atari evaluations run: vector = all episodes of an evaluation side "
      "by side in ale_py's AtariVectorEnv, one batched policy call per step, one policy state "
      "(belief) per episode (ccvl_tf/envs/atari_vector.py); sequential = one environment, one "
      "episode after another, one policy state carried across them.",
      enum_values=["vector", "sequential"])
  default_dataset_steps: int = setting(
      default_dataset.DEFAULT_DATASET_STEPS,
      "Size of the default dataset collected without --dataset_dir.")
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
  seed: int = setting(0, "Seed of data order, deltas and evaluation.", lower_bound=0)
  # The trained weights depend on the intra-op thread count, and TensorFlow's default is the
  # number of cores: a fixed count gives one network per seed on machines with other core
  # counts (BUILD.md, "What is and is not bit-reproducible"; tools/determinism_cost.py).
  tf_threads: int = setting(
      2, "TensorFlow intra- and inter-op threads (0: TensorFlow's default, the number of "
      "cores). The trained network depends on it; fixed, the same command gives the same "
      "network on machines with other core counts.", lower_bound=0)
  # Off by default: on CPU op determinism changed no bit at a fixed thread count (BUILD.md,
  # tools/determinism_cost.py); it matters on GPU.
  deterministic: bool = setting(
      False, "tf.config.experimental.enable_op_determinism() before training (GPU kernels; "
      "on CPU results are already deterministic for a fixed thread count).")

  def validate(self):
    agent_registry.get_agent_spec(self.agent)  # unknown names: a ValueError listing the valid ones
    agent_options.validate(self.agent_values)
    if self.subset not in dqn_replay.SUBSETS and self.subset != "all":
      raise ValueError(f"--subset must be one of {', '.join(list(dqn_replay.SUBSETS) + ['all'])}"
                       f", got {self.subset!r}")
    for name in ("num_steps", "batch_size", "num_grid_deltas", "checkpoint_interval",
                 "log_interval", "summary_interval", "eval_episodes", "eval_max_steps",
                 "default_dataset_steps"):
      v = getattr(self, name)
      if int(v) != v or v < 1:
        raise ValueError(f"--{name} must be an integer >= 1, got {v!r}")
    if int(self.eval_interval) != self.eval_interval or self.eval_interval < 0:
      raise ValueError(f"--eval_interval must be an integer >= 0, got {self.eval_interval!r}")
    if self.dataset_dir is None and self.batch_size > self.default_dataset_steps:
      raise ValueError(f"--batch_size={self.batch_size} is larger than the default dataset "
                       f"(--default_dataset_steps={self.default_dataset_steps} transitions)")
    presets.validate(self.preset)
    for name in self.reference_agents:
      agent_registry.get_agent_spec(name, flag="--reference_agents")
    if self.default_dataset_policy not in ("auto", "scripted", "random"):
      raise ValueError(f"--default_dataset_policy must be auto, scripted or random, got "
                       f"{self.default_dataset_policy!r}")
    if self.default_dataset_env not in default_dataset.COLLECTION_ENVS:
      raise ValueError(f"--default_dataset_env must be one of "
                       f"{', '.join(default_dataset.COLLECTION_ENVS)}, got "
                       f"{self.default_dataset_env!r}")
    if not 0.0 <= self.behaviour_epsilon <= 1.0:
      raise ValueError(f"--behaviour_epsilon must be in [0, 1], got {self.behaviour_epsilon!r}")
    atari_vector.use_vector_env(self.game, self.eval_env)  # an unknown --eval_env: ValueError
    if not 0.0 <= self.eval_epsilon <= 1.0:
      raise ValueError(f"--eval_epsilon must be in [0, 1], got {self.eval_epsilon!r}")
    if self.belief_temperature is not None and not (
        np.isfinite(self.belief_temperature) and self.belief_temperature > 0):
      raise ValueError(f"--belief_temperature must be a finite number > 0 (or unset: from the "
                       f"held-out data), got {self.belief_temperature!r}")
    training.check_output_dir(self.root_dir, "--root_dir")
    if self.dataset_dir is not None:
      # Local paths: os.path.isdir; gs://..., ram://...: tf.io.gfile (replay_files.path_isdir).
      try:
        found = replay_files.path_isdir(self.dataset_dir)
      except replay_files.UnreachableError as e:
        cause = e.__cause__ or e
        raise ValueError(f"--dataset_dir {self.dataset_dir} could not be reached "
                         f"({type(cause).__name__}: {replay_files.error_text(cause)}); a gs:// "
                         f"path needs network access and, for a non-public bucket, Google "
                         f"credentials (BUILD.md, 'Reading the DQN Replay Dataset from Google "
                         f"Cloud Storage')") from e
      if not found:
        what = ("is a file, not a directory" if replay_files.path_exists(self.dataset_dir)
                else "does not exist")
        raise ValueError(f"--dataset_dir {self.dataset_dir} {what} (expected a Dopamine "
                         f"replay_logs directory with $store$_observation_ckpt.N.gz files)")


def evaluate_atari(cfg: OfflineConfig, policy, env_seed: int, seed: int):
  """cfg.eval_episodes EpisodeRecords of `policy` in cfg.game (epsilon cfg.eval_epsilon, at
  most cfg.eval_max_steps agent steps each): on the vector environment seeded `env_seed`, or
  sequentially in one environment seeded `env_seed` with the epsilon RNG seeded `seed`
  (--eval_env)."""
  if atari_vector.use_vector_env(cfg.game, cfg.eval_env):
    return atari_vector.evaluate_atari(policy, cfg.game, cfg.eval_episodes, seed=env_seed,
                                       epsilon=cfg.eval_epsilon,
                                       max_episode_steps=cfg.eval_max_steps)
  env = atari.AtariEnvironment(cfg.game, seed=env_seed, max_episode_steps=cfg.eval_max_steps)
  return rollouts.run_episodes(
      policy, env, cfg.eval_episodes, epsilon=cfg.eval_epsilon, seed=seed,
      raw_score_fn=lambda e: e.episode_raw_return,
      max_total_steps=cfg.eval_episodes * (cfg.eval_max_steps + 2))


def _confidence_diagnostics(cfg: OfflineConfig, run_setup: "Setup", exports, log,
                            timer: Optional[PhaseTimes] = None) -> Dict[str, object]:
  """The confidence diagnostics at the end of a CCVL run: the delta family, the count estimate
  (dataset vs random-policy and pixel-shuffled frames) and the belief over an evaluation of the
  adaptive policy (--eval_episodes episodes); files in root_dir/diagnostics, headline numbers
  in summary.json and TensorBoard (diagnostics/*), and the adaptive policy's episode scores
  under 'adaptive_episode_scores'."""
  seeds, agent, store = Seeds(cfg.seed), run_setup.agent, run_setup.store
  adaptive = exports.get("policy_adaptive", exports["policy"])
  with phase_times.phase(timer,
                         "evaluation: CCVL (adaptive), for the diagnostics and the table"):
    records = evaluate_atari(cfg, rollouts.CompiledPolicy(adaptive), seeds.adaptive_eval(),
                             seeds.adaptive_eval())
  held_out = lambda: pipeline.transition_dataset(store, cfg.batch_size,
                                                 seed=seeds.diagnostics_held_out()).take(8)
  out = confidence_report.report(
      agent, held_out, belief.delta_grid(run_setup.settings.num_grid_deltas),
      os.path.join(cfg.root_dir, "diagnostics"),
      env_factory=lambda: atari.AtariEnvironment(cfg.game, seed=seeds.diagnostics_env(),
                                                 max_episode_steps=cfg.eval_max_steps),
      records=records, seed=seeds.diagnostics(), log=log)
  summary = dict(out["summary"], adaptive_mean_raw_score=float(
      np.mean([r.raw_score for r in records])))
  writer = tf.summary.create_file_writer(os.path.join(cfg.root_dir, "summaries"))
  with writer.as_default():
    for k, v in summary.items():
      tf.summary.scalar(f"diagnostics/{k}", v, step=int(agent.train_step_counter.numpy()))
  writer.flush()
  summary["adaptive_episode_scores"] = [float(r.raw_score) for r in records]
  return summary


# What the learned function depends on (the run fingerprint): these OfflineConfig fields, N,
# M and policy_delta in force, the CCVL options given, and the preset's training settings
# under the flags given; the others (num_steps, intervals, evaluation settings, root_dir) may
# change between resumes.
FINGERPRINT_FIELDS = ("game", "agent", "subset", "batch_size", "num_deltas",
                      "num_pairs", "policy_delta", "seed", "ccvl_options",
                      "default_dataset_steps", "default_dataset_policy", "behaviour_epsilon")


def ccvl_value(cfg: OfflineConfig, name: str):
  """The CCVLConfig setting `name` of this run: given as a flag, else CCVLConfig's default."""
  return agent_options.value(cfg.agent_values, name)


def ccvl_options(cfg: OfflineConfig) -> Dict[str, object]:
  """The CCVL options (agent_options.CCVL_OPTIONS) given as flags."""
  return {k: v for k, v in cfg.agent_values.items() if k in agent_options.CCVL_OPTIONS}


def record(cfg: OfflineConfig) -> Dict[str, object]:
  """The config as summary.json keeps it (diagnose.py reads it back with `from_record`): the
  run's fields, each of the AGENT_FLAGS outside the CCVL options by name (N, M, policy_delta
  in force; a training setting not given: None) and the CCVL options given as
  'ccvl_options'."""
  out = dataclasses.asdict(cfg)
  given = out.pop("agent_values")
  for name in AGENT_FLAGS:
    if name in agent_options.CCVL_SAMPLING:
      out[name] = ccvl_value(cfg, name)
    elif name not in agent_options.CCVL_OPTIONS:
      out[name] = given.get(name)
  out["ccvl_options"] = ccvl_options(cfg)
  return out


def from_record(saved: Dict[str, object]) -> OfflineConfig:
  """The OfflineConfig of a summary.json's 'config' (`record`)."""
  fields = {f.name for f in dataclasses.fields(OfflineConfig)}
  values = {k: v for k, v in saved.items() if k in AGENT_FLAGS and v is not None}
  values.update(saved.get("ccvl_options") or {})
  return OfflineConfig(agent_values=values,
                       **{k: v for k, v in saved.items() if k in fields})


def agent_overrides(cfg: OfflineConfig, agent: str) -> Dict[str, object]:
  """The training settings of `agent` in this run: the preset's, under the flags given."""
  return presets.resolve(cfg.preset, agent_registry.get_agent_spec(agent).train_key,
                         {k: cfg.agent_values.get(k) for k in PRESET_FLAGS})


def dataset_identity(replay_dir: str) -> Dict[str, object]:
  """Path, and a hash of the replay directory's listing (file names and sizes) and of its
  small metadata files, so that another dataset in the same place is noticed without reading
  the data itself."""
  h = hashlib.sha256()
  remote = replay_files.is_remote(replay_dir)
  names = sorted(replay_files.list_dir(replay_dir)) if replay_files.path_isdir(replay_dir) else []
  for name in names:
    path = (replay_dir.rstrip("/") + "/" + name) if remote else os.path.join(replay_dir, name)
    try:
      size = replay_files.file_stat(path)[0]
    except Exception:  # pylint: disable=broad-except
      size = -1  # a sub-directory or an unreadable entry: the name still counts
    h.update(f"{name}:{size}\n".encode())
    if not remote and name.endswith(".json") and 0 <= size < 1_000_000:
      with open(path, "rb") as f:
        h.update(f.read())
  return {"path": replay_dir if remote else os.path.abspath(replay_dir), "files": len(names),
          "listing_sha256": h.hexdigest()[:16]}


def run_fingerprint(cfg: OfflineConfig, replay_dir: str, store,
                    agent: Optional[str] = None) -> Dict[str, object]:
  """What the checkpoints of this run (or of its reference `agent`) were trained on
  (training.check_fingerprint): the learned function's settings, with the preset resolved."""
  saved = record(cfg)
  out = {k: saved[k] for k in FINGERPRINT_FIELDS}
  if agent is not None:
    out["agent"] = agent
  out.update(agent_overrides(cfg, out["agent"]))  # alpha, learning_rate, ... in force
  out["preset"] = cfg.preset
  out["ccvl_options"] = dict(sorted(saved["ccvl_options"].items()))
  out["dataset"] = dataset_identity(replay_dir)
  out["num_transitions"] = int(store.num_transitions)
  return out


def build_agent(cfg: OfflineConfig, agent: str, store, time_step_spec, action_spec):
  """(learner, AgentSettings) of `agent` for this run: the Nature torso, the preset's training
  settings under the flags given, initial weights a function of --seed."""
  keras.utils.set_random_seed(Seeds(cfg.seed).weights())  # initial weights: --seed's
  given = {k: v for k, v in cfg.agent_values.items() if k not in PRESET_FLAGS}
  settings = agent_registry.AgentSettings(
      network_config=networks.QNetworkConfig(torso="nature"),
      dataset_size=float(store.num_transitions),
      agent_values=dict(given, **agent_overrides(cfg, agent)),
      num_grid_deltas=cfg.num_grid_deltas, belief_temperature=cfg.belief_temperature,
      reward_clip=1.0, seed=Seeds(cfg.seed).learner())
  return agent_registry.get_agent_spec(agent).build(time_step_spec, action_spec, settings), settings


# Memory a train step holds per transition beside the frame store: the batches in flight in
# the input pipeline and the step's float32 copies, activations and gradients, in stacked
# uint8 observations, plus the delta-conditioned head's share per sampled delta; and a fixed
# part (networks, traced steps, the evaluation environment). Peak RSS measured on CPU with
# the Nature torso: CCVL (N = 8) 29 observations per transition at batch 512-2048, BC 26;
# CCVL at N = 128, batch 256: 19 KB per delta and transition.
TRAIN_STEP_OBSERVATIONS = 30
TRAIN_STEP_BYTES_PER_DELTA = 20_000
TRAIN_STEP_FIXED_BYTES = 500_000_000


def training_reserve(cfg: OfflineConfig, observation_shape):
  """The frame store's `Reserve` of a run: the memory of training on --batch_size batches of
  `observation_shape` states, and at least --batch_size transitions in the dataset."""
  num_deltas = ccvl_value(cfg, "num_deltas")
  per = (int(np.prod(observation_shape)) * TRAIN_STEP_OBSERVATIONS
         + num_deltas * TRAIN_STEP_BYTES_PER_DELTA)
  return frame_store.Reserve(
      nbytes=cfg.batch_size * per + TRAIN_STEP_FIXED_BYTES,
      what=f"--batch_size={cfg.batch_size} (about {per / 1e6:.2f} MB per transition in a "
           f"train step, --num_deltas={num_deltas})",
      min_transitions=cfg.batch_size)


@dataclasses.dataclass
class Setup:
  """The data and the (fresh) learner of an offline run."""
  game: str                   # the ALE name
  replay_dir: str
  store: frame_store.FrameStore
  spec: agent_registry.AgentSpec
  settings: agent_registry.AgentSettings
  agent: object               # the learner (agents/learner.py)
  time_step_spec: object
  action_spec: object


def setup(cfg: OfflineConfig, log: Callable[[str], None], collect: bool = True,
          timer: Optional[PhaseTimes] = None) -> Setup:
  """The dataset (collected first when there is none and `collect`) and the learner of
  --agent; shared by run() and diagnose()."""
  atari.check_game(cfg.game)  # unknown names: a ValueError listing the valid ones
  env_factory = lambda seed: atari.AtariEnvironment(cfg.game, seed=seed)
  probe = env_factory(Seeds(cfg.seed).probe_env())
  num_actions = probe.num_actions
  reserve = training_reserve(cfg, probe.observation_spec().shape)
  reserve.check(None)  # memory for the batches alone: before any data is read or collected
  if cfg.dataset_dir:
    replay_dir = cfg.dataset_dir
  elif collect:
    with phase_times.phase(timer, "collection of the default dataset"):
      replay_dir = default_dataset.ensure_default_dataset(cfg, env_factory, log)
  else:
    replay_dir = os.path.join(cfg.root_dir, "default_dataset", cfg.game)
  log(f"Loading {replay_dir} (subset {cfg.subset}) ...")
  # Progress: the files verified on first use, each checkpoint loaded; remote datasets also
  # what is streamed and whether the local frame-store cache is used.
  with phase_times.phase(timer, "frame store"):
    store = frame_store.FrameStore.from_replay(replay_dir, cfg.subset, num_actions=num_actions,
                                               progress=log, reserve=reserve)
  log(f"Frame store: {store.num_transitions} transitions, {store.num_frames} frames, "
      f"{store.nbytes / 2**20:.1f} MiB ({store.bytes_per_transition:.0f} bytes/transition).")

  obs_spec = tensor_spec.from_spec(probe.observation_spec())
  action_spec = tensor_spec.from_spec(probe.action_spec())
  time_step_spec = ts.time_step_spec(obs_spec)
  spec = agent_registry.get_agent_spec(cfg.agent)
  agent, settings = build_agent(cfg, cfg.agent, store, time_step_spec, action_spec)
  return Setup(game=probe.game, replay_dir=replay_dir, store=store, spec=spec,
               settings=settings, agent=agent, time_step_spec=time_step_spec,
               action_spec=action_spec)


def training_batches(cfg: OfflineConfig, store) -> Callable:
  """start batch -> the training batches from there (the learner's and the reference agents')."""
  return lambda start: pipeline.transition_dataset(store, cfg.batch_size,
                                                   seed=Seeds(cfg.seed).data_order(),
                                                   start_batch=start)


def held_out_batches(cfg: OfflineConfig, store):
  """The 8 batches that pick Fixed-CCVL's delta and the belief's temperature (a pipeline seed
  the training never used; with the small default dataset these transitions were seen in
  training too)."""
  return pipeline.transition_dataset(store, cfg.batch_size,
                                     seed=Seeds(cfg.seed).held_out()).take(8)


def diagnose(root_dir: str, episodes: Optional[int] = None,
             log: Callable[[str], None] = print) -> Dict[str, float]:
  """binaries/diagnose.py: the confidence diagnostics of a finished (or interrupted)
  train_offline CCVL run, from its summary.json and latest checkpoint; writes
  root_dir/diagnostics and returns the headline numbers."""
  path = os.path.join(root_dir, "summary.json")
  if not os.path.exists(path):
    raise ValueError(f"--root_dir {root_dir} has no summary.json: not a finished "
                     f"train_offline.py run directory")
  with open(path) as f:
    saved = json.load(f)
  cfg = from_record(saved["config"])
  cfg.root_dir = root_dir
  if episodes is not None:
    cfg.eval_episodes = int(episodes)
  if agent_registry.get_agent_spec(cfg.agent).train_key != "ccvl":
    raise ValueError(f"{root_dir} is a run of --agent={cfg.agent}; the confidence "
                     f"diagnostics need a CCVL run (--agent=ccvl or fixed_ccvl)")
  run_setup = setup(cfg, log, collect=False)
  agent = run_setup.agent
  ckpt_dir = os.path.join(root_dir, "checkpoints")
  latest = tf.train.latest_checkpoint(ckpt_dir)
  if latest is None:
    raise ValueError(f"no checkpoint under {ckpt_dir}")
  agent.make_checkpoint().restore(latest).assert_existing_objects_matched()
  log(f"Restored {latest}.")
  exports, _ = run_setup.spec.policies(agent, run_setup.time_step_spec, run_setup.action_spec,
                                       held_out_batches(cfg, run_setup.store),
                                       run_setup.settings)
  summary = _confidence_diagnostics(cfg, run_setup, exports, log)
  summary.pop("adaptive_episode_scores", None)
  return summary


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


def run(cfg: OfflineConfig, log: Callable[[str], None] = print) -> Trained:
  """The offline run: data -> learner -> training -> exported policies -> diagnostics, and
  summary.json."""
  cfg.validate()
  _configure_tensorflow(cfg, log)
  os.makedirs(cfg.root_dir, exist_ok=True)
  names = (cfg.agent,) + tuple(a for a in cfg.reference_agents if a != cfg.agent)
  log(presets.describe(cfg.preset, [agent_registry.get_agent_spec(n).train_key for n in names],
                       {k: cfg.agent_values.get(k) for k in PRESET_FLAGS}))
  timer = PhaseTimes()
  run_setup = setup(cfg, log, timer=timer)
  result = _train(cfg, run_setup, log, timer)
  exports, extra, dirs = _export(cfg, run_setup, result["checkpoint"], log, timer)
  adaptive_scores = None
  if run_setup.spec.train_key == "ccvl":
    with timer.phase("diagnostics"), training.writing(
        os.path.join(cfg.root_dir, "diagnostics"), result["checkpoint"]):
      diag = _confidence_diagnostics(cfg, run_setup, exports, log, timer)
    adaptive_scores = diag.pop("adaptive_episode_scores")
    extra = dict(extra, diagnostics=diag)
  summary = dict(game=run_setup.game, agent=cfg.agent, dataset_dir=run_setup.replay_dir,
                 subset=cfg.subset, num_transitions=int(run_setup.store.num_transitions),
                 step=result["step"], resumed_from=result["resumed_from"],
                 last_metrics=result["last_metrics"], last_eval=result["last_eval"],
                 checkpoint=result["checkpoint"], policy_dir=dirs["policy"],
                 fixed_policy_dir=dirs.get("policy_fixed"), exported_policies=dirs,
                 config=record(cfg), settings=agent_overrides(cfg, cfg.agent),
                 **extra, phase_times=timer.as_dict())
  write_summary(cfg, summary, result["checkpoint"])
  return Trained(setup=run_setup, summary=summary, exports=exports,
                 adaptive_episode_scores=adaptive_scores, checkpoint=result["checkpoint"],
                 timer=timer)


def _configure_tensorflow(cfg: OfflineConfig, log) -> None:
  threads = tf_setup.configure_tensorflow(cfg.tf_threads, cfg.deterministic, log)
  log(f"TensorFlow threads: {threads['tf_threads'] or 'the number of cores'} (--tf_threads)"
      + (", op determinism on" if cfg.deterministic else "")
      + f"; CPU kernels: {tf_setup.cpu_kernels_in_force()}.")


def _train(cfg: OfflineConfig, run_setup: Setup, log,
           timer: Optional[PhaseTimes] = None) -> Dict[str, object]:
  """training.train on --num_steps batches, evaluating in the ALE every --eval_interval."""
  seeds = Seeds(cfg.seed)
  # policy.action traced once (tf.function) instead of running eagerly: ~5x faster per step.
  compiled_policy = rollouts.CompiledPolicy(run_setup.agent.policy)

  def evaluate(step):
    with phase_times.phase(timer, f"evaluation during training, step {step}"):
      records = evaluate_atari(cfg, compiled_policy, seeds.eval_env(step),
                               seeds.eval_episodes(step))
    raw_scores = np.array([r.raw_score for r in records])
    out = {"mean_raw_score": float(raw_scores.mean()), "mean_length": float(
        np.mean([r.length for r in records]))}
    try:
      out["normalized_score"] = float(np.mean(scores.normalized_score(run_setup.game,
                                                                      raw_scores)))
    except ValueError:
      pass  # a game without published reference scores
    return out

  loop = training.LoopConfig(
      root_dir=cfg.root_dir, num_steps=cfg.num_steps, checkpoint_interval=cfg.checkpoint_interval,
      log_interval=cfg.log_interval, summary_interval=cfg.summary_interval,
      eval_interval=cfg.eval_interval)
  with phase_times.phase(timer, f"training {cfg.agent}"):
    return training.train(run_setup.agent, training_batches(cfg, run_setup.store), loop,
                          evaluate=evaluate, log=log,
                          fingerprint=run_fingerprint(cfg, run_setup.replay_dir,
                                                      run_setup.store),
                          allow_config_change=cfg.allow_config_change)


def _export(cfg: OfflineConfig, run_setup: Setup, last_good: str, log,
            timer: Optional[PhaseTimes] = None):
  """(exports, extra, dirs): the agent's policies (agent registry; Fixed-CCVL's delta is the
  lowest Bellman error on the held-out batches) as SavedModels in root_dir/<export name>."""
  agent = run_setup.agent
  with phase_times.phase(timer, "export (policies, Fixed-CCVL's delta)"):
    exports, extra = run_setup.spec.policies(agent, run_setup.time_step_spec,
                                             run_setup.action_spec,
                                             held_out_batches(cfg, run_setup.store),
                                             run_setup.settings)
  if "fixed_delta" in extra:
    log(f"Fixed-CCVL delta (lowest held-out Bellman error on the grid): "
        f"{extra['fixed_delta']:.3f}")
  dirs = {}
  for export_name, policy in exports.items():
    dirs[export_name] = os.path.join(cfg.root_dir, export_name)
    with phase_times.phase(timer, "export (policies, Fixed-CCVL's delta)"), training.writing(
        dirs[export_name], last_good):
      policies.export_policy(policy, dirs[export_name], train_step=agent.train_step_counter)
  log("Exported SavedModels: " + ", ".join(f"{d} ({n})" for n, d in dirs.items()) + ".")
  return exports, extra, dirs


def write_summary(cfg: OfflineConfig, summary: Dict[str, object], last_good: str) -> None:
  """root_dir/summary.json, replaced at once (a failed write names the last good checkpoint)."""
  path = os.path.join(cfg.root_dir, "summary.json")
  with training.writing(path, last_good, [path + ".tmp"]):
    with open(path + ".tmp", "w") as f:
      json.dump(summary, f, indent=2, default=float)
    os.replace(path + ".tmp", path)
