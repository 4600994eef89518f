"""What changes the trained weights of one seed, and what each setting costs in time.

Every measurement runs in its own process: oneDNN, thread counts, oneDNN's ISA cap and op
determinism are fixed when TensorFlow starts. Two matrices:

  python tools/determinism_cost.py --rounds=3
      (--matrix=op_determinism, the default) op determinism off / on x 1 / 2 threads, each
      training a CCVL agent on the MinAtar network (compare.py's MinAtar suite settings) and on
      the Nature network for a fixed number of steps on fixed random batches.

  python tools/determinism_cost.py --matrix=machine --steps=300 --rounds=2
      what differs between machines: oneDNN on (TensorFlow's default on CPUs with
      AVX512_VNNI / AVX512_BF16 / AMX) or off (TF_ENABLE_ONEDNN_OPTS=0, the default of TF on
      other x86 CPUs), the intra- / inter-op thread counts (TensorFlow's default is the number
      of cores) and the instruction set oneDNN may dispatch to (ONEDNN_MAX_CPU_ISA: AVX2 or
      SSE41 stand in for an older CPU). Each process trains the `demo` preset's CCVL (what
      `make demo` trains: Nature torso, batch 32) on a small default dataset collected once
      (--data_steps scripted-player transitions, cached under --work_dir) for --steps steps.

Printed per setting: wall and process-CPU ms per step (medians over rounds, after --warmup
steps; the CPU time is the steadier figure on a shared machine), and a hash of
the trained variables (random-batch workloads: the online network; the demo workload: every
tensor of the learner's checkpoint, read back from the written file) -- equal hashes =
bit-identical training.
"""
import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from ccvl_tf.experiments import tf_setup  # its CPU_KERNELS, one of the settings (no TensorFlow)
from ccvl_tf.runtime import strict_json  # the children's specs and results: strict JSON

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (label, environment variables, intra-op threads, inter-op threads, op determinism);
# threads None: TensorFlow's default (the number of cores).
OP_DETERMINISM = [(f"threads {t}, op determinism {bool(d)}", {}, t, t, d)
                  for t in (1, 2) for d in (0, 1)]
OFF = {"TF_ENABLE_ONEDNN_OPTS": "0"}
MACHINE = [
    ("oneDNN default, threads default", {}, None, None, 0),
    ("oneDNN default, threads 2/2", {}, 2, 2, 0),
    # train_offline.py's pin, which differs from the defaults where the CPU's default is off
    ("train_offline's pin, threads 2/2", dict(tf_setup.CPU_KERNELS), 2, 2, 0),
    ("oneDNN default, threads 1/1", {}, 1, 1, 0),
    ("oneDNN default, threads 2/1", {}, 2, 1, 0),
    ("oneDNN default, threads 4/4", {}, 4, 4, 0),
    ("oneDNN default, ISA <= AVX512", {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}, None, None, 0),
    ("oneDNN default, ISA <= AVX2", {"ONEDNN_MAX_CPU_ISA": "AVX2"}, None, None, 0),
    ("oneDNN default, threads 2/2, ISA <= AVX2", {"ONEDNN_MAX_CPU_ISA": "AVX2"}, 2, 2, 0),
    ("oneDNN default, threads 1/1, ISA <= AVX512", {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}, 1, 1,
     0),
    ("oneDNN default, threads 1/1, ISA <= AVX2", {"ONEDNN_MAX_CPU_ISA": "AVX2"}, 1, 1, 0),
    ("oneDNN default, ISA <= SSE41", {"ONEDNN_MAX_CPU_ISA": "SSE41"}, None, None, 0),
    ("oneDNN off, threads default", OFF, None, None, 0),
    ("oneDNN off, threads 1/1", OFF, 1, 1, 0),
    ("oneDNN off, threads 2/1", OFF, 2, 1, 0),
    ("oneDNN off, threads 4/4", OFF, 4, 4, 0),
    ("oneDNN off, ISA <= AVX2", dict(OFF, ONEDNN_MAX_CPU_ISA="AVX2"), None, None, 0),
    ("oneDNN off, ISA <= SSE41", dict(OFF, ONEDNN_MAX_CPU_ISA="SSE41"), None, None, 0),
]


