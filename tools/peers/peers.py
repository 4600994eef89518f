"""A peer library on our data, scored by our evaluation: d3rlpy's DiscreteBC and DiscreteCQL
trained on the demo's default dataset and played in our ALE wrapper with the demo's protocol.

  .venv/bin/python tools/peers/peers.py --work_dir=runs/peers --output_dir=docs/peers

Run with the project's environment (`make venv`). d3rlpy and PyTorch are not dependencies of
the package: they live in their own environment, created on first use from the pinned
tools/peers/requirements.txt (`--peer_venv`, default tools/peers/.venv; about 1.2 GB; on a
machine without a local CPU build of torch, pass `--pip_args="--index-url <a CPU wheel index>"`
so that pip does not fetch a CUDA build). Steps, each skipped when its output exists:

1. the dataset: the demo's default dataset (`experiments/offline/default_dataset.py`, the same
   call and settings as `make demo`: 50,000 transitions of the scripted Breakout player with 25%
   random actions, seed 0) under WORK/default_dataset/<game>;
2. the export: its valid transitions as d3rlpy episodes (peer_data.py), checked bit for bit
   against our frame store's stacks, under WORK/peer_data;
3. training, in the peer environment (d3rlpy_side.py train): each algorithm with d3rlpy's
   defaults for `--steps` gradient steps per `--seeds` training seed, one torch thread;
4. evaluation, in this environment: our `run_episodes` on `AtariEnvironment` with the demo
   table's protocol and episode seeds (`demo_report`: 10 episodes, evaluation epsilon 0.001, at
   most 2,000 agent steps; BC on the seeds of the table's BC row, CQL on its CQL row's, random on
   its random row's as a check), the greedy action coming from d3rlpy_side.py serve;
5. outputs in OUTPUT: episodes.csv (one row per episode: score and agent steps), table.md
   (mean raw score with the 95% bootstrap CI of demo_report.score_row, rliable; peer_table.py),
   run.json (settings, versions, times, the dataset's behaviour score) and log.txt (everything
   printed).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from typing import Callable, Dict, List, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)
if HERE not in sys.path:
  sys.path.insert(0, HERE)

import ccvl_tf  # noqa: E402,F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
from ccvl_tf.runtime import strict_json  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)

import numpy as np  # noqa: E402

import peer_data  # noqa: E402
import peer_table  # noqa: E402

ALGOS = {"bc": "d3rlpy DiscreteBC", "cql": "d3rlpy DiscreteCQL"}
# The demo's reference agents in its results table, in order: their rows' episode seeds.
DEMO_REFERENCE_ORDER = ("bc", "cql")


class Log:
  """Prints and appends to a log file."""

  def __init__(self, path: str):
    self.path = path

  def __call__(self, msg: str) -> None:
    print(msg, flush=True)
    with open(self.path, "a") as f:
      f.write(msg + "\n")


def requirements_path() -> str:
  return os.path.join(HERE, "requirements.txt")


def ensure_peer_venv(venv: str, python: str, pip_args: Sequence[str], log: Log) -> str:
  """The peer environment's python, the environment created (or re-installed when the
  requirements changed) from requirements.txt."""
  with open(requirements_path(), "rb") as f:
    digest = hashlib.sha256(f.read()).hexdigest()
  stamp = os.path.join(venv, ".peers-installed")
  py = os.path.join(venv, "bin", "python")
  if os.path.exists(stamp) and open(stamp).read().strip() == digest:
    return py
  if not os.path.exists(py):
    log(f"Creating the peer environment {venv} with {python}.")
    subprocess.run([python, "-m", "venv", venv], check=True)
  log(f"Installing {requirements_path()} into {venv} (torch, d3rlpy; about 1.2 GB).")
  subprocess.run([py, "-m", "pip", "install", "--disable-pip-version-check", "-q",
                  "-r", requirements_path(), *pip_args], check=True)
  with open(stamp, "w") as f:
    f.write(digest + "\n")
  return py


def demo_config(game: str, work_dir: str, seed: int):
  """The demo's OfflineConfig (train_offline.py's defaults) with another root directory."""
  from ccvl_tf.experiments.offline import config  # pylint: disable=g-import-not-at-top
  return config.OfflineConfig(game=game, root_dir=work_dir, seed=seed)


def ensure_dataset(cfg, log: Log) -> str:
  """The demo's default dataset (collected once, as train_offline.py does)."""
  from ccvl_tf.envs import atari  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline import default_dataset  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline import config  # pylint: disable=g-import-not-at-top
  return default_dataset.ensure_default_dataset(
      config.default_dataset_spec(cfg), lambda seed: atari.AtariEnvironment(cfg.game, seed=seed),
      log)


