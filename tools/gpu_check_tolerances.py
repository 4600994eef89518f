"""The CPU measurements behind the GPU check's tolerances (BUILD.md, "The GPU check").

  python tools/gpu_check_tolerances.py free [--learners=ccvl,cql] [--steps=100]
  python tools/gpu_check_tolerances.py lockstep [--rel=1e-6] [--learners=...] [--steps=100]

free: each learner trained --steps free-running steps (Nature torso, batch 32, the check's
batches) in three fresh processes, one intra-op thread, two threads, and two threads with oneDNN
off; prints the largest relative loss difference and the largest network difference over its
movement (device_compare.compare_runs) between 1 and 2 threads and between oneDNN on and off.
lockstep: each learner against itself in lockstep on the CPU with the checked side's weights
multiplied by 1 + u x --rel before every step (device_compare.perturbation); prints the merged
comparison. Minutes per learner on 2 cores (AEVL the longest).
"""
import argparse
import os
import pickle
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _setup(steps):
  from ccvl_tf.bench import gpu_check  # pylint: disable=g-import-not-at-top
  return gpu_check.nature_setup(gpu_check.GpuCheckConfig(steps=steps))


def _train_one(name, steps, threads, out):
  """In a fresh process: `name` trained `steps` steps on `threads` threads, its Run pickled."""
  import ccvl_tf  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(threads)
  tf.config.threading.set_inter_op_parallelism_threads(threads)
  from ccvl_tf.bench import device_compare  # pylint: disable=g-import-not-at-top
  from ccvl_tf.bench import gpu_check  # pylint: disable=g-import-not-at-top
  tss, act, settings, batches = _setup(steps)
  learner = gpu_check.build_learner(name, tss, act, settings, "/CPU:0")
  with open(out, "wb") as f:
    pickle.dump(device_compare.train_run(learner, batches, "/CPU:0"), f)


def free(learners, steps):
  from ccvl_tf.bench import device_compare  # pylint: disable=g-import-not-at-top
  print("| learner | losses, 1 vs 2 threads | networks, 1 vs 2 threads | losses, oneDNN on vs "
        "off | networks, oneDNN on vs off |")
  with tempfile.TemporaryDirectory() as tmp:
    for name in learners:
      runs = {}
      for key, threads, onednn in (("t1", 1, None), ("t2", 2, None), ("off", 2, "0")):
        env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3")
        if onednn is not None:
          env["TF_ENABLE_ONEDNN_OPTS"] = onednn
        out = os.path.join(tmp, f"{name}.{key}.pkl")
        subprocess.run([sys.executable, __file__, "_train", name, str(steps), str(threads),
                        out], env=env, check=True)
        with open(out, "rb") as f:
          runs[key] = pickle.load(f)
      a = device_compare.compare_runs(runs["t1"], runs["t2"])
      b = device_compare.compare_runs(runs["t2"], runs["off"])
      print(f"| {name} | {a.max_loss_rel:.1e} | {a.worst_weight_ratio:.1e} | "
            f"{b.max_loss_rel:.1e} | {b.worst_weight_ratio:.1e} |", flush=True)


def lockstep(learners, steps, rel):
  from ccvl_tf.bench import device_compare  # pylint: disable=g-import-not-at-top
  from ccvl_tf.bench import gpu_check  # pylint: disable=g-import-not-at-top
  tss, act, settings, batches = _setup(steps)
  for name in learners:
    ref, checked = (gpu_check.build_learner(name, tss, act, settings, "/CPU:0")
                    for _ in range(2))
    c, _ = device_compare.lockstep(ref, checked, batches, "/CPU:0", "/CPU:0",
                                   perturb=device_compare.perturbation(rel))
    print(f"{name} rel {rel:g}: {'ok' if c.ok else 'FAILED'} {c.line()}", flush=True)


def main():
  if len(sys.argv) == 6 and sys.argv[1] == "_train":
    _train_one(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    return
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("mode", choices=("free", "lockstep"))
  parser.add_argument("--learners", default="ccvl,cql,rem,aevl,aevl_td,dqn,bc")
  parser.add_argument("--steps", type=int, default=100)
  parser.add_argument("--rel", type=float, default=1e-6)
  args = parser.parse_args()
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
  learners = [n for n in args.learners.split(",") if n]
  if args.mode == "free":
    free(learners, args.steps)
  else:
    lockstep(learners, args.steps, args.rel)


if __name__ == "__main__":
  main()