def _configure(intra, inter, deterministic):
  import ccvl_tf  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import  (Keras setup)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if intra is not None:
    tf.config.threading.set_intra_op_parallelism_threads(intra)
    tf.config.threading.set_inter_op_parallelism_threads(inter)
  if deterministic:
    tf.config.experimental.enable_op_determinism()
  from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-import-not-at-top
  return bool(_pywrap_util_port.IsMklEnabled())


def _random_batch_agent(torso):
  """(agent, batches) of the op-determinism workload: CCVL with default settings on fixed
  random batches."""
  import keras  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top
  from ccvl_tf.agents import ccvl_agent  # pylint: disable=g-import-not-at-top
  from ccvl_tf.algorithm import networks  # pylint: disable=g-import-not-at-top
  keras.utils.set_random_seed(0)
  if torso == "minatar":
    shape, dtype, num_actions, batch = (10, 10, 4), tf.float32, 6, 32
    net = networks.QNetworkConfig(torso="minatar", torso_units=128, n_cos=64, hidden_units=128)
  else:
    shape, dtype, num_actions, batch = (84, 84, 4), tf.uint8, 6, 32
    net = networks.QNetworkConfig()
  obs_spec = tf.TensorSpec(shape, dtype)
  act_spec = tensor_spec.BoundedTensorSpec((), tf.int64, 0, num_actions - 1)
  agent = ccvl_agent.CCVLAgent(ts.time_step_spec(obs_spec), act_spec, ccvl_agent.CCVLConfig(),
                               net, dataset_size=1e5)
  rng = np.random.default_rng(0)

  def make_batch():
    if dtype == tf.uint8:
      obs = lambda: rng.integers(0, 256, (batch, *shape), np.uint8)  # noqa: E731
    else:
      obs = lambda: (rng.random((batch, *shape)) < 0.2).astype(np.float32)  # noqa: E731
    return {"observation": obs(), "next_observation": obs(),
            "action": rng.integers(0, num_actions, batch).astype(np.int64),
            "reward": rng.choice([0.0, 1.0], batch).astype(np.float32),
            "terminal": (rng.random(batch) < 0.05).astype(np.float32)}

  batches = [make_batch() for _ in range(16)]
  return agent, (batches[i % 16] for i in range(10**9))


def _demo_config(work_dir, data_steps):
  from ccvl_tf.experiments.offline import config  # pylint: disable=g-import-not-at-top
  return config.OfflineConfig(root_dir=work_dir, default_dataset_steps=data_steps,
                              reference_agents=())


def _demo_agent(work_dir, data_steps):
  """(agent, batches) of the demo workload: train_offline.py's CCVL under the `demo` preset on
  the cached small default dataset, batches of its seeded pipeline from batch 0."""
  from ccvl_tf.data import pipeline  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.offline import config, runner  # pylint: disable=g-import-not-at-top
  cfg = _demo_config(work_dir, data_steps)
  run_setup = runner.setup(config.resolve(cfg), log=lambda s: None)
  data = pipeline.transition_dataset(run_setup.store, cfg.batch_size, seed=cfg.seed)
  return run_setup.agent, iter(data)


def checkpoint_hash(agent, directory) -> str:
  """sha256 (16 hex digits) over every tensor of the learner's checkpoint, written to
  `directory` and read back, in key order."""
  # After _configure: TensorFlow loads in the child once its threads and kernels are set.
  from ccvl_tf.runtime import checkpoint_digest  # pylint: disable=g-import-not-at-top
  return checkpoint_digest.digest(agent.make_checkpoint().write(
      os.path.join(directory, "ckpt")))[:16]


