"""Cost and effect of TensorFlow op determinism (compare.py --deterministic) on CCVL's step.

Each measurement runs in its own process (op determinism and thread counts are process-wide):
  python tools/determinism_cost.py --rounds=3
alternates (deterministic off / on) x (1 / 2 threads) processes, each training a CCVL agent on
the MinAtar network (compare.py's MinAtar suite settings) and on the Nature network for a fixed
number of steps on fixed random batches, and prints ms per step (median over rounds, after
warm-up) and a hash of the final weights -- equal hashes = bit-identical training.
"""
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child(deterministic: bool, threads: int, torso: str, steps: int, warmup: int) -> dict:
  import ccvl_tf  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import  (Keras setup)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(threads)
  tf.config.threading.set_inter_op_parallelism_threads(threads)
  if deterministic:
    tf.config.experimental.enable_op_determinism()
  import keras  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top
  from agents import ccvl_agent  # pylint: disable=g-import-not-at-top
  from ccvl_tf import networks  # pylint: disable=g-import-not-at-top
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
  for i in range(warmup):
    agent.train_on_batch(batches[i % 16])
  t0 = time.perf_counter()
  for i in range(steps):
    out = agent.train_on_batch(batches[i % 16])
  float(out["loss"])
  ms = (time.perf_counter() - t0) * 1000 / steps
  digest = hashlib.sha256()
  for v in agent.online_network.variables:
    digest.update(np.asarray(v).tobytes())
  return {"ms": ms, "hash": digest.hexdigest()[:16]}


def main():
  if len(sys.argv) > 1 and sys.argv[1] == "--child":
    det, threads, torso, steps, warmup = sys.argv[2:7]
    print(json.dumps(child(det == "1", int(threads), torso, int(steps), int(warmup))))
    return
  rounds = 3
  for arg in sys.argv[1:]:
    if arg.startswith("--rounds="):
      rounds = int(arg.split("=")[1])
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             TF_CPP_MIN_LOG_LEVEL="2")
  settings = [(torso, det, threads) for torso, steps in (("minatar", 300), ("nature", 60))
              for threads in (1, 2) for det in (0, 1)]
  results = {s: [] for s in settings}
  for _ in range(rounds):
    for torso, det, threads in settings:
      steps = 300 if torso == "minatar" else 60
      out = subprocess.run([sys.executable, __file__, "--child", str(det), str(threads), torso,
                            str(steps), "10"], env=env, capture_output=True, text=True,
                           check=True).stdout.strip().splitlines()[-1]
      results[(torso, det, threads)].append(json.loads(out))
  print("torso    threads deterministic  ms/step (median)  weight hashes")
  for (torso, det, threads), runs in results.items():
    print(f"{torso:8s} {threads:7d} {bool(det)!s:13s}  {statistics.median(r['ms'] for r in runs):8.2f}"
          f"          {sorted(set(r['hash'] for r in runs))}")


if __name__ == "__main__":
  main()
