"""MinAtar offline datasets made the way the DQN Replay Dataset was made.

More in docs/data.md "Module notes", `ccvl_tf/data/minatar_datasets.py`.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from ccvl_tf.runtime import run_settings
from ccvl_tf.runtime.config_flags import setting
from ccvl_tf.data import dqn_replay
from ccvl_tf.data import minatar_dqn
from ccvl_tf.data import replay_files
from ccvl_tf.data import replay_writer
from ccvl_tf.envs import minatar as minatar_env
from ccvl_tf.runtime import strict_json


DEFAULT_STEPS = 100_000
# Games whose DQN needs a longer run to be clearly better than random (docs/minatar.md,
# measured): at 100k steps Asterix's DQN scored 0.30 (random 0.57), Freeway's 0.45 (0.34),
# Seaquest's 0.35 (0.10). These override DEFAULT_STEPS in build_all / the binary.
DEFAULT_GAME_STEPS = {"Asterix": 300_000, "Freeway": 300_000, "Seaquest": 300_000}
DEFAULT_NUM_CHECKPOINTS = 20
EVAL_EPSILON = 0.001          # the paper's / Dopamine's evaluation epsilon
SCORES_FILENAME = "minatar_scores.json"
SUMMARY_FILENAME = "summary.json"
COMPLETE_FILENAME = "COMPLETE"
WEIGHTS_FILENAME = "dqn_q_network.npz"
# name -> (fraction of each checkpoint's slots or None, fraction of checkpoints or None)
SUBSET_FRACTIONS = {
    "1%": (0.01, None),
    "5%": (0.05, None),
    "initial10%": (None, 0.10),
    "all": (None, None),
}



@dataclasses.dataclass(frozen=True)
class BuildConfig:
  """Settings of binaries/make_minatar_datasets.py (its flags, ccvl_tf/runtime/config_flags.py); the
  binary checks them and calls build_all."""
  games: Sequence[str] = setting(tuple(minatar_env.valid_game_names()),
                                 "MinAtar games: " + ", ".join(minatar_env.valid_game_names()),
                                 kind="list", flag_default=minatar_env.valid_game_names())
  steps: int = setting(DEFAULT_STEPS, "Environment steps (= logged transitions) of each DQN "
                       "run, except the games named in --game_steps.")
  game_steps: str = setting(
      ",".join("{}:{}".format(g, n) for g, n in DEFAULT_GAME_STEPS.items()),
      "Per-game overrides of --steps, Game:steps comma-separated ('' = --steps for all). The "
      "default gives the games whose DQN learns slowly a longer run (docs/minatar.md).")
  output_dir: str = setting("", "Root directory of the datasets.", flag_default=None,
                            required=True, output="dir")
  seed: int = run_settings.borrow("seed")  # also the run directory's name
  num_checkpoints: int = setting(DEFAULT_NUM_CHECKPOINTS,
                                 "Dopamine checkpoints per run (DQN Replay: 50).")
  eval_episodes: int = run_settings.borrow("eval_episodes", 20)  # scoring the final DQN
  random_episodes: int = setting(100, "Episodes scoring a random policy.")
  progress_every: int = run_settings.borrow("progress_every", 5_000)
  # One thread is fastest for this tiny network.
  tf_threads: int = run_settings.borrow("tf_threads", 1)

# ----------------------------------------------------------------------- layout

def run_dir(output_dir: str, game: str, seed: int) -> str:
  """``<output_dir>/<Game>/<seed>``: one run (DQN Replay: ``<game>/<run>``)."""
  return os.path.join(output_dir, minatar_env.canonical_game_name(game), str(int(seed)))


def replay_dir(output_dir: str, game: str, seed: int) -> str:
  """The Dopamine checkpoint directory of a run (what FrameStore.from_replay takes)."""
  return os.path.join(run_dir(output_dir, game, seed), "replay_logs")


def is_complete(output_dir: str, game: str, seed: int) -> bool:
  """Whether the run's ``COMPLETE`` marker exists (``output_dir`` local, or remote:
  ``gs://...`` through ``tf.io.gfile``)."""
  return replay_files.path_exists(
      os.path.join(run_dir(output_dir, game, seed), COMPLETE_FILENAME))