def child(workload, intra, inter, deterministic, steps, warmup, work_dir, data_steps) -> dict:
  onednn = _configure(intra, inter, deterministic)
  import numpy as np  # pylint: disable=g-import-not-at-top
  if workload == "demo":
    agent, batches = _demo_agent(work_dir, data_steps)
  else:
    agent, batches = _random_batch_agent(workload)
  for _ in range(warmup):
    agent.train_on_batch(next(batches))
  t0, c0 = time.perf_counter(), time.process_time()
  for _ in range(steps):
    out = agent.train_on_batch(next(batches))
  float(out["loss"])
  ms = (time.perf_counter() - t0) * 1000 / steps
  cpu_ms = (time.process_time() - c0) * 1000 / steps
  if workload == "demo":
    with tempfile.TemporaryDirectory() as d:
      digest = checkpoint_hash(agent, d)
  else:
    h = hashlib.sha256()
    for v in agent.online_network.variables:
      h.update(np.asarray(v).tobytes())
    digest = h.hexdigest()[:16]
  return {"ms": ms, "cpu_ms": cpu_ms, "hash": digest, "onednn": onednn}


def main():
  if len(sys.argv) > 1 and sys.argv[1] == "--child":
    spec = json.loads(sys.argv[2])
    if spec.get("prepare"):
      from ccvl_tf.experiments.offline import config, runner  # pylint: disable=g-import-not-at-top
      runner.setup(config.resolve(_demo_config(spec["work_dir"], spec["data_steps"])), log=print)
      return
    print(strict_json.dumps(child(spec["workload"], spec["intra"], spec["inter"], spec["det"],
                           spec["steps"], spec["warmup"], spec["work_dir"],
                           spec["data_steps"])))
    return
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--matrix", choices=("op_determinism", "machine"), default="op_determinism")
  p.add_argument("--rounds", type=int, default=3)
  p.add_argument("--steps", type=int, default=None,
                 help="measured steps (default: 300 MinAtar / 60 Nature; machine: 300)")
  p.add_argument("--warmup", type=int, default=10)
  p.add_argument("--data_steps", type=int, default=5000,
                 help="machine matrix: transitions of the small default dataset")
  p.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(), "ccvl_determinism"))
  p.add_argument("--only", action="append", default=[],
                 help="machine matrix: run only the settings whose label contains this")
  args = p.parse_args()
  base_env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                  PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  for k in ("TF_ENABLE_ONEDNN_OPTS", "ONEDNN_MAX_CPU_ISA"):
    base_env.pop(k, None)  # every setting names what it changes
  if args.matrix == "op_determinism":
    runs = [(torso, label, env, intra, inter, det, args.steps or (300 if torso == "minatar"
                                                                    else 60))
            for torso in ("minatar", "nature") for label, env, intra, inter, det in OP_DETERMINISM]
  else:
    os.makedirs(args.work_dir, exist_ok=True)
    subprocess.run([sys.executable, __file__, "--child", strict_json.dumps(
        {"prepare": True, "work_dir": args.work_dir, "data_steps": args.data_steps})],
        env=base_env, check=True, capture_output=True)
    runs = [("demo", label, env, intra, inter, det, args.steps or 300)
            for label, env, intra, inter, det in MACHINE
            if not args.only or any(o in label for o in args.only)]
  results = {r[:2]: [] for r in runs}
  for _ in range(args.rounds):
    for workload, label, env, intra, inter, det, steps in runs:
      spec = dict(workload=workload, intra=intra, inter=inter, det=det, steps=steps,
                  warmup=args.warmup, work_dir=args.work_dir, data_steps=args.data_steps)
      out = subprocess.run([sys.executable, __file__, "--child", strict_json.dumps(spec)],
                           env=dict(base_env, **env), capture_output=True, text=True,
                           check=True).stdout.strip().splitlines()[-1]
      results[(workload, label)].append(json.loads(out))
  print(f"{'workload':8s} {'setting':32s} oneDNN  ms/step  steps/s  CPU ms/step  "
        f"weight hashes  (wall ms per round)")
  for (workload, label), rs in results.items():
    ms = statistics.median(r["ms"] for r in rs)
    cpu = statistics.median(r["cpu_ms"] for r in rs)
    print(f"{workload:8s} {label:32s} {str(rs[0]['onednn']):6s}  {ms:7.2f}  {1000 / ms:7.1f}  "
          f"{cpu:11.2f}  {sorted(set(r['hash'] for r in rs))}  "
          f"({', '.join('%.1f' % r['ms'] for r in rs)})")


if __name__ == "__main__":
  main()
