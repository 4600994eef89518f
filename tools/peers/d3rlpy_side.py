"""The d3rlpy side of the peer comparison; runs in the peer environment (tools/peers/.venv, from
tools/peers/requirements.txt), never in the project's. tools/peers/peers.py calls it.

  python d3rlpy_side.py train --data_dir=D --algo=bc|cql --seed=S --steps=N --out_dir=O
      trains d3rlpy's DiscreteBC or DiscreteCQL with d3rlpy's own defaults (only the pixel
      observation scaler set, as for any image input) on the exported episodes of D
      (tools/peers/peer_data.py) with 4-frame stacking; writes O/model.d3, O/train.json and
      d3rlpy's per-step logs under O/logs.
  python d3rlpy_side.py serve --model=O/model.d3
      reads observations from stdin, each 84*84*4 uint8 bytes in our layout [84, 84, 4]
      (oldest frame first), and answers each with the greedy action index and a newline on
      stdout; used by our evaluation loop (ccvl_tf.evaluation.rollouts.run_episodes) in the
      project's environment.
"""
import argparse
import json
import os
import sys
import time

# The project's strict JSON writer (no NaN / Infinity); it needs only numpy, which the peer
# environment has.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from ccvl_tf.runtime import strict_json  # noqa: E402

ALGOS = ("bc", "cql")


def _setup(threads: int):
  """Imports torch / d3rlpy with `threads` intra-op threads."""
  import torch  # pylint: disable=g-import-not-at-top
  torch.set_num_threads(threads)
  torch.set_num_interop_threads(1)
  import d3rlpy  # pylint: disable=g-import-not-at-top
  return torch, d3rlpy


def make_config(d3rlpy, algo: str):
  """d3rlpy's DiscreteBC / DiscreteCQL config with its defaults; frames in [0, 255] are scaled
  to [0, 1] (d3rlpy's PixelObservationScaler, as its Atari examples)."""
  scaler = d3rlpy.preprocessing.PixelObservationScaler()
  if algo == "bc":
    return d3rlpy.algos.DiscreteBCConfig(observation_scaler=scaler)
  if algo == "cql":
    return d3rlpy.algos.DiscreteCQLConfig(observation_scaler=scaler)
  raise ValueError(f"--algo must be one of {ALGOS}, got {algo!r}")


def train(args) -> None:
  import numpy as np  # pylint: disable=g-import-not-at-top
  torch, d3rlpy = _setup(args.threads)
  with open(os.path.join(args.data_dir, "info.json")) as f:
    info = json.load(f)
  arrays = {k: np.load(os.path.join(args.data_dir, f"{k}.npy"))
            for k in ("observations", "actions", "rewards", "terminals", "timeouts")}
  d3rlpy.seed(args.seed)
  dataset = d3rlpy.dataset.MDPDataset(
      arrays["observations"], arrays["actions"], arrays["rewards"], arrays["terminals"],
      arrays["timeouts"],
      transition_picker=d3rlpy.dataset.FrameStackTransitionPicker(n_frames=4),
      action_space=d3rlpy.ActionSpace.DISCRETE, action_size=int(info["num_actions"]))
  algo = make_config(d3rlpy, args.algo).create(device="cpu:0")
  os.makedirs(args.out_dir, exist_ok=True)
  per_epoch = min(1_000, args.steps)
  t0 = time.time()
  history = algo.fit(
      dataset, n_steps=args.steps, n_steps_per_epoch=per_epoch, show_progress=False,
      save_interval=args.steps // per_epoch + 1, experiment_name=args.algo,
      with_timestamp=False,
      logger_adapter=d3rlpy.logging.FileAdapterFactory(
          root_dir=os.path.join(args.out_dir, "logs")))
  seconds = time.time() - t0
  algo.save(os.path.join(args.out_dir, "model.d3"))
  record = {
      "algo": args.algo, "seed": args.seed, "steps": args.steps, "train_seconds": seconds,
      "transitions": int(dataset.transition_count), "episodes": len(dataset.episodes),
      "config": json.loads(algo.config.serialize()),
      "last_epoch_metrics": {k: float(v) for k, v in history[-1][1].items()},
      "versions": {"d3rlpy": d3rlpy.__version__, "torch": torch.__version__,
                   "numpy": np.__version__, "python": sys.version.split()[0]},
      "threads": args.threads,
  }
  with open(os.path.join(args.out_dir, "train.json"), "w") as f:
    strict_json.dump(record, f, indent=1)
  print(strict_json.dumps({k: record[k] for k in ("algo", "seed", "steps", "train_seconds",
                                          "transitions", "last_epoch_metrics")}), flush=True)


def serve(args) -> None:
  import numpy as np  # pylint: disable=g-import-not-at-top
  out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
  sys.stdout = sys.stderr  # d3rlpy's log lines must not reach the answer stream
  _, d3rlpy = _setup(args.threads)
  algo = d3rlpy.load_learnable(args.model, device="cpu:0")
  size = 84 * 84 * 4
  stdin = sys.stdin.buffer
  while True:
    data = stdin.read(size)
    if len(data) < size:
      return  # our side closed the pipe
    obs = np.frombuffer(data, np.uint8).reshape(84, 84, 4).transpose(2, 0, 1)[None]
    out.write(b"%d\n" % int(algo.predict(obs)[0]))
    out.flush()


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  sub = parser.add_subparsers(dest="command", required=True)
  t = sub.add_parser("train")
  t.add_argument("--data_dir", required=True)
  t.add_argument("--algo", required=True, choices=ALGOS)
  t.add_argument("--seed", type=int, default=0)
  t.add_argument("--steps", type=int, default=10_000)
  t.add_argument("--out_dir", required=True)
  t.add_argument("--threads", type=int, default=1)
  s = sub.add_parser("serve")
  s.add_argument("--model", required=True)
  s.add_argument("--threads", type=int, default=1)
  args = parser.parse_args(argv)
  if args.command == "train":
    train(args)
  else:
    serve(args)


if __name__ == "__main__":
  main()
