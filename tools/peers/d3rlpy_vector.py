"""The d3rlpy side of the vector-data comparison (Study 2 of docs/own_data_protocol.md); runs in
the peer environment (tools/peers/.venv), never in the project's. tools/peers/vector_peers.py
and tools/peers/vector_speed.py call it.

  python d3rlpy_vector.py train --data=X.npz --algo=bc|cql --seed=S --steps=N --batch_size=B
                                --out_dir=O
      trains d3rlpy's DiscreteBC or DiscreteCQL on the .npz's per-step arrays (observations,
      actions, rewards, terminals, timeouts, num_actions: d3rlpy's MDPDataset meaning) with
      d3rlpy's defaults except the number of gradient steps and the batch size (no observation
      scaler, no frame stacking; the encoder is d3rlpy's default for vectors, an MLP 256-256
      with ReLU); writes O/model.d3, O/train.json and d3rlpy's logs under O/logs.
  python d3rlpy_vector.py serve --model=O/model.d3 --obs_dim=D
      reads observations from stdin, each D float32 values (4 * D bytes, native byte order),
      and answers each with the greedy action index and a newline on stdout.
  python d3rlpy_vector.py time --data=X.npz --algo=bc|cql --batch_size=B --threads=T
                               --warmup=W --steps=N
      steps per second of d3rlpy's train step on the data (a batch sampled from its replay
      buffer, then `update`, as `fit` does): W steps of warm-up, then N timed; one JSON line.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
  sys.path.insert(0, HERE)

import d3rlpy_side  # noqa: E402  (the shared torch / d3rlpy setup and the strict JSON writer)

strict_json = d3rlpy_side.strict_json
ALGOS = ("bc", "cql")
KEYS = ("observations", "actions", "rewards", "terminals", "timeouts")


def make_config(d3rlpy, algo: str, batch_size: int):
  """d3rlpy's DiscreteBC / DiscreteCQL config: its defaults, the batch size ours."""
  if algo == "bc":
    return d3rlpy.algos.DiscreteBCConfig(batch_size=batch_size)
  if algo == "cql":
    return d3rlpy.algos.DiscreteCQLConfig(batch_size=batch_size)
  raise ValueError(f"--algo must be one of {ALGOS}, got {algo!r}")