def ensure_export(replay_dir: str, out_dir: str, game: str, log: Log) -> Dict[str, object]:
  """The exported episodes (peer_data), checked against the frame store; returns info.json."""
  info_path = os.path.join(out_dir, "info.json")
  if os.path.exists(info_path):
    with open(info_path) as f:
      return json.load(f)
  from ccvl_tf.data import frame_store  # pylint: disable=g-import-not-at-top
  from ccvl_tf.envs import atari  # pylint: disable=g-import-not-at-top
  num_actions = atari.AtariEnvironment(game, seed=0).num_actions
  store = frame_store.FrameStore.from_replay(replay_dir, "all", num_actions=num_actions)
  arrays = peer_data.episodes_from_store(store)
  checked = peer_data.check_stacks(store, arrays)
  episodes = int((arrays["terminals"] + arrays["timeouts"]).sum())
  info = {"game": game, "num_actions": num_actions, "replay_dir": replay_dir,
          "transitions": checked, "steps": int(arrays["actions"].size), "episodes": episodes,
          "terminated_episodes": int(arrays["terminals"].sum())}
  peer_data.write(arrays, out_dir, info)
  log(f"Exported {checked} transitions in {episodes} episodes "
      f"({info['terminated_episodes']} terminated) to {out_dir}; every observation and next "
      f"observation equals the frame store's stack.")
  return info


def train(py: str, data_dir: str, algo: str, seed: int, steps: int, out_dir: str,
          log: Log) -> dict:
  """Trains one d3rlpy learner in the peer environment (skipped when its model exists)."""
  record = os.path.join(out_dir, "train.json")
  if not os.path.exists(record):
    log(f"Training {ALGOS[algo]} (seed {seed}, {steps} steps) in the peer environment ...")
    with open(os.path.join(out_dir + ".log"), "w") as f:
      subprocess.run([py, os.path.join(HERE, "d3rlpy_side.py"), "train",
                      f"--data_dir={data_dir}", f"--algo={algo}", f"--seed={seed}",
                      f"--steps={steps}", f"--out_dir={out_dir}"],
                     check=True, stdout=f, stderr=subprocess.STDOUT)
  with open(record) as f:
    rec = json.load(f)
  log(f"{ALGOS[algo]} seed {seed}: {rec['steps']} steps in {rec['train_seconds']:.0f} s; last "
      f"epoch's means (up to 1,000 steps): " + ", ".join(f"{k}={v:.4g}" for k, v in
                                   sorted(rec["last_epoch_metrics"].items())
                                   if not k.startswith("time_")))
  return rec


