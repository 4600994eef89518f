"""The default dataset of train_offline.py when no --dataset_dir is given.

`ensure_default_dataset(spec, env_factory)` collects, once, `spec.steps` transitions of the
default behaviour policy (`default_behaviour`: the scripted player of ccvl_tf/envs/scripted.py
where the game has one, mixed with `spec.behaviour_epsilon` uniformly random actions; a
uniformly random policy otherwise) in the Dopamine checkpoint format under
root_dir/default_dataset/<game>, and records the behaviour policy and its episode scores in the
COMPLETE marker. `spec` is a `DefaultDataset` (config.default_dataset_spec makes it from the
flags).

Where the collection runs (`spec.env`): a uniformly random behaviour policy on an
Atari game is collected on `VECTOR_COLLECTION_ENVS` copies of ale_py's vector environment side
by side (ccvl_tf/data/vector_collection.py; 'auto' and 'vector'), the scripted player in one
environment (it reads the ALE RAM, which the vector environment does not expose;
'sequential' for every policy). 'auto' uses a cached dataset whichever way it was collected.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import time
from typing import Optional, Sequence

import ccvl_tf  # noqa: F401

import numpy as np

from ccvl_tf.runtime import run_settings
from ccvl_tf.runtime.config_flags import setting
from ccvl_tf.data import dqn_replay
from ccvl_tf.data import replay_files
from ccvl_tf.data import replay_writer
from ccvl_tf.data import vector_collection
from ccvl_tf.envs import atari
from ccvl_tf.envs import factory
from ccvl_tf.evaluation import atari_vector
from ccvl_tf.envs import scripted
from ccvl_tf.experiments.offline.seeds import Seeds
from ccvl_tf.runtime import strict_json

DEFAULT_DATASET_STEPS = 50_000
# Where the default dataset is collected (OfflineConfig.default_dataset_env; module docstring).
COLLECTION_ENVS = ("auto", "vector", "sequential")
# Copies of the vector environment a random policy's default dataset is collected on; the
# dataset depends on it (not on the number of threads), so it is fixed.
VECTOR_COLLECTION_ENVS = 8
# The scripted behaviour player's probability of a uniformly random action (default dataset).
DEFAULT_BEHAVIOUR_EPSILON = 0.25


# collect_dataset.py's settings of one kind of game only (CollectConfig.check_game_flags).
ATARI_ONLY = ("output_dir", "replay_capacity", "sticky_action_prob", "num_envs")
GYMNASIUM_ONLY = ("output", "epsilon", "max_episode_steps")


@dataclasses.dataclass(frozen=True)
class CollectConfig:
  """Settings of binaries/collect_dataset.py, which collects a DQN Replay-format dataset of an
  Atari game, or an .npz of per-step arrays of a Gymnasium environment ('gymnasium:<EnvId>',
  ccvl_tf/experiments/offline/gym_dataset.py), with a random or SavedModel policy (its flags,
  ccvl_tf/runtime/config_flags.py)."""
  game: str = setting("", "Atari game, e.g. Breakout, or a Gymnasium environment with a "
                      "Discrete action space, e.g. gymnasium:CartPole-v1.", flag_default=None,
                      required=True)
  policy: str = setting("random", "'random' or the directory of a TF-Agents SavedModel policy.")
  steps: int = setting(0, "Agent steps (transitions) to collect.", flag_default=None,
                       required=True, lower_bound=1)
  output_dir: str = setting("", "Atari: directory for the checkpoint files.",
                            flag_default=None, output="dir")
  output: str = setting("", "Gymnasium: the .npz file to write (observations, actions, "
                        "rewards, terminals, timeouts).", flag_default=None, output="file")
  replay_capacity: int = setting(dqn_replay.DQN_REPLAY_CAPACITY,
                                 "Slots per checkpoint (the DQN Replay Dataset: 1,000,000).",
                                 lower_bound=4)
  seed: int = run_settings.borrow("seed")  # the environment's and the random actions'
  sticky_action_prob: float = setting(atari.STICKY_ACTION_PROB, "ALE repeat_action_probability.",
                                      lower_bound=0.0, upper_bound=1.0)
  progress_every: int = run_settings.borrow("progress_every")
  num_envs: int = setting(
      1, "Copies of the game stepped side by side: 1 = one environment; N > 1 = N copies of "
      "ale_py's vector environment (random policy only; whole episodes in the order they end; "
      "another sample of the same policy than N = 1, fixed by --seed and N).", lower_bound=1,
      upper_bound=256)
  epsilon: float = setting(
      0.0, "Gymnasium, with --policy=DIR: the probability of a uniformly random action "
      "instead of the policy's.", lower_bound=0.0, upper_bound=1.0)
  max_episode_steps: Optional[int] = setting(
      None, "Gymnasium: cap on agent steps per episode (default: the registered limit).",
      lower_bound=1)

  @property
  def gymnasium(self) -> bool:
    """Whether the game is a Gymnasium environment ('gymnasium:<EnvId>')."""
    return factory.is_gymnasium(self.game)

  def check_game_flags(self, given: Sequence[str]) -> None:
    """ValueError naming the flag when one of `given` (the flags given) is for the other kind
    of game (ATARI_ONLY, GYMNASIUM_ONLY), a game's output is missing, or --epsilon is given
    without a policy to mix it with."""
    other, kind = ((ATARI_ONLY, "an Atari game") if self.gymnasium
                   else (GYMNASIUM_ONLY, "a Gymnasium environment ('gymnasium:<EnvId>')"))
    for name in other:
      if name in given:
        raise ValueError(f"--{name} is a setting of {kind}; --game={self.game} does not take it")
    if self.gymnasium and not self.output:
      raise ValueError(f"--game={self.game} writes one .npz: give --output=PATH.npz")
    if self.gymnasium and not self.output.endswith(".npz"):
      raise ValueError(f"--output must name an .npz file, got {self.output!r}")
    if not self.gymnasium and not self.output_dir:
      raise ValueError(f"--game={self.game} writes Dopamine replay checkpoints: give "
                       f"--output_dir=DIR")
    if self.epsilon > 0 and self.policy == "random":
      raise ValueError(f"--epsilon={self.epsilon:g} mixes random actions into a --policy=DIR; "
                       f"--policy=random is uniformly random already")


@dataclasses.dataclass(frozen=True)
class DefaultDataset:
  """The default dataset of a run without --dataset_dir: `steps` transitions of `game`'s
  default behaviour policy (`policy`: auto, scripted or random; the scripted player's random
  action probability `behaviour_epsilon`), collected where `env` says (auto, vector or
  sequential), its streams seeded from `seed` (seeds.Seeds), under `out_dir`."""
  root_dir: str
  game: str
  steps: int
  policy: str
  env: str
  behaviour_epsilon: float
  seed: int

  @property
  def out_dir(self) -> str:
    """root_dir/default_dataset/<the game's one spelling> (atari.canonical_game)."""
    return os.path.join(self.root_dir, "default_dataset", atari.canonical_game(self.game))


