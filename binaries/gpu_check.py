"""The GPU check: does the pinned GPU stack work, how fast is each learner on it, and does the
GPU train what the CPU trains?

  python binaries/gpu_check.py [--agents=ccvl,cql] [--steps=100] [--output=gpu_check.json]

On a machine where TensorFlow sees no GPU: one line saying so, exit status 0. Otherwise:
  1. the stack: each GPU, the CUDA wheels installed, and the CUDA runtime / cuDNN / driver
     that TensorFlow loaded against the versions it was built with
     (ccvl_tf/bench/gpu_stack.py);
  2. the step time of every learner of the agent registry on the GPU and on the CPU
     (Nature torso, batch 32; the step benchmark's timing, ccvl_tf/bench/train_step.py);
  3. the first --steps training steps of every learner on the GPU against the CPU's, in
     lockstep (each step from the CPU's state, on the same batch): each loss within
     --loss_rtol, each update within --weight_rtol of the CPU's (ccvl_tf/bench/gpu_check.py;
     BUILD.md "The GPU check": why).
Exit status 0 when everything fits, 1 when a check failed (each failing line says FAILED) or
a flag is wrong. --device=/CPU:0 runs 2 and 3 on the CPU against itself (the check's own
self-test where there is no GPU).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ccvl_tf  # noqa: E402,F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)

from ccvl_tf.bench import gpu_check  # noqa: E402
from ccvl_tf.bench import gpu_stack  # noqa: E402
from ccvl_tf.runtime import config_flags  # noqa: E402
from ccvl_tf.runtime import strict_json  # noqa: E402

config_flags.define(gpu_check.GpuCheckConfig)

FAILED_EXIT = 1


def main(argv):
  del argv
  cfg = config_flags.config_from_flags(gpu_check.GpuCheckConfig)
  device = cfg.device
  ok = True
  if not device:
    gpus = gpu_stack.visible_gpus()
    if not gpus:
      print(gpu_stack.no_gpu_line(), flush=True)
      return 0
    device = "/GPU:0"
    print("gpu_check: the stack", flush=True)
    ok = gpu_stack.check_stack(gpus, log=lambda line: print(line, flush=True))
  result = gpu_check.run_checks(cfg, device, log=lambda line: print(line, flush=True))
  ok = ok and result["ok"]
  if cfg.output:
    with open(cfg.output, "w") as f:
      strict_json.dump(dict(result, ok=ok, device=device), f, indent=2, sort_keys=True)
  print(f"gpu_check: {'ok' if ok else 'FAILED'} ({device} against /CPU:0, "
        f"{len(cfg.agents)} learners, {cfg.steps} steps)", flush=True)
  return 0 if ok else FAILED_EXIT


if __name__ == "__main__":
  config_flags.run(main)
