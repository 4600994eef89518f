"""Steps per second of our train step against d3rlpy's on vector data, on the same cores.

  PYTHONPATH=. .venv/bin/python tools/peers/vector_speed.py compare --data=X.npz \
      --methods=bc,cql,ccvl --threads=1,2 --repeats=3 --out=speed.json
      interleaved runs (ours, d3rlpy's, ours, d3rlpy's, ...), each in a fresh process with the
      thread count set, so that the machine's load falls on both alike; the medians, their
      ratio (ours / d3rlpy's) and the load average around each run.
  PYTHONPATH=. .venv/bin/python tools/peers/vector_speed.py ours --data=X.npz --method=bc \
      --threads=1
      one timing of our learner (one JSON line).

Our step: the batch of `Transitions.batches` (what `ccvl_tf.fit` trains on), then the learner's
`train_on_batch`, the learner built as `ccvl_tf.fit` builds it (fit's defaults for vector data:
MLP torso 256-256, batch 64). d3rlpy's step: a batch from its replay buffer, then `update`
(d3rlpy_vector.py time), its defaults except the batch size. Both: warm-up steps, then timed
steps.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Dict, List, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# d3rlpy's counterpart of each of our methods (ccvl has none: timed on our side only).
PEER_ALGO = {"bc": "bc", "cql": "cql"}


def time_ours(data_path: str, method: str, threads: int, batch_size: int, warmup: int,
              steps: int, seed: int = 0) -> Dict[str, object]:
  """One timing of our learner in this process (TensorFlow must not have started)."""
  if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
  from ccvl_tf.experiments import tf_setup  # pylint: disable=g-import-not-at-top
  tf_setup.pin_cpu_kernels()
  from ccvl_tf.runtime import quiet  # pylint: disable=g-import-not-at-top
  quiet.quiet_start()
  import ccvl_tf  # noqa: F401  pylint: disable=g-import-not-at-top
  import keras  # pylint: disable=g-import-not-at-top
  tf_info = tf_setup.configure_tensorflow(threads, deterministic=False)
  from ccvl_tf.experiments.fit import own_data  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.fit import settings as fit_settings  # pylint: disable=g-import-not-at-top
  data = ccvl_tf.Transitions.from_npz(data_path)
  settings = fit_settings.FitSettings(root_dir="unused", seed=seed, batch_size=batch_size)
  run = own_data.plan(data, method, None, settings, {})
  keras.utils.set_random_seed(seed)
  learner = run.spec.build(run.time_step_spec, run.action_spec, run.agent_settings)
  batches = data.batches(batch_size, seed)
  for _ in range(warmup):
    learner.train_on_batch(next(batches))
  t0 = time.perf_counter()
  for _ in range(steps):
    metrics = learner.train_on_batch(next(batches))
  float(next(iter(metrics.values())))  # the last step's values computed
  seconds = time.perf_counter() - t0
  return {"library": "ccvl_tf", "algo": method, "threads": threads,
          "tf_threads": tf_info["tf_threads"], "batch_size": batch_size, "warmup": warmup,
          "steps": steps, "seconds": seconds, "steps_per_s": steps / seconds,
          "torso": run.agent_settings.network_config.torso,
          "mlp_units": list(run.agent_settings.network_config.mlp_units),
          "layers": {"online_network": [f"{v.shape[0]}->{v.shape[1]}" for v in
                                        learner.online_network.trainable_variables
                                        if len(v.shape) == 2]},
          "config": run.agent_settings.agent_config.record()}


def _run_json(cmd: Sequence[str]) -> Dict[str, object]:
  """The last line of a command's stdout, as JSON (its stderr shown on failure)."""
  proc = subprocess.run(list(cmd), capture_output=True, text=True,
                        env=dict(os.environ, PYTHONPATH=ROOT))
  if proc.returncode != 0:
    raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
  return json.loads(proc.stdout.strip().splitlines()[-1])


def ours_command(data: str, method: str, threads: int, batch_size: int, warmup: int,
                 steps: int) -> List[str]:
  return [sys.executable, os.path.join(HERE, "vector_speed.py"), "ours", f"--data={data}",
          f"--method={method}", f"--threads={threads}", f"--batch_size={batch_size}",
          f"--warmup={warmup}", f"--steps={steps}"]


def peer_command(peer_python: str, data: str, algo: str, threads: int, batch_size: int,
                 warmup: int, steps: int) -> List[str]:
  return [peer_python, os.path.join(HERE, "d3rlpy_vector.py"), "time", f"--data={data}",
          f"--algo={algo}", f"--threads={threads}", f"--batch_size={batch_size}",
          f"--warmup={warmup}", f"--steps={steps}"]