def default_behaviour(spec: DefaultDataset, env):
  """(name, description, policy callable) of the default dataset's behaviour policy: the
  scripted player of ccvl_tf/envs/scripted.py where the game has one (Breakout), mixed with
  `behaviour_epsilon` uniformly random actions; a uniformly random policy otherwise (or with
  --default_dataset_policy=random)."""
  factory = scripted.scripted_policies().get(env.game)
  if spec.policy == "scripted" and factory is None:
    raise ValueError(f"--default_dataset_policy=scripted: no scripted player for {env.game} "
                     f"(have: {', '.join(scripted.scripted_policies())}); use 'auto' or "
                     f"'random'")
  if spec.policy != "random" and factory is not None:
    eps = spec.behaviour_epsilon
    return (f"scripted_eps{eps:g}",
            f"the scripted {env.game} player (paddle and ball read from the ALE RAM, fires to "
            f"serve, tracks the ball) taking a uniformly random action with probability {eps:g}",
            factory(env, epsilon=eps, seed=Seeds(spec.seed).behaviour_policy()))
  return ("random", "a uniformly random policy" + (
      f" (no scripted player for {env.game})" if factory is None else ""),
          replay_writer.random_policy(env.num_actions,
                                      seed=Seeds(spec.seed).behaviour_policy()))


