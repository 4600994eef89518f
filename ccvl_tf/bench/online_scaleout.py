"""Scale-out of the Reverb set-up (docs/online.md): the same fine-tune with 1, 2, ... actor
processes against an external `binaries/reverb_server.py`, measuring the learner's steps/s,
the actors' env steps/s, the actors' share of time inside their inserts (the rate limiter
blocks an insert while the learner is behind) and the learner's time waiting for samples.

Each configuration starts its own server (a fresh replay table) as a subprocess on a free port,
runs `binaries/finetune_online.py --reverb_address=localhost:PORT --num_actors=K` (no
evaluation, no export) from the same offline run into its own root_dir, reads the run's
summary.json 'throughput', and stops the server.
"""
from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from typing import Callable, Dict, List, Sequence

from ccvl_tf.envs import gymnasium_name
from ccvl_tf.runtime import config_flags, run_settings
from ccvl_tf.runtime.config_flags import setting
from ccvl_tf.runtime import strict_json

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_BIN = os.path.join(_REPO_ROOT, "binaries")


def _ints(text) -> tuple:
  if isinstance(text, str):
    return tuple(int(t) for t in text.split(",") if t.strip())
  return tuple(int(t) for t in text)


@dataclasses.dataclass(frozen=True)
class ScaleoutConfig:
  """Settings of the measurement; its `setting` fields are binaries/online_scaleout.py's
  flags."""
  offline_dir: str = run_settings.borrow("offline_dir")
  game: str = setting("", "Its game ('minatar/Breakout', 'gridworld', an Atari game).",
                      flag_default=None)
  agent: str = setting("ccvl", "finetune_online.py --agent.")
  output_dir: str = setting("", "Output directory.", flag_default=None, output="dir")
  actors: Sequence[int] = setting(("1", "2"), "Actor processes of each configuration.",
                                  kind="csv", parse=_ints)
  num_env_steps: int = run_settings.borrow("num_env_steps", 8_000)  # per configuration
  samples_per_insert: float = run_settings.borrow("samples_per_insert")
  min_replay_size: int = run_settings.borrow("min_replay_size", 500)
  batch_size: int = run_settings.borrow("batch_size")

  def validate(self) -> None:
    """ValueError naming the flag: a directory or game not given, a setting outside its
    declaration."""
    for name in ("offline_dir", "game", "output_dir"):
      if not getattr(self, name):
        raise ValueError(f"--{name} is required")
    gymnasium_name.refuse_gymnasium(
        self.game, "--game", "the scale-out runs finetune_online.py, which starts from an "
        "offline run of the gridworld, a MinAtar or an Atari game")
    config_flags.check(self, prefix="--")
    if not self.actors or min(self.actors) < 1:
      # The benchmark's server is its own, on a port no remote actor knows: with no local
      # actor nothing would ever insert, and the learner would wait forever.
      raise ValueError(f"--actors must list actor counts >= 1 (each configuration's actors "
                       f"are the only ones that insert into its server), got "
                       f"{','.join(map(str, self.actors)) or 'none'}")


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def _env() -> Dict[str, str]:
  env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
  env["PYTHONPATH"] = _REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
  return env


def _start_server(cfg: ScaleoutConfig, port: int, log_path: str,
                  timeout_s: float = 120.0) -> subprocess.Popen:
  """reverb_server.py with the fine-tune's table flags; returns once it prints its address."""
  out = open(log_path, "w")
  proc = subprocess.Popen(
      [sys.executable, os.path.join(_BIN, "reverb_server.py"), f"--game={cfg.game}",
       f"--agent={cfg.agent}", f"--offline_dir={cfg.offline_dir}", f"--port={port}",
       f"--samples_per_insert={cfg.samples_per_insert}",
       f"--min_replay_size={cfg.min_replay_size}", f"--batch_size={cfg.batch_size}"],
      stdout=out, stderr=subprocess.STDOUT, env=_env(), cwd=_REPO_ROOT)
  deadline = time.monotonic() + timeout_s
  while time.monotonic() < deadline:
    if "Reverb server at" in open(log_path).read():
      return proc
    if proc.poll() is not None:
      break
    time.sleep(0.5)  # polling a subprocess's log, not a test
  proc.kill()
  raise RuntimeError(f"reverb_server.py did not start; see {log_path}:\n"
                     f"{open(log_path).read()[-1500:]}")


