"""Study 2 of docs/own_data_protocol.md: ccvl_tf and d3rlpy side by side on the reported
vector datasets, every policy scored by our evaluation.

  PYTHONPATH=. .venv/bin/python tools/peers/vector_peers.py --data_dir=runs/gym_datasets \
      --work_dir=runs/vector_peers --output_dir=runs/vector_peers/out

Run with the project's environment; d3rlpy lives in the peer environment (tools/peers/.venv,
made on first use from tools/peers/requirements.txt, as tools/peers/peers.py does). For each
task of --tasks (its dataset DATA/<task>/seed_<dataset_seed>/data.npz with summary.json) and
each training seed of --seeds, every step skipped when its record exists (a rerun resumes):

1. ours: `ccvl_tf.fit` of bc, cql and ccvl at fit's defaults for vector data (MLP 256-256,
   batch --batch_size, --num_steps steps), with its results table (--eval_episodes episodes
   per policy, evaluation epsilon 0, the environment's own episode cap); ccvl's table gives
   CCVL (adaptive) and Fixed-CCVL;
2. d3rlpy: DiscreteBC and DiscreteCQL with d3rlpy's defaults except the number of steps and
   the batch size (ours), trained in the peer environment (d3rlpy_vector.py train);
3. d3rlpy's policies played by our `run_episodes` on the same environment and the same episode
   seeds as our counterpart's row in fit's table (own_data.table_seed(seed, 0)), the greedy
   action coming from d3rlpy_vector.py serve;
4. the speed: steps/s of each library's train step on the first task's data, interleaved
   runs at each thread count of --speed_threads (vector_speed.py compare).

Scores are normalized per task (0 = the dataset's random policy, 100 = its final greedy DQN,
both from summary.json's reference_scores). Outputs in OUTPUT: rows.csv (one row per policy,
task and training seed), table.md (per-task means, IQM with its 95% stratified-bootstrap CI,
the goals, the speed table; vector_table.py), run.json (settings, versions, references,
d3rlpy's configs and layers, times) and log.txt.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent import futures
from typing import Dict, List, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for _p in (ROOT, HERE):
  if _p not in sys.path:
    sys.path.insert(0, _p)

import vector_table  # noqa: E402

TASKS = ("CartPole-v1", "Acrobot-v1", "LunarLander-v3")
OUR_METHODS = ("bc", "cql", "ccvl")
PEER_ALGOS = {"bc": "d3rlpy DiscreteBC", "cql": "d3rlpy DiscreteCQL"}
# Our row in fit's table that meets the same episodes as each d3rlpy algorithm (row 0 of its run).
COUNTERPART_ROW = 0


class Log:
  """Prints and appends to a log file."""

  def __init__(self, path: str):
    self.path = path

  def __call__(self, msg: str) -> None:
    print(msg, flush=True)
    with open(self.path, "a") as f:
      f.write(msg + "\n")


def dataset_dir(data_dir: str, task: str, dataset_seed: int) -> str:
  return os.path.join(data_dir, task, f"seed_{dataset_seed}")


def references(data_dir: str, task: str, dataset_seed: int) -> Dict[str, float]:
  """The dataset's reference scores: random and final_greedy."""
  with open(os.path.join(dataset_dir(data_dir, task, dataset_seed), "summary.json")) as f:
    ref = json.load(f)["reference_scores"]
  return {"random": float(ref["random"]), "final_greedy": float(ref["final_greedy"])}


def check_envs(tasks: Sequence[str]) -> None:
  """Exits with one line unless every task's Gymnasium environment can be made here (before
  any run: LunarLander needs Box2D)."""
  import gymnasium  # pylint: disable=g-import-not-at-top
  for t in tasks:
    try:
      gymnasium.make(t).close()
    except Exception as e:  # pylint: disable=broad-except
      raise SystemExit(f"{t}: the environment cannot be made here ({type(e).__name__}: "
                       f"{str(e).splitlines()[0] if str(e) else ''}); the evaluation needs it")


def read_json(path: str):
  with open(path) as f:
    return json.load(f)


def write_json(path: str, obj) -> None:
  from ccvl_tf.runtime import strict_json  # pylint: disable=g-import-not-at-top
  with open(path + ".tmp", "w") as f:
    strict_json.dump(obj, f, indent=1)
  os.replace(path + ".tmp", path)