def load_dataset(d3rlpy, path: str):
  """(MDPDataset of the .npz, num_actions)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  with np.load(path) as z:
    arrays = {k: z[k] for k in KEYS}
    num_actions = int(z["num_actions"]) if "num_actions" in z.files else int(
        arrays["actions"].max()) + 1
  dataset = d3rlpy.dataset.MDPDataset(
      arrays["observations"].astype(np.float32), arrays["actions"].astype(np.int64),
      arrays["rewards"].astype(np.float32), arrays["terminals"].astype(np.float32),
      arrays["timeouts"].astype(np.float32), action_space=d3rlpy.ActionSpace.DISCRETE,
      action_size=num_actions)
  return dataset, num_actions


def network_layers(algo) -> list:
  """The Linear layers of the learner's networks as 'in->out', by module name (what the encoder
  really is, read from the built torch modules)."""
  import torch  # pylint: disable=g-import-not-at-top
  layers = {}
  modules = algo.impl.modules
  for field in ("imitator", "q_funcs"):
    module = getattr(modules, field, None)
    if module is None:
      continue
    layers[field] = [f"{m.in_features}->{m.out_features}" for m in module.modules()
                     if isinstance(m, torch.nn.Linear)]
  return layers


def train(args) -> None:
  import numpy as np  # pylint: disable=g-import-not-at-top
  torch, d3rlpy = d3rlpy_side._setup(args.threads)  # pylint: disable=protected-access
  d3rlpy.seed(args.seed)
  dataset, num_actions = load_dataset(d3rlpy, args.data)
  algo = make_config(d3rlpy, args.algo, args.batch_size).create(device="cpu:0")
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
      "algo": args.algo, "seed": args.seed, "steps": args.steps, "batch_size": args.batch_size,
      "train_seconds": seconds, "data": os.path.abspath(args.data), "num_actions": num_actions,
      "transitions": int(dataset.transition_count), "episodes": len(dataset.episodes),
      "config": json.loads(algo.config.serialize()), "layers": network_layers(algo),
      "last_epoch_metrics": {k: float(v) for k, v in history[-1][1].items()},
      "versions": {"d3rlpy": d3rlpy.__version__, "torch": torch.__version__,
                   "numpy": np.__version__, "python": sys.version.split()[0]},
      "threads": args.threads,
  }
  with open(os.path.join(args.out_dir, "train.json"), "w") as f:
    strict_json.dump(record, f, indent=1)
  print(strict_json.dumps({k: record[k] for k in ("algo", "seed", "steps", "train_seconds",
                                                  "transitions", "layers")}), flush=True)


def serve(args) -> None:
  import numpy as np  # pylint: disable=g-import-not-at-top
  out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
  sys.stdout = sys.stderr  # d3rlpy's log lines must not reach the answer stream
  _, d3rlpy = d3rlpy_side._setup(args.threads)  # pylint: disable=protected-access
  algo = d3rlpy.load_learnable(args.model, device="cpu:0")
  size = 4 * args.obs_dim
  stdin = sys.stdin.buffer
  while True:
    data = stdin.read(size)
    if len(data) < size:
      return  # our side closed the pipe
    obs = np.frombuffer(data, np.float32).reshape(1, args.obs_dim)
    out.write(b"%d\n" % int(algo.predict(obs)[0]))
    out.flush()


def time_steps(args) -> None:
  """Steps per second of sample + update (module docstring); one JSON line on stdout."""
  torch, d3rlpy = d3rlpy_side._setup(args.threads)  # pylint: disable=protected-access
  d3rlpy.seed(args.seed)
  dataset, _ = load_dataset(d3rlpy, args.data)
  algo = make_config(d3rlpy, args.algo, args.batch_size).create(device="cpu:0")
  algo.build_with_dataset(dataset)

  def step():
    algo.update(dataset.sample_transition_batch(args.batch_size))

  for _ in range(args.warmup):
    step()
  t0 = time.perf_counter()
  for _ in range(args.steps):
    step()
  seconds = time.perf_counter() - t0
  print(json.dumps({"library": "d3rlpy", "algo": args.algo, "threads": args.threads,
                    "torch_threads": torch.get_num_threads(), "batch_size": args.batch_size,
                    "warmup": args.warmup, "steps": args.steps, "seconds": seconds,
                    "steps_per_s": args.steps / seconds, "layers": network_layers(algo),
                    "d3rlpy": d3rlpy.__version__, "torch": torch.__version__}), flush=True)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  sub = parser.add_subparsers(dest="command", required=True)
  t = sub.add_parser("train")
  t.add_argument("--data", required=True)
  t.add_argument("--algo", required=True, choices=ALGOS)
  t.add_argument("--seed", type=int, default=0)
  t.add_argument("--steps", type=int, default=10_000)
  t.add_argument("--batch_size", type=int, required=True)
  t.add_argument("--out_dir", required=True)
  t.add_argument("--threads", type=int, default=1)
  s = sub.add_parser("serve")
  s.add_argument("--model", required=True)
  s.add_argument("--obs_dim", type=int, required=True)
  s.add_argument("--threads", type=int, default=1)
  m = sub.add_parser("time")
  m.add_argument("--data", required=True)
  m.add_argument("--algo", required=True, choices=ALGOS)
  m.add_argument("--batch_size", type=int, required=True)
  m.add_argument("--threads", type=int, default=1)
  m.add_argument("--warmup", type=int, default=200)
  m.add_argument("--steps", type=int, default=1_000)
  m.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  {"train": train, "serve": serve, "time": time_steps}[args.command](args)


if __name__ == "__main__":
  main()