def collection_env(spec: DefaultDataset, policy_name: str) -> str:
  """'vector' or 'sequential': where a new default dataset of behaviour `policy_name`
  (default_behaviour's name) is collected under `spec.env` (--default_dataset_env).

  Raises:
    ValueError: an unknown --default_dataset_env, or 'vector' for the scripted player or a game
      the vector environment does not run (the message names the flag).
  """
  choice = spec.env
  if choice not in COLLECTION_ENVS:
    raise ValueError(f"--default_dataset_env must be one of {', '.join(COLLECTION_ENVS)}, "
                     f"got {choice!r}")
  possible = policy_name == "random" and atari_vector.use_vector_env(spec.game, "vector")
  if choice == "vector" and not possible:
    raise ValueError(
        f"--default_dataset_env=vector collects a uniformly random policy on an Atari game; "
        f"the default dataset of {spec.game} is {policy_name} (the scripted player reads the "
        f"ALE RAM, which the vector environment does not expose): use auto or sequential, or "
        f"--default_dataset_policy=random")
  return "vector" if possible and choice != "sequential" else "sequential"


def ensure_default_dataset(spec: DefaultDataset, env_factory, log=print) -> str:
  """Collects (once) the default dataset: `spec.steps` transitions of the default behaviour
  policy (`default_behaviour`), in the Dopamine checkpoint format, under `spec.out_dir`.

  The collection is written to a temporary folder beside `spec.out_dir` with its `COMPLETE`
  marker (which also records the behaviour policy and its episode scores) and then renamed
  into place, so `spec.out_dir` is only ever a whole dataset: an interrupted collection leaves
  no half-written one, and a process that collects the same dataset at the same time keeps the
  one renamed first. A cache collected with another policy or size is collected again (and
  replaced once the new one is complete)."""
  out = spec.out_dir
  env = env_factory(seed=Seeds(spec.seed).collection_env())
  name, description, policy = default_behaviour(spec, env)
  where = collection_env(spec, name)
  info = _complete_marker(out)
  if info is not None:
    cached_where = info.get("collection_env", "sequential")
    if _same_collection(info, name, spec):
      score = info.get("behaviour_mean_score")  # null: no episode of the collection ended
      log(f"Using the cached default dataset {out} ({description}, collected {cached_where}; "
          f"behaviour score {'n/a' if score is None else f'{score:.1f}'}).")
      return out
    log(f"The cached default dataset {out} was collected with {info.get('policy', 'random')} "
        f"/ {info.get('steps')} steps / {cached_where}; collecting it again with {name} / "
        f"{spec.steps} steps / {where}.")
  on = (f"{VECTOR_COLLECTION_ENVS} copies of the vector environment" if where == "vector"
        else "one environment")
  log(f"No --dataset_dir given: collecting a default dataset of {spec.steps} "
      f"transitions of {description} in {spec.game} on {on} into {out} (cached for later "
      f"runs). Pass --dataset_dir=<.../replay_logs> to train on the DQN Replay Dataset.")
  parent, base = os.path.split(out)
  os.makedirs(parent, exist_ok=True)
  _remove_leftovers(parent, base)
  tmp = tempfile.mkdtemp(prefix=f".{base}.tmp-{os.getpid()}-", dir=parent)
  try:
    info = _collect(spec, env, policy, name, description, where, tmp, log)
    if not _put_in_place(tmp, out, lambda found: _same_collection(found, name, spec)):
      log(f"Another process put the same default dataset in {out} first; using it.")
    tmp = None
  finally:
    if tmp is not None:  # interrupted or failed: nothing half-written is left in `out`
      shutil.rmtree(tmp, ignore_errors=True)
  return out


def _complete_marker(out: str):
  """The COMPLETE marker of the dataset in `out` (dict), or None when there is none."""
  marker = os.path.join(out, "COMPLETE")
  if not os.path.exists(marker):
    return None
  with open(marker) as f:
    return json.load(f)


def _same_collection(info, name: str, spec: DefaultDataset) -> bool:
  """Whether a COMPLETE marker `info` records the collection `spec` asks for (behaviour
  `name`, steps; 'auto' takes either collection environment)."""
  return (isinstance(info, dict) and info.get("policy", "random") == name
          and info.get("steps") == spec.steps
          and spec.env in ("auto", info.get("collection_env", "sequential")))