def setup_process(threads: int) -> None:
  """This process's TensorFlow: the project's CPU kernels, `threads` intra/inter-op threads,
  only the project's own log lines."""
  from ccvl_tf.experiments import tf_setup  # pylint: disable=g-import-not-at-top
  tf_setup.pin_cpu_kernels()
  from ccvl_tf.runtime import quiet  # pylint: disable=g-import-not-at-top
  quiet.quiet_start()
  from absl import logging  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.ERROR)  # the SavedModel export's notices
  tf_setup.configure_tensorflow(threads, deterministic=False)


# ----------------------------------------------------------------------------------- ours
def ours_unit(unit: Dict[str, object]) -> Dict[str, object]:
  """One `ccvl_tf.fit` run (resumed when its root_dir has one); its table as rows."""
  import ccvl_tf  # pylint: disable=g-import-not-at-top
  t0 = time.time()
  result = ccvl_tf.fit(unit["data"], unit["method"], env=f"gymnasium:{unit['task']}",
                       root_dir=unit["root_dir"], seed=unit["seed"],
                       num_steps=unit["num_steps"], batch_size=unit["batch_size"],
                       eval_episodes=unit["eval_episodes"], log=lambda s: None)
  from ccvl_tf.experiments.fit import own_data  # pylint: disable=g-import-not-at-top
  rows = [{k: v for k, v in r.items() if k != "scores"} | {
      "scores": list(r["scores"]),
      "eval_seed": own_data.table_seed(unit["seed"], i) if r["policy"] != "data (its episodes)"
      else ""} for i, r in enumerate(result.table)]
  s = result.summary
  return {"unit": unit, "rows": rows, "seconds": time.time() - t0,
          "config": s["config"], "network": s["network"], "settings": s["settings"],
          "num_transitions": s["num_transitions"],
          **{k: s[k] for k in ("fixed_delta", "belief_temperature") if k in s}}


def ours_record_path(work_dir: str, task: str, method: str, seed: int) -> str:
  return os.path.join(work_dir, "records", f"ours_{task}_{method}_seed{seed}.json")


def run_ours(units: List[Dict[str, object]], workers: int, threads: int, log) -> None:
  """Runs the units without a record, `workers` processes at a time, each record written as
  its unit ends."""
  todo = [u for u in units if not os.path.exists(u["record"])]
  if not todo:
    return
  log(f"ccvl_tf: {len(todo)} of {len(units)} runs to do ({workers} process(es), "
      f"{threads} TensorFlow thread(s) each).")
  import multiprocessing  # pylint: disable=g-import-not-at-top
  ctx = multiprocessing.get_context("spawn")
  with futures.ProcessPoolExecutor(workers, mp_context=ctx, initializer=setup_process,
                                   initargs=(threads,)) as pool:
    pending = {pool.submit(ours_unit, u): u for u in todo}
    for fut in futures.as_completed(pending):
      rec = fut.result()
      u = rec["unit"]
      write_json(u["record"], rec)
      log(f"ccvl_tf {u['method']} {u['task']} seed {u['seed']}: "
          + ", ".join(f"{r['policy']} {r['mean']:.1f}" for r in rec["rows"])
          + f" ({rec['seconds']:.0f} s)")


# --------------------------------------------------------------------------------- d3rlpy
def peer_model_dir(work_dir: str, task: str, algo: str, seed: int) -> str:
  return os.path.join(work_dir, "d3rlpy", task, algo, f"seed_{seed}")


def train_peer(py: str, data: str, algo: str, seed: int, steps: int, batch_size: int,
               threads: int, out_dir: str, log) -> Dict[str, object]:
  """d3rlpy_vector.py train (skipped when its train.json exists)."""
  record = os.path.join(out_dir, "train.json")
  if not os.path.exists(record):
    os.makedirs(os.path.dirname(out_dir), exist_ok=True)
    with open(out_dir + ".log", "w") as f:
      subprocess.run([py, os.path.join(HERE, "d3rlpy_vector.py"), "train", f"--data={data}",
                      f"--algo={algo}", f"--seed={seed}", f"--steps={steps}",
                      f"--batch_size={batch_size}", f"--threads={threads}",
                      f"--out_dir={out_dir}"], check=True, stdout=f, stderr=subprocess.STDOUT)
    rec = read_json(record)
    log(f"d3rlpy {algo} {os.path.basename(os.path.dirname(os.path.dirname(out_dir)))} seed "
        f"{seed}: {rec['steps']} steps in {rec['train_seconds']:.0f} s")
  return read_json(record)