def checkpoint_capacity(num_steps: int, num_checkpoints: int) -> int:
  """Slots per checkpoint: ``ceil((num_steps + 1) / K)``. The writer logs a full
  buffer whenever ``add_count % C == C - 1``, so a run of ``num_steps`` adds gives
  K checkpoints (the last one the final, partial buffer unless K divides
  num_steps + 1). At least 2 slots (one transition needs two)."""
  if num_steps < 1 or num_checkpoints < 1:
    raise ValueError("num_steps and num_checkpoints must be >= 1, got {} and {}".format(
        num_steps, num_checkpoints))
  return max(2, int(math.ceil((num_steps + 1) / num_checkpoints)))


def subset_table(capacity: int, num_checkpoints: int) -> Dict[str, list]:
  """The ``"subsets"`` table of ``ccvl_dataset.json`` for a run with checkpoints
  of ``capacity`` slots: {name: [rows per checkpoint or None, number of leading
  checkpoints or None, "prefix"?]} from :data:`SUBSET_FRACTIONS`. Rows are
  ``max(2, round(fraction * capacity))``, checkpoints ``max(1, round(fraction * K))``."""
  table = {}
  for name, (row_frac, ckpt_frac) in SUBSET_FRACTIONS.items():
    rows = None if row_frac is None else min(capacity, max(2, int(round(row_frac * capacity))))
    n_ckpt = None if ckpt_frac is None else max(1, int(round(ckpt_frac * num_checkpoints)))
    table[name] = [rows, n_ckpt] + ([dqn_replay.PREFIX] if rows is not None else [])
  return table


def evaluate(env, act: Callable[[np.ndarray], int], num_episodes: int, *,
             epsilon: float = EVAL_EPSILON, seed: int = 0) -> List[float]:
  """Raw returns of ``num_episodes`` episodes of ``act`` taken epsilon-greedily
  (``act=None``: uniformly random)."""
  rng = np.random.default_rng([int(seed), 3])
  out = []
  for _ in range(num_episodes):
    time_step = env.reset()
    while True:
      if act is None or rng.random() < epsilon:
        a = int(rng.integers(env.num_actions))
      else:
        a = act(time_step.observation)
      time_step = env.step(a)
      if time_step.is_last():
        out.append(float(env.episode_raw_return))
        break
  return out


def random_policy_returns(game: str, num_episodes: int, *, seed: int = 0,
                          **env_kwargs) -> List[float]:
  """Raw returns of a uniformly random policy over the minimal action set (seeded)."""
  env = minatar_env.MinAtarEnvironment(game, seed=seed, **env_kwargs)
  return evaluate(env, None, num_episodes, seed=seed)


def validate_split(game: str, num_steps: int, num_checkpoints: int) -> None:
  """ValueError unless `num_steps` adds fill exactly `num_checkpoints` checkpoints of
  `checkpoint_capacity` slots (too few steps, or a K that the ceil-sized buffers skip)."""
  capacity = checkpoint_capacity(num_steps, num_checkpoints)
  written = int(math.ceil((num_steps + 1) / capacity))
  if written != num_checkpoints:
    fits = [k for k in range(1, num_checkpoints + 1)
            if math.ceil((num_steps + 1) / checkpoint_capacity(num_steps, k)) == k]
    raise ValueError(
        f"{game}: {num_steps} steps give {written} checkpoints of {capacity} slots, not "
        f"--num_checkpoints={num_checkpoints} (each checkpoint holds >= 2 transitions); use "
        f"more steps or --num_checkpoints={fits[-1]}")


# ---------------------------------------------------------------------- building