def median(values: Sequence[float]) -> float:
  v = sorted(values)
  n = len(v)
  return float(v[n // 2]) if n % 2 else float((v[n // 2 - 1] + v[n // 2]) / 2)


def compare(data: str, peer_python: str, methods: Sequence[str], threads: Sequence[int],
            repeats: int, batch_size: int, warmup: int, steps: int, log=print
            ) -> Dict[str, object]:
  """Interleaved timings (module docstring): {'runs': [...], 'summary': [...]}; each run
  records the 1-minute load average before and after it."""
  runs = []
  for t in threads:
    for method in methods:
      for r in range(repeats):
        sides = [("ccvl_tf", ours_command(data, method, t, batch_size, warmup, steps))]
        if method in PEER_ALGO:
          sides.append(("d3rlpy", peer_command(peer_python, data, PEER_ALGO[method], t,
                                               batch_size, warmup, steps)))
        for library, cmd in sides:
          load_before = os.getloadavg()[0]
          rec = _run_json(cmd)
          rec.update(repeat=r, load_before=load_before, load_after=os.getloadavg()[0])
          runs.append(rec)
          log(f"{library} {method} threads={t} repeat {r}: {rec['steps_per_s']:.1f} steps/s "
              f"(load {load_before:.2f} -> {rec['load_after']:.2f})")
  return {"runs": runs, "summary": summarize(runs)}


def summarize(runs: Sequence[Dict[str, object]]) -> List[Dict[str, object]]:
  """Per (method, threads): the median steps/s of each library and ours / d3rlpy's."""
  out = []
  keys = sorted({(r["algo"], int(r["threads"])) for r in runs}, key=lambda k: (k[1], k[0]))
  for algo, t in keys:
    def rates(lib):
      return [float(r["steps_per_s"]) for r in runs if r["library"] == lib
              and r["algo"] == algo and int(r["threads"]) == t]
    ours, theirs = rates("ccvl_tf"), rates("d3rlpy")
    loads = [float(r[k]) for r in runs if r["algo"] == algo and int(r["threads"]) == t
             for k in ("load_before", "load_after")]
    row = {"method": algo, "threads": t, "ours_steps_per_s": median(ours) if ours else None,
           "ours_runs": ours, "d3rlpy_steps_per_s": median(theirs) if theirs else None,
           "d3rlpy_runs": theirs, "load_min": min(loads), "load_max": max(loads)}
    row["ratio"] = (row["ours_steps_per_s"] / row["d3rlpy_steps_per_s"]
                    if ours and theirs else None)
    out.append(row)
  return out


def render(summary: Sequence[Dict[str, object]]) -> str:
  """A markdown table of `summarize`'s rows."""
  lines = ["| method | threads | ours (steps/s) | d3rlpy (steps/s) | ours / d3rlpy | "
           "load average (1 min) |", "| --- | --- | --- | --- | --- | --- |"]
  for r in summary:
    fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    lines.append(f"| {r['method']} | {r['threads']} | {fmt(r['ours_steps_per_s'], '.1f')} | "
                 f"{fmt(r['d3rlpy_steps_per_s'], '.1f')} | {fmt(r['ratio'], '.2f')} | "
                 f"{r['load_min']:.2f}-{r['load_max']:.2f} |")
  return "\n".join(lines) + "\n"


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  sub = parser.add_subparsers(dest="command", required=True)
  o = sub.add_parser("ours")
  o.add_argument("--data", required=True)
  o.add_argument("--method", default="bc")
  o.add_argument("--threads", type=int, default=1)
  o.add_argument("--batch_size", type=int, default=64)
  o.add_argument("--warmup", type=int, default=200)
  o.add_argument("--steps", type=int, default=1_000)
  c = sub.add_parser("compare")
  c.add_argument("--data", required=True)
  c.add_argument("--peer_python", default=os.path.join(HERE, ".venv", "bin", "python"))
  c.add_argument("--methods", default="bc,cql,ccvl")
  c.add_argument("--threads", default="1,2")
  c.add_argument("--repeats", type=int, default=3)
  c.add_argument("--batch_size", type=int, default=64)
  c.add_argument("--warmup", type=int, default=200)
  c.add_argument("--steps", type=int, default=1_000)
  c.add_argument("--out", default="")
  args = parser.parse_args(argv)
  if args.command == "ours":
    print(json.dumps(time_ours(args.data, args.method, args.threads, args.batch_size,
                               args.warmup, args.steps)), flush=True)
    return
  result = compare(args.data, args.peer_python, [m for m in args.methods.split(",") if m],
                   [int(t) for t in args.threads.split(",") if t], args.repeats,
                   args.batch_size, args.warmup, args.steps)
  result["settings"] = {k: v for k, v in vars(args).items() if k != "command"}
  print(render(result["summary"]), end="")
  if args.out:
    with open(args.out, "w") as f:
      json.dump(result, f, indent=1)


if __name__ == "__main__":
  main()
