"""Step time of the offline learner under each compute setting, on this machine's device:
float32 (the default), --mixed_precision=bfloat16 / float16 and --jit_compile
(ccvl_tf/bench/compute.py). Prints the device line, one row per setting and the JSON.

  python tools/compute_cost.py [--agent=ccvl] [--rounds=5] [--iters=10] [--threads=2]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ccvl_tf  # noqa: E402,F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.experiments import tf_setup  # noqa: E402
tf_setup.pin_cpu_kernels()  # as train_offline.py does, before TensorFlow loads


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--agent", default="ccvl")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--iters", type=int, default=10)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--threads", type=int, default=2, help="as --tf_threads (CPU only)")
  parser.add_argument("--settings", default="float32,bfloat16,float16,xla")
  args = parser.parse_args()
  from ccvl_tf.bench import compute as compute_bench  # pylint: disable=g-import-not-at-top
  gpus = tf_setup.visible_gpus()
  threads = tf_setup.configure_tensorflow(args.threads, False, gpus=gpus)
  print(tf_setup.device_line(gpus, threads["tf_threads"]), flush=True)
  result = compute_bench.run(args.agent, batch_size=args.batch_size, iters=args.iters,
                             rounds=args.rounds, settings=args.settings.split(","))
  for name, ms in result["train_step_ms"].items():
    ratio = result["ratio_over_float32"].get(name)
    print(f"{name:10s} {ms:8.1f} ms/step" + (f"  x{ratio:.2f} of float32" if ratio else ""))
  print(json.dumps(result))


if __name__ == "__main__":
  main()
