"""The paper's Table 2 on paper: FLOPs of one CCVL train step counted from the built Atari
network (ccvl_tf/bench/flops.py), the table's gradient steps, and what they cost at the
measured CPU step rate and at an assumed GPU throughput (BUILD.md, "The paper's Table 2: an
estimate").

  .venv/bin/python tools/table2_cost.py \
      [--benchmark=docs/results/benchmark_train_step_idle.json] [--gpu_tflops=10]

Nothing is trained: the network is built once; the CPU rate is the benchmark file's
end-to-end CCVL step rate (binaries/benchmark.py, batch 32, the agents' defaults: DR3 on).
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import ccvl_tf  # noqa: E402,F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
import numpy as np  # noqa: E402
from ccvl_tf.algorithm import networks  # noqa: E402
from ccvl_tf.bench import flops  # noqa: E402

DAY = 86_400.0


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--benchmark", default=os.path.join(
      ROOT, "docs", "results", "benchmark_train_step_idle.json"))
  parser.add_argument("--gpu_tflops", type=float, default=10.0,
                      help="assumed sustained FP32 throughput of one GPU on this step (TFLOP/s)")
  parser.add_argument("--batch_size", type=int, default=32)
  args = parser.parse_args(argv)
  if not os.path.isfile(args.benchmark):
    parser.error(f"--benchmark={args.benchmark}: no such file (binaries/benchmark.py writes it)")
  if not args.gpu_tflops > 0:
    parser.error(f"--gpu_tflops must be > 0, got {args.gpu_tflops}")
  with open(args.benchmark) as f:
    rate = float(json.load(f)["end_to_end"]["step_only_steps_per_s"])
  net = networks.build_ccvl_network(networks.NATURE_OBSERVATION_SHAPE, np.uint8, 18,
                                    delta_head="cosine_monotone")
  macs = flops.layer_macs(net.q_and_phi_model)
  per_state = sum(macs.values())
  steps = flops.table2_steps()
  print(f"MACs per state (18 actions): {per_state:,} "
        f"({', '.join(f'{k} {v:,}' for k, v in macs.items())})")
  for dr3 in (True, False):
    f = flops.step_flops(per_state, args.batch_size, next_state_grad=dr3)
    total = f * steps
    print(f"DR3 {'on ' if dr3 else 'off'}: {f / 1e9:.2f} GFLOP per step; the table's "
          f"{steps / 1e9:.2f}e9 steps: {total:.2e} FLOP; at {args.gpu_tflops:g} TFLOP/s: "
          f"{total / (args.gpu_tflops * 1e12) / DAY:,.0f} GPU-days")
  cpu_days = steps / rate / DAY
  print(f"at the measured CPU rate ({rate:g} steps/s, DR3 on, 2 cores): {cpu_days:,.0f} "
        f"machine-days ({cpu_days / 365:.1f} years); one run of 12.5M steps: "
        f"{12.5e6 / rate / DAY:.1f} days")
  return 0


if __name__ == "__main__":
  sys.exit(main())