def _cached_summary(output_dir: str, game: str, seed: int, settings: dict,
                    log: Callable[[str], None]) -> Optional[dict]:
  """The summary of a finished build with the same settings (ValueError naming the directory
  for other settings); None after deleting an interrupted build (no COMPLETE marker)."""
  rdir = run_dir(output_dir, game, seed)
  if is_complete(output_dir, game, seed):
    with open(os.path.join(rdir, SUMMARY_FILENAME)) as f:
      summary = json.load(f)
    if summary.get("settings") != settings:
      diff = sorted(k for k in settings if summary.get("settings", {}).get(k) != settings[k])
      raise ValueError(
          "{} holds a finished {} dataset built with other settings ({}: {} there, {} asked); "
          "use another --output_dir or delete that directory".format(
              rdir, game, ", ".join(diff),
              ", ".join(str(summary.get("settings", {}).get(k)) for k in diff),
              ", ".join(str(settings[k]) for k in diff)))
    log("[{}] cached: {} (COMPLETE)".format(game, rdir))
    summary["cached"] = True
    return summary
  if os.path.isdir(rdir):
    log("[{}] {} has no COMPLETE marker (interrupted build): deleting it and starting "
        "again".format(game, rdir))
    shutil.rmtree(rdir)
  return None


def _summary(settings: dict, rlogs: str, capacity: int, suffixes, train_summary: dict,
             dqn_returns: List[float], rand_returns: List[float], eval_seconds: float,
             t_start: float) -> dict:
  """summary.json of a finished build: settings, layout, scores, the DQN's training curve."""
  game, seed, num_checkpoints = settings["game"], settings["seed"], settings["num_checkpoints"]
  rets = train_summary["episode_returns"]
  tail = rets[-max(1, len(rets) // 10):] if rets else []
  return dict(
      settings=settings, game=game, seed=int(seed), replay_dir=rlogs,
      checkpoint_capacity=capacity, suffixes=suffixes,
      subsets=subset_table(capacity, num_checkpoints),
      dqn_eval_mean=float(np.mean(dqn_returns)), dqn_eval_returns=dqn_returns,
      dqn_eval_epsilon=EVAL_EPSILON,
      random_mean=float(np.mean(rand_returns)), random_returns=rand_returns,
      train_episodes=train_summary["episodes"],
      train_return_first10pct=float(np.mean(rets[:max(1, len(rets) // 10)])) if rets else None,
      train_return_last10pct=float(np.mean(tail)) if tail else None,
      train_episode_returns=rets, train_episode_lengths=train_summary["episode_lengths"],
      updates=train_summary["updates"], losses_every_100_updates=
      train_summary["losses_every_100_updates"],
      dqn_seconds=train_summary["seconds"], eval_seconds=eval_seconds,
      total_seconds=time.time() - t_start,
      dataset_bytes=sum(os.path.getsize(os.path.join(rlogs, n)) for n in os.listdir(rlogs)))


def build_game(output_dir: str, game: str, *, num_steps: int = DEFAULT_STEPS, seed: int = 0,
               num_checkpoints: int = DEFAULT_NUM_CHECKPOINTS, eval_episodes: int = 20,
               random_episodes: int = 100,
               config: minatar_dqn.BehaviourDQNConfig = minatar_dqn.BehaviourDQNConfig(),
               sticky_action_prob: float = minatar_env.STICKY_ACTION_PROB,
               max_episode_steps: int = minatar_env.MAX_EPISODE_STEPS,
               log: Callable[[str], None] = print, progress_every: int = 5_000) -> dict:
  """Builds (or finds cached) the dataset of one game and seed; returns its summary.

  A run directory with a COMPLETE marker is reused if it was built with the same
  settings (else ValueError naming the directory); one without the marker (an
  interrupted build) is deleted and rebuilt from scratch.
  """
  game = minatar_env.canonical_game_name(game)
  if num_steps < 1 or num_checkpoints < 1 or eval_episodes < 1 or random_episodes < 1:
    raise ValueError("steps, num_checkpoints, eval_episodes and random_episodes must be >= 1")
  validate_split(game, num_steps, num_checkpoints)
  rdir = run_dir(output_dir, game, seed)
  settings = dict(game=game, seed=int(seed), steps=int(num_steps),
                  num_checkpoints=int(num_checkpoints), eval_episodes=int(eval_episodes),
                  random_episodes=int(random_episodes),
                  sticky_action_prob=float(sticky_action_prob),
                  max_episode_steps=int(max_episode_steps),
                  dqn_config=dataclasses.asdict(config))
  summary_path = os.path.join(rdir, SUMMARY_FILENAME)
  cached = _cached_summary(output_dir, game, seed, settings, log)
  if cached is not None:
    return cached
  t_start = time.time()
  env_kwargs = dict(sticky_action_prob=sticky_action_prob, max_episode_steps=max_episode_steps,
                    clip_rewards=config.clip_rewards)
  env = minatar_env.MinAtarEnvironment(game, seed=seed, **env_kwargs)
  capacity = checkpoint_capacity(num_steps, num_checkpoints)
  rlogs = replay_dir(output_dir, game, seed)
  writer = replay_writer.DopamineReplayWriter(
      rlogs, replay_capacity=capacity, stack_size=1,
      observation_shape=env.observation_spec().shape,
      metadata=dict(game=game, suite="minatar", num_actions=env.num_actions,
                    action_set=env.action_set, policy="online DQN (epsilon-greedy)",
                    steps=num_steps, seed=seed, sticky_action_prob=sticky_action_prob,
                    max_episode_steps=max_episode_steps, reward_clipping=config.clip_rewards,
                    num_checkpoints=num_checkpoints,
                    subsets=subset_table(capacity, num_checkpoints)))
  log("[{}] online DQN for {} steps ({} actions, observation {}), {} checkpoints of {} "
      "slots -> {}".format(game, num_steps, env.num_actions, list(env.observation_spec().shape),
                           num_checkpoints, capacity, rlogs))

  def _progress(p):
    ret = "-" if p["mean_return"] is None else "{:.2f}".format(p["mean_return"])
    log("[{}] step {}/{}  {:.0f} steps/s  ETA {:.0f}s  episodes {}  mean return (last 20) {}  "
        "epsilon {:.3f}".format(game, p["step"], p["num_steps"], p["steps_per_s"], p["eta_s"],
                                p["episodes"], ret, p["epsilon"]))

  train_summary, agent, greedy = minatar_dqn.run_dqn(env, num_steps, config=config, seed=seed,
                                         writer=writer, progress=_progress,
                                         progress_every=progress_every)
  suffixes = writer.close()
  t_eval = time.time()
  eval_env = minatar_env.MinAtarEnvironment(game, seed=seed + 10_000, **env_kwargs)
  dqn_returns = evaluate(eval_env, greedy, eval_episodes, seed=seed + 10_000)
  rand_returns = random_policy_returns(game, random_episodes, seed=seed + 20_000, **env_kwargs)
  eval_seconds = time.time() - t_eval
  weights = {"{:02d}_{}".format(i, v.name.replace("/", "_").replace(":", "_")): v.numpy()
             for i, v in enumerate(agent._q_network.variables)}  # pylint: disable=protected-access
  np.savez(os.path.join(rdir, WEIGHTS_FILENAME), **weights)
  summary = _summary(settings, rlogs, capacity, suffixes, train_summary, dqn_returns,
                     rand_returns, eval_seconds, t_start)
  with open(summary_path + ".tmp", "w") as f:
    strict_json.dump(summary, f, indent=1)
  os.replace(summary_path + ".tmp", summary_path)
  with open(os.path.join(rdir, COMPLETE_FILENAME), "w") as f:
    f.write("{}\n".format(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
  log("[{}] done in {:.0f}s ({:.0f}s DQN, {:.0f}s scoring): DQN eval return {:.2f} "
      "(epsilon {}), random {:.2f}; {} checkpoints, {:.1f} MB".format(
          game, summary["total_seconds"], summary["dqn_seconds"], eval_seconds,
          summary["dqn_eval_mean"], EVAL_EPSILON, summary["random_mean"], len(suffixes),
          summary["dataset_bytes"] / 1e6))
  summary["cached"] = False
  return summary


def parse_game_steps(text: str) -> Dict[str, int]:
  """``"Asterix:300000,Freeway:300000"`` -> {"Asterix": 300000, "Freeway": 300000}
  (canonical names; ValueError naming the bad entry and the expected form)."""
  out: Dict[str, int] = {}
  for item in [t.strip() for t in text.split(",") if t.strip()]:
    name, sep, value = item.partition(":")
    try:
      steps = int(value)
    except ValueError:
      steps = 0
    if not sep or steps < 1:
      raise ValueError("bad per-game steps {!r}: expected Game:steps with steps an integer "
                       ">= 1, e.g. Asterix:300000".format(item))
    out[minatar_env.canonical_game_name(name.strip())] = steps
  return out


def build_all(output_dir: str, games: Sequence[str], *, log: Callable[[str], None] = print,
              num_steps: int = DEFAULT_STEPS, game_steps: Optional[Dict[str, int]] = None,
              **kwargs) -> Dict[str, dict]:
  """:func:`build_game` for each game (in order), :func:`write_scores` after each one (an
  interrupted build leaves its finished games scored).

  Each game runs for ``game_steps[game]`` steps if given there, else ``num_steps``
  (``game_steps=None``: :data:`DEFAULT_GAME_STEPS`; pass ``{}`` for one length for all)."""
  names = [minatar_env.canonical_game_name(g) for g in games]  # fail fast on a bad name
  per_game = dict(DEFAULT_GAME_STEPS if game_steps is None else
                  {minatar_env.canonical_game_name(g): int(n) for g, n in game_steps.items()})
  k = kwargs.get("num_checkpoints", DEFAULT_NUM_CHECKPOINTS)
  for g in names:  # every game's split checked before any game is built
    validate_split(g, per_game.get(g, num_steps), k)
  out = {}
  for g in names:
    out[g] = build_game(output_dir, g, log=log, num_steps=per_game.get(g, num_steps), **kwargs)
    write_scores(output_dir)
  return out


def write_scores(output_dir: str) -> dict:
  """Collects every finished run's reference scores into ``minatar_scores.json``:
  {"games": {Game: {"dqn": mean over seeds, "random": ..., "runs": {seed: ...}}},
  "normalization": "..."}."""
  games: Dict[str, dict] = {}
  for game in minatar_env.valid_game_names():
    gdir = os.path.join(output_dir, game)
    if not os.path.isdir(gdir):
      continue
    for seed in sorted(os.listdir(gdir)):
      rdir = os.path.join(gdir, seed)
      if not os.path.exists(os.path.join(rdir, COMPLETE_FILENAME)):
        continue
      with open(os.path.join(rdir, SUMMARY_FILENAME)) as f:
        s = json.load(f)
      games.setdefault(game, {"runs": {}})["runs"][seed] = dict(
          dqn=s["dqn_eval_mean"], random=s["random_mean"], steps=s["settings"]["steps"],
          dqn_eval_episodes=len(s["dqn_eval_returns"]),
          random_episodes=len(s["random_returns"]))
  for g in games.values():
    g["dqn"] = float(np.mean([r["dqn"] for r in g["runs"].values()]))
    g["random"] = float(np.mean([r["random"] for r in g["runs"].values()]))
  scores = dict(
      games=games,
      normalization="normalized = (score - random) / (dqn - random): 0 = uniformly random "
                    "policy, 1 = the online DQN that generated the data (its final Q-network, "
                    "epsilon {}), as the Atari tables normalize to Nature DQN".format(
                        EVAL_EPSILON))
  path = os.path.join(output_dir, SCORES_FILENAME)
  os.makedirs(output_dir, exist_ok=True)
  with open(path + ".tmp", "w") as f:
    strict_json.dump(scores, f, indent=1, sort_keys=True)
  os.replace(path + ".tmp", path)
  return scores


def load_scores(output_dir: str) -> Dict[str, Dict[str, float]]:
  """{Game: {"dqn": x, "random": y}} from ``minatar_scores.json``; raises
  FileNotFoundError saying how to make it."""
  path = os.path.join(output_dir, SCORES_FILENAME)
  if not replay_files.path_exists(path):  # local, or remote (gs://...) through tf.io.gfile
    raise FileNotFoundError(
        "{} does not exist; build the MinAtar datasets first: python "
        "binaries/make_minatar_datasets.py --output_dir={}".format(path, output_dir))
  with replay_files.open_binary(path) as f:
    games = json.loads(f.read())["games"]
  return {g: dict(dqn=v["dqn"], random=v["random"]) for g, v in games.items()}