class ServedPolicy:
  """`time_step -> greedy action` of a d3rlpy model served by d3rlpy_side.py serve."""

  def __init__(self, py: str, model: str):
    self._proc = subprocess.Popen(
        [py, os.path.join(HERE, "d3rlpy_side.py"), "serve", f"--model={model}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

  def __call__(self, time_step) -> int:
    obs = np.ascontiguousarray(np.asarray(time_step.observation)[0], np.uint8)
    if obs.shape != (84, 84, 4):
      raise ValueError(f"expected an [84, 84, 4] observation, got {obs.shape}")
    self._proc.stdin.write(obs.tobytes())
    self._proc.stdin.flush()
    line = self._proc.stdout.readline()
    if not line:
      raise RuntimeError("the d3rlpy policy server stopped (run d3rlpy_side.py serve by hand "
                         "to see why)")
    return int(line)

  def close(self) -> None:
    self._proc.stdin.close()
    self._proc.wait(timeout=60)


def evaluate(make_policy: Callable, cfg, seed: int) -> list:
  """The EpisodeRecords of cfg.eval_episodes episodes with the demo table's protocol and
  `seed`."""
  from ccvl_tf.envs import atari  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline import demo_report  # pylint: disable=g-import-not-at-top
  env_factory = lambda s: atari.AtariEnvironment(cfg.game, seed=s,  # noqa: E731
                                                 max_episode_steps=cfg.eval_max_steps)
  return demo_report.episode_records(make_policy, env_factory, cfg.eval_episodes,
                                     cfg.eval_max_steps, cfg.eval_epsilon, seed)


def model_dir(work_dir: str, algo: str, seed: int, steps: int) -> str:
  return os.path.join(work_dir, f"{algo}_seed{seed}_steps{steps}")


def policy_name(algo: str, seed: int, seeds: Sequence[int]) -> str:
  return ALGOS[algo] + ("" if len(seeds) == 1 else f", training seed {seed}")


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--work_dir", default="runs/peers")
  parser.add_argument("--output_dir", default="runs/peers/out")
  parser.add_argument("--game", default="Breakout")
  parser.add_argument("--algos", default="bc,cql")
  parser.add_argument("--steps", type=int, default=10_000,
                      help="Gradient steps per learner (the demo's: 10,000).")
  parser.add_argument("--seeds", default="0", help="Training seeds, comma-separated.")
  parser.add_argument("--peer_venv", default=os.path.join(HERE, ".venv"))
  parser.add_argument("--python", default="python3.11",
                      help="The interpreter that creates the peer environment.")
  parser.add_argument("--pip_args", default="", help="Extra arguments for pip install.")
  parser.add_argument("--eval_episodes", type=int, default=0,
                      help="Episodes per policy (0: the demo table's, 10).")
  args = parser.parse_args(argv)
  algos = [a for a in args.algos.split(",") if a]
  for a in algos:
    if a not in ALGOS:
      parser.error(f"--algos: unknown {a!r}; valid: {', '.join(ALGOS)}")
  seeds = [int(s) for s in args.seeds.split(",") if s]
  os.makedirs(args.work_dir, exist_ok=True)
  os.makedirs(args.output_dir, exist_ok=True)
  log = Log(os.path.join(args.output_dir, "log.txt"))
  t0 = time.time()
  cfg = demo_config(args.game, args.work_dir, seed=0)
  if args.eval_episodes:
    cfg.eval_episodes = args.eval_episodes
  log(f"Peer comparison: {', '.join(ALGOS[a] for a in algos)}, {args.steps} steps, training "
      f"seeds {seeds}, on the demo's default dataset of {cfg.game}; evaluation as the demo's "
      f"table: {cfg.eval_episodes} episodes, epsilon {cfg.eval_epsilon:g}, at most "
      f"{cfg.eval_max_steps} agent steps.")
  replay_dir = ensure_dataset(cfg, log)
  with open(os.path.join(replay_dir, "COMPLETE")) as f:
    collection = json.load(f)
  data_dir = os.path.join(args.work_dir, "peer_data")
  info = ensure_export(replay_dir, data_dir, cfg.game, log)
  py = ensure_peer_venv(args.peer_venv, args.python, args.pip_args.split(), log)
  records = {}
  for algo in algos:
    for seed in seeds:
      records[(algo, seed)] = train(py, data_dir, algo, seed, args.steps,
                                    model_dir(args.work_dir, algo, seed, args.steps), log)

  from ccvl_tf.data import replay_writer  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline import demo_report  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline.seeds import Seeds  # pylint: disable=g-import-not-at-top
  base = Seeds(cfg.seed).table_eval()
  episodes = []

  def add(policy, algo, seed, env_seed, records):
    episodes.extend({"policy": policy, "algo": algo, "train_seed": seed, "episode": r.episode,
                     "env_seed": env_seed, "raw_score": r.raw_score, "length": r.length}
                    for r in records)
    log(f"{policy}: mean {np.mean([r.raw_score for r in records]):.2f} over {len(records)} "
        f"episodes (scores {', '.join(f'{r.raw_score:g}' for r in records)}; agent steps "
        f"{', '.join(str(r.length) for r in records)})")

  env_seed = base + demo_report.RANDOM_OFFSET
  add("random", "random", "", env_seed, evaluate(lambda env: demo_report.CallablePolicy(
      replay_writer.random_policy(env.num_actions, seed=base)), cfg, env_seed))
  for algo in algos:
    row = DEMO_REFERENCE_ORDER.index(algo)
    env_seed = base + demo_report.policy_offset(row)
    for seed in seeds:
      served = ServedPolicy(py, os.path.join(model_dir(args.work_dir, algo, seed, args.steps),
                                             "model.d3"))
      try:
        played = evaluate(lambda env, p=served: demo_report.CallablePolicy(p), cfg, env_seed)
      finally:
        served.close()
      add(policy_name(algo, seed, seeds), algo, seed, env_seed, played)

  peer_table.write_episodes(os.path.join(args.output_dir, "episodes.csv"), episodes)
  note = (f"{cfg.eval_episodes} episodes per policy, epsilon {cfg.eval_epsilon:g}, at most "
          f"{cfg.eval_max_steps} agent steps per episode; d3rlpy {args.steps} gradient steps "
          f"with its defaults on the demo's default dataset.")
  table = peer_table.render_table(episodes, cfg.game, note)
  with open(os.path.join(args.output_dir, "table.md"), "w") as f:
    f.write(table)
  run = {
      "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + list(sys.argv[1:])),
      "game": cfg.game, "algos": algos, "steps": args.steps, "seeds": seeds,
      "evaluation": {"episodes": cfg.eval_episodes, "epsilon": cfg.eval_epsilon,
                     "max_steps": cfg.eval_max_steps, "seed_base": base},
      "dataset": {"steps": collection.get("steps"), "policy": collection.get("policy"),
                  "behaviour_mean_score": collection.get("behaviour_mean_score"),
                  "behaviour_episodes": len(collection.get("behaviour_episode_scores", [])),
                  **info},
      "training": {f"{a}_seed{s}": {k: r[k] for k in ("train_seconds", "transitions",
                                                      "config", "versions", "threads",
                                                      "last_epoch_metrics")}
                   for (a, s), r in records.items()},
      "wall_seconds": time.time() - t0,
  }
  with open(os.path.join(args.output_dir, "run.json"), "w") as f:
    strict_json.dump(run, f, indent=1)
  log(table.rstrip())
  log(f"Done in {time.time() - t0:.0f} s; outputs in {args.output_dir}.")


if __name__ == "__main__":
  main()
