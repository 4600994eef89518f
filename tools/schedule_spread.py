"""How far the asynchronous fine-tuning schedule's numbers move from the deterministic one's.

  python tools/schedule_spread.py --work_dir=/tmp/spread --seeds=0,1 --async_runs=3

For each seed: the gridworld's offline CCVL run (both bounds, --offline_steps), then
binaries/finetune_online.py from it once with --schedule=deterministic (twice with
--deterministic_runs=2, to see them agree) and --async_runs times with --schedule=async, all
with the same flags and seed (1 actor). Printed per seed and score: the deterministic run's
value after fine-tuning, the asynchronous runs' values, and the largest |async - deterministic|;
then, over seeds, the mean and largest |async - deterministic| per score. The gridworld's
exact scores (policy evaluation on the known model) carry no evaluation noise: what moves
them is the training alone. A rerun reuses finished runs under --work_dir.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINETUNE = os.path.join(ROOT, "binaries", "finetune_online.py")
SCORES = ("lower_exact_normalized_score", "lower_grid_exact_normalized_score",
          "lower_normalized_score", "adaptive_normalized_score", "bounds_normalized_score")


def finetune(args, seed, offline, root, schedule):
  summary = os.path.join(root, "summary.json")
  if not os.path.exists(summary):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, FINETUNE, "--game=gridworld",
           f"--prepare_gridworld_offline={args.offline_steps}", f"--offline_dir={offline}",
           f"--root_dir={root}", f"--seed={seed}", f"--schedule={schedule}",
           f"--num_env_steps={args.num_env_steps}", "--num_actors=1",
           f"--eval_episodes={args.eval_episodes}", "--export_policies=false"]
    with open(root + ".log", "w") as out:
      subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT, check=True)
  with open(summary) as f:
    s = json.load(f)
  return {k: s["last_eval"][k] for k in SCORES if k in s["last_eval"]}, s["start_eval"]


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--work_dir", required=True)
  p.add_argument("--seeds", default="0,1")
  p.add_argument("--async_runs", type=int, default=3)
  p.add_argument("--deterministic_runs", type=int, default=1)
  p.add_argument("--offline_steps", type=int, default=1500)
  p.add_argument("--num_env_steps", type=int, default=2000)
  p.add_argument("--eval_episodes", type=int, default=10)
  args = p.parse_args()
  os.makedirs(args.work_dir, exist_ok=True)
  gaps = {k: [] for k in SCORES}
  for seed in [int(s) for s in args.seeds.split(",")]:
    offline = os.path.join(args.work_dir, f"offline_seed{seed}")
    det = [finetune(args, seed, offline, os.path.join(args.work_dir, f"s{seed}_det{i}"),
                    "deterministic")[0] for i in range(args.deterministic_runs)]
    asy = [finetune(args, seed, offline, os.path.join(args.work_dir, f"s{seed}_async{i}"),
                    "async")[0] for i in range(args.async_runs)]
    print(f"seed {seed}")
    for k in SCORES:
      if k not in det[0]:
        continue
      d = [r[k] for r in det]
      a = [r[k] for r in asy]
      gap = max(abs(x - d[0]) for x in a)
      gaps[k].extend(abs(x - d[0]) for x in a)
      print(f"  {k:36s} deterministic {', '.join(f'{x:7.2f}' for x in d)}   async "
            f"{', '.join(f'{x:7.2f}' for x in a)}   max |async - det| {gap:6.2f}")
  print("over seeds: |async - deterministic| per score (mean, max)")
  for k, g in gaps.items():
    if g:
      print(f"  {k:36s} {sum(g) / len(g):7.2f} {max(g):7.2f}  ({len(g)} async runs)")


if __name__ == "__main__":
  main()