def _collect(spec: DefaultDataset, env, policy, name: str, description: str, where: str,
             out: str, log) -> dict:
  """Collects the dataset into `out` (a fresh folder) and writes its COMPLETE marker last;
  returns the marker's record."""
  metadata = dict(game=env.game, num_actions=env.num_actions, action_set=env.action_set,
                  policy=name, steps=spec.steps, seed=spec.seed)
  if where == "vector":
    metadata.update(collection_env=where, num_envs=VECTOR_COLLECTION_ENVS)
  writer = replay_writer.DopamineReplayWriter(out, metadata=metadata)
  every = max(1, spec.steps // 5)

  def progress(p):
    mean = p.get("mean_return")
    log(f"[collect] step {p['step']}/{p['num_steps']}  {p['steps_per_s']:.0f} steps/s  "
        f"ETA {p['eta_s']:.0f}s  episodes {p['episodes']}"
        + (f"  mean score {mean:.1f}" if mean is not None else ""))

  if where == "vector":
    summary = _collect_on_vector_env(spec, env, writer, progress, every)
  else:
    summary = replay_writer.collect(env, policy, spec.steps, writer,
                                    progress=progress, progress_every=every)
  writer.close()
  scores = [float(x) for x in summary["episode_returns"]]
  info = {"steps": spec.steps, "policy": name, "description": description,
          "behaviour_episode_scores": scores,
          "behaviour_mean_score": float(np.mean(scores)) if scores else float("nan"),
          "collection_env": where, "collection_seconds": float(summary["seconds"]),
          "time": time.time()}
  if where == "vector":
    info["num_envs"] = VECTOR_COLLECTION_ENVS
  log(f"Behaviour policy ({name}): mean score {info['behaviour_mean_score']:.1f} over "
      f"{len(scores)} complete episodes of the collection.")
  marker = os.path.join(out, "COMPLETE")
  with open(marker + ".tmp", "w") as f:
    strict_json.dump(info, f, notes={
        "behaviour_mean_score": "undefined: no episode ended during the collection"})
  os.replace(marker + ".tmp", marker)
  return info


def _put_in_place(tmp: str, out: str, same) -> bool:
  """Renames the complete collection `tmp` to `out`; returns False (and removes `tmp`) when
  another process already put a dataset there that `same(its COMPLETE record)` accepts. An
  outdated or incomplete one in `out` is moved aside first and removed after."""
  parent, base = os.path.split(out)
  for _ in range(2):  # a second try when another process renamed its own in between
    if same(_complete_marker(out)):
      shutil.rmtree(tmp, ignore_errors=True)
      return False
    aside = None
    if os.path.lexists(out):
      aside = tempfile.mkdtemp(prefix=f".{base}.old-{os.getpid()}-", dir=parent)
      os.rename(out, os.path.join(aside, base))
    try:
      os.rename(tmp, out)
      for name in os.listdir(out):  # the writer's verification records follow the files
        replay_files.remember_moved(os.path.join(tmp, name), os.path.join(out, name))
      return True
    except OSError:
      if not os.path.isdir(out):
        raise
    finally:
      if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
  raise OSError(f"could not put the default dataset in place at {out}: another process keeps "
                f"replacing it")


def _remove_leftovers(parent: str, base: str) -> None:
  """Removes `.<base>.tmp-<pid>-*` / `.<base>.old-<pid>-*` folders of processes that are gone
  (a collection killed before its rename): never used, only wasted space."""
  for entry in os.listdir(parent):
    for kind in ("tmp", "old"):
      prefix = f".{base}.{kind}-"
      if not entry.startswith(prefix):
        continue
      try:
        pid = int(entry[len(prefix):].split("-")[0])
        os.kill(pid, 0)
        continue  # still running (maybe collecting this very dataset)
      except ProcessLookupError:
        shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)
      except (ValueError, PermissionError, OSError):
        continue


def _collect_on_vector_env(spec: DefaultDataset, env, writer, progress, every) -> dict:
  """The random policy's default dataset on VECTOR_COLLECTION_ENVS copies (the sequential
  environment `env`'s game, step cap and collection seed)."""
  vec = atari_vector.AtariVectorEnvironment(spec.game, VECTOR_COLLECTION_ENVS)
  try:
    return vector_collection.collect_random(
        vec, spec.steps, writer, seed=Seeds(spec.seed).collection_env(),
        progress=progress, progress_every=every)
  finally:
    vec.close()