def run_one(cfg: ScaleoutConfig, num_actors: int, log: Callable[[str], None]) -> Dict:
  """One configuration: server + learner with `num_actors` local actors; its throughput."""
  root = os.path.join(cfg.output_dir, f"actors_{num_actors}")
  os.makedirs(root, exist_ok=True)
  port = _free_port()
  server = _start_server(cfg, port, os.path.join(root, "reverb_server.log"))
  try:
    t0 = time.time()
    learner_log = os.path.join(root, "learner.log")
    with open(learner_log, "w") as out:
      code = subprocess.call(
          [sys.executable, os.path.join(_BIN, "finetune_online.py"), f"--game={cfg.game}",
           f"--agent={cfg.agent}", f"--offline_dir={cfg.offline_dir}",
           f"--root_dir={os.path.join(root, 'run')}", f"--reverb_address=localhost:{port}",
           f"--num_actors={num_actors}", f"--num_env_steps={cfg.num_env_steps}",
           f"--samples_per_insert={cfg.samples_per_insert}",
           f"--min_replay_size={cfg.min_replay_size}", f"--batch_size={cfg.batch_size}",
           "--eval_episodes=0", "--export_policies=false", "--checkpoint_interval=1000000",
           "--log_interval=500"], stdout=out, stderr=subprocess.STDOUT, env=_env(),
          cwd=_REPO_ROOT)
    if code != 0:
      raise RuntimeError(f"finetune_online.py exited with {code}; see {learner_log}:\n"
                         f"{open(learner_log).read()[-1500:]}")
    summary = json.load(open(os.path.join(root, "run", "summary.json")))
  finally:
    server.terminate()
    server.wait(timeout=30)
  tp = dict(summary["throughput"], num_actors=num_actors, wall_seconds=time.time() - t0)
  log(f"{num_actors} actor(s): learner {tp.get('steady_learner_steps_per_s', 0.0):.1f} steps/s "
      f"after a {tp.get('warmup_seconds', 0.0):.0f}s warm-up, actors "
      f"{tp['actors/actor_env_steps_per_s']:.1f} env steps/s "
      f"({100 * tp['actors/insert_share']:.0f}% of their time inserting), learner waiting for "
      f"samples {100 * _steady_wait_share(tp):.0f}% of its steady {tp['steady_seconds']:.0f}s")
  return tp


def _steady_wait_share(tp: Dict) -> float:
  """The learner's share of time waiting for samples after its warm-up (the first sample
  waits for min_replay_size items and is not counted)."""
  return tp["steady_sample_wait_seconds"] / max(tp["steady_seconds"], 1e-9)


def run(cfg: ScaleoutConfig, log: Callable[[str], None] = print) -> List[Dict]:
  """Every configuration in turn; writes output_dir/scaleout.json and scaleout.md."""
  os.makedirs(cfg.output_dir, exist_ok=True)
  rows = [run_one(cfg, int(k), log) for k in cfg.actors]
  with open(os.path.join(cfg.output_dir, "scaleout.json"), "w") as f:
    strict_json.dump({"config": dataclasses.asdict(cfg), "runs": rows}, f, indent=2)
  lines = [f"Reverb scale-out: {cfg.game}, --agent={cfg.agent}, {cfg.num_env_steps} env steps, "
           f"SPI {cfg.samples_per_insert}, batch {cfg.batch_size}, external reverb_server.py",
           "", "| actor processes | learner steps/s (after warm-up) | actors' env steps/s (sum) "
           "| actors' time inserting | learner time waiting for samples (after warm-up) | "
           "training s (warm-up) |",
           "| --- | --- | --- | --- | --- | --- |"]
  for tp in rows:
    lines.append(f"| {tp['num_actors']} | {tp.get('steady_learner_steps_per_s', 0.0):.1f} | "
                 f"{tp['actors/actor_env_steps_per_s']:.1f} | "
                 f"{100 * tp['actors/insert_share']:.0f}% | "
                 f"{100 * _steady_wait_share(tp):.0f}% | "
                 f"{tp['train_seconds']:.0f} ({tp.get('warmup_seconds', 0.0):.0f}) |")
  with open(os.path.join(cfg.output_dir, "scaleout.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
  log("\n".join(lines))
  return rows