class ServedPolicy:
  """`time_step -> greedy action` of a d3rlpy model served by d3rlpy_vector.py serve."""

  def __init__(self, py: str, model: str, obs_dim: int):
    self._dim = int(obs_dim)
    self._proc = subprocess.Popen(
        [py, os.path.join(HERE, "d3rlpy_vector.py"), "serve", f"--model={model}",
         f"--obs_dim={self._dim}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

  def __call__(self, time_step) -> int:
    import numpy as np  # pylint: disable=g-import-not-at-top
    obs = np.ascontiguousarray(np.asarray(time_step.observation)[0], np.float32)
    if obs.shape != (self._dim,):
      raise ValueError(f"expected a [{self._dim}] observation, got {list(obs.shape)}")
    self._proc.stdin.write(obs.tobytes())
    self._proc.stdin.flush()
    line = self._proc.stdout.readline()
    if not line:
      raise RuntimeError("the d3rlpy policy server stopped (run d3rlpy_vector.py serve by "
                         "hand to see why)")
    return int(line)

  def close(self) -> None:
    self._proc.stdin.close()
    self._proc.wait(timeout=60)


def evaluate_peer(py: str, model: str, task: str, obs_dim: int, seed: int,
                  episodes: int) -> Dict[str, object]:
  """The d3rlpy policy's row: our run_episodes on fit's environment and episode seeds of our
  counterpart's row (training seed `seed`), with fit's evaluation settings (epsilon 0, the
  environment's own episode cap)."""
  from ccvl_tf.experiments.fit import own_data  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.fit import settings as fit_settings  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline import demo_report  # pylint: disable=g-import-not-at-top
  defaults = fit_settings.FitSettings(root_dir="unused")
  eval_seed = own_data.table_seed(seed, COUNTERPART_ROW)
  served = ServedPolicy(py, model, obs_dim)
  try:
    records = own_data.episodes_in(f"gymnasium:{task}", demo_report.CallablePolicy(served),
                                   episodes, eval_seed, max_steps=defaults.eval_max_steps,
                                   epsilon=defaults.eval_epsilon)
  finally:
    served.close()
  return {"scores": [r.raw_score for r in records], "lengths": [r.length for r in records],
          "eval_seed": eval_seed}


# ---------------------------------------------------------------------------------- rows
def rows_of(records: Sequence[Dict[str, object]], refs: Dict[str, Dict[str, float]]
            ) -> List[Dict[str, object]]:
  """The rows (vector_table.FIELDS) of the ours / d3rlpy records, normalized per task."""
  rows = []
  for rec in records:
    task = rec["task"]
    for r in rec["rows"]:
      if r["policy"] == "data (its episodes)":
        continue
      rows.append({"task": task, "library": rec["library"], "method": rec["method"],
                   "policy": r["policy"], "train_seed": rec["seed"],
                   "eval_seed": r["eval_seed"], "episodes": r["episodes"], "mean": r["mean"],
                   "ci_low": r["ci_low"], "ci_high": r["ci_high"],
                   "normalized": vector_table.normalized(r["mean"], refs[task]["random"],
                                                         refs[task]["final_greedy"])})
  return rows


def versions() -> Dict[str, str]:
  import platform  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_agents  # pylint: disable=g-import-not-at-top
  out = {"python": platform.python_version(), "numpy": np.__version__,
         "tensorflow": tf.__version__, "tf_agents": tf_agents.__version__}
  try:
    out["ccvl_tf_commit"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"],
                                           capture_output=True, text=True).stdout.strip()
  except OSError:
    pass
  return out


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--data_dir", default=os.path.join(ROOT, "runs", "gym_datasets"),
                 help="Where the datasets are: DATA/<task>/seed_<k>/{data.npz,summary.json}.")
  p.add_argument("--tasks", default=",".join(TASKS))
  p.add_argument("--seeds", default="0,1,2,3,4", help="Training seeds, comma-separated.")
  p.add_argument("--dataset_seed", type=int, default=0,
                 help="The datasets' DQN seed (0: the reported datasets).")
  p.add_argument("--num_steps", type=int, default=10_000)
  p.add_argument("--batch_size", type=int, default=64)
  p.add_argument("--eval_episodes", type=int, default=20)
  p.add_argument("--work_dir", default="runs/vector_peers")
  p.add_argument("--output_dir", default="runs/vector_peers/out")
  p.add_argument("--workers", type=int, default=1, help="Processes for our runs.")
  p.add_argument("--threads", type=int, default=1,
                 help="Threads of each training process (TensorFlow, torch).")
  p.add_argument("--speed_threads", default="1,2",
                 help="Thread counts of the speed comparison ('' skips it).")
  p.add_argument("--speed_repeats", type=int, default=3)
  p.add_argument("--speed_steps", type=int, default=1_000)
  p.add_argument("--speed_warmup", type=int, default=200)
  p.add_argument("--peer_venv", default=os.path.join(HERE, ".venv"))
  p.add_argument("--python", default="python3.11",
                 help="The interpreter that creates the peer environment.")
  p.add_argument("--pip_args", default="", help="Extra arguments for pip install.")
  return p.parse_args(argv)


def main(argv=None) -> None:
  args = parse_args(argv)
  from ccvl_tf.experiments import tf_setup  # pylint: disable=g-import-not-at-top
  tf_setup.pin_cpu_kernels()  # before TensorFlow loads here or in a worker
  tasks = [t for t in args.tasks.split(",") if t]
  seeds = [int(s) for s in args.seeds.split(",") if s]
  os.makedirs(os.path.join(args.work_dir, "records"), exist_ok=True)
  os.makedirs(args.output_dir, exist_ok=True)
  log = Log(os.path.join(args.output_dir, "log.txt"))
  t0 = time.time()
  data = {t: os.path.join(dataset_dir(args.data_dir, t, args.dataset_seed), "data.npz")
          for t in tasks}
  missing = [p for p in data.values() if not os.path.exists(p)]
  if missing:
    raise SystemExit(f"missing dataset(s): {', '.join(missing)} (binaries/make_gym_datasets.py "
                     f"makes them)")
  refs = {t: references(args.data_dir, t, args.dataset_seed) for t in tasks}
  check_envs(tasks)
  log(f"Study 2 on {', '.join(tasks)} (dataset seed {args.dataset_seed}), training seeds "
      f"{seeds}, {args.num_steps} steps of batch {args.batch_size}, {args.eval_episodes} "
      f"episodes per policy.")

  import peers  # pylint: disable=g-import-not-at-top
  py = peers.ensure_peer_venv(args.peer_venv, args.python, args.pip_args.split(), log)

  units = [{"task": t, "method": m, "seed": s, "data": data[t], "num_steps": args.num_steps,
            "batch_size": args.batch_size, "eval_episodes": args.eval_episodes,
            "root_dir": os.path.join(args.work_dir, "ours", t, m, f"seed_{s}"),
            "record": ours_record_path(args.work_dir, t, m, s)}
           for t in tasks for s in seeds for m in OUR_METHODS]
  run_ours(units, args.workers, args.threads, log)

  setup_process(args.threads)  # this process evaluates d3rlpy's policies
  import numpy as np  # pylint: disable=g-import-not-at-top
  peer_units = [(t, algo, s) for t in tasks for s in seeds for algo in PEER_ALGOS]
  with futures.ThreadPoolExecutor(args.workers) as pool:  # each a peer-venv process
    trained = pool.map(lambda u: train_peer(
        py, data[u[0]], u[1], u[2], args.num_steps, args.batch_size, args.threads,
        peer_model_dir(args.work_dir, *u), log), peer_units)
    peer_train = {f"{t}/{algo}/seed_{s}": rec for (t, algo, s), rec in zip(peer_units, trained)}
  records = []
  for t in tasks:
    obs_dim = int(np.load(data[t])["observations"].shape[1])
    for s in seeds:
      for algo, name in PEER_ALGOS.items():
        out = peer_model_dir(args.work_dir, t, algo, s)
        path = os.path.join(out, "eval.json")
        if not os.path.exists(path) or read_json(path)["episodes"] != args.eval_episodes:
          played = evaluate_peer(py, os.path.join(out, "model.d3"), t, obs_dim, s,
                                 args.eval_episodes)
          from ccvl_tf.experiments.offline import demo_report  # pylint: disable=g-import-not-at-top
          row = demo_report.score_row(name, played["scores"])
          write_json(path, {"episodes": args.eval_episodes, "row": dict(
              row, eval_seed=played["eval_seed"]), "lengths": played["lengths"]})
          log(f"{name} {t} seed {s}: {row['mean']:.1f} over {args.eval_episodes} episodes")
        records.append({"task": t, "library": "d3rlpy", "method": algo, "seed": s,
                        "rows": [read_json(path)["row"]]})
  ours_records = {}
  for u in units:
    rec = read_json(u["record"])
    ours_records[f"{u['task']}/{u['method']}/seed_{u['seed']}"] = rec
    records.append({"task": u["task"], "library": "ccvl_tf", "method": u["method"],
                    "seed": u["seed"], "rows": rec["rows"]})
  rows = rows_of(records, refs)
  vector_table.write_rows(os.path.join(args.output_dir, "rows.csv"), rows)

  speed = None
  speed_threads = [int(x) for x in args.speed_threads.split(",") if x]
  if speed_threads:
    import vector_speed  # pylint: disable=g-import-not-at-top
    speed_path = os.path.join(args.work_dir, "speed.json")
    speed_settings = {"data": data[tasks[0]], "threads": speed_threads,
                      "repeats": args.speed_repeats, "batch_size": args.batch_size,
                      "warmup": args.speed_warmup, "steps": args.speed_steps}
    if os.path.exists(speed_path) and read_json(speed_path)["settings"] == speed_settings:
      speed = read_json(speed_path)
    else:
      log(f"Speed: {tasks[0]}'s data, threads {speed_threads}, {args.speed_repeats} "
          f"interleaved repeats of {args.speed_warmup} + {args.speed_steps} steps.")
      speed = vector_speed.compare(data[tasks[0]], py, OUR_METHODS, speed_threads,
                                   args.speed_repeats, args.batch_size, args.speed_warmup,
                                   args.speed_steps, log=log)
      speed["settings"] = speed_settings
      write_json(speed_path, speed)

  note = (f"Datasets: {args.data_dir}/<task>/seed_{args.dataset_seed} (transitions an online "
          f"DQN saw while it learned); references (random, final greedy): "
          + "; ".join(f"{t} {r['random']:g}, {r['final_greedy']:g}" for t, r in refs.items())
          + f". Both libraries: {args.num_steps:,} gradient steps of batch {args.batch_size}; "
          f"ours at ccvl_tf.fit's defaults for vector data, d3rlpy at its own defaults "
          f"otherwise. Every policy: {args.eval_episodes} episodes of our evaluation "
          f"(run_episodes, epsilon 0, the environment's own episode cap); d3rlpy's policies "
          f"meet the episode seeds of our counterpart's row. Rows: rows.csv; settings, "
          f"versions and times: run.json.")
  table = vector_table.render(rows, tasks, seeds, note,
                              speed=speed["summary"] if speed else (),
                              speed_table=vector_speed.render(speed["summary"]) if speed else "")
  with open(os.path.join(args.output_dir, "table.md"), "w") as f:
    f.write(table)
  first = next(iter(peer_train.values()))
  run = {
      "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + list(sys.argv[1:])),
      "settings": vars(args), "tasks": tasks, "seeds": seeds, "references": refs,
      "versions": {"ours": versions(), "d3rlpy_side": first["versions"]},
      "ours": {k: {f: r[f] for f in ("seconds", "config", "network", "num_transitions",
                                     "fixed_delta", "belief_temperature") if f in r}
               for k, r in ours_records.items()},
      "d3rlpy": {k: {f: r[f] for f in ("train_seconds", "transitions", "episodes", "config",
                                       "layers", "threads", "last_epoch_metrics")}
                 for k, r in peer_train.items()},
      "speed": speed, "wall_seconds": time.time() - t0,
  }
  write_json(os.path.join(args.output_dir, "run.json"), run)
  log(table.rstrip())
  log(f"Done in {time.time() - t0:.0f} s; outputs in {args.output_dir}.")


if __name__ == "__main__":
  main()
