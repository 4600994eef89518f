"""The deterministic schedule of online fine-tuning (--schedule=deterministic,
ccvl_tf/experiments/online/deterministic.py): its replay holds the transitions the Reverb path
holds (a real server fed the same trajectories), its errors name the flag, every evaluation of
a run uses the same seeds, and two runs of one gridworld command give bit-identical
checkpoints and evaluations (and a rerun into a used directory is refused)."""
import dataclasses
import json
import os

import ccvl_tf  # noqa: F401

import numpy as np
import pytest
import tensorflow as tf

from ccvl_tf.runtime import checkpoint_digest
from ccvl_tf.data import reverb_replay
from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.experiments.online import deterministic
from ccvl_tf.experiments.online import scores_and_bounds
from ccvl_tf.experiments.online import start as online_start
from tests import forked_binary

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_seeded_replay_holds_what_the_reverb_path_holds():
  """One actor's 6 env steps (gridworld, no slip, 3-step episodes: 'up', 'up', 'right', then
  a new episode: 'up', 'up') go to a real Reverb server through ReverbAddTrajectoryObserver
  and to SeededReplay's observer: the same number of items (5), and the replay's are the
  transitions by hand, in order -- the time-out keeps terminal 0, the boundary pair
  (LAST -> FIRST) is dropped, the new episode starts again at (6, 0)."""
  import reverb
  from tf_agents.drivers import py_driver
  from tf_agents.replay_buffers import reverb_utils
  from ccvl_tf.tabular import gridworld
  from ccvl_tf.envs import gridworld_env
  from tests.test_online import _ScriptedPolicy
  cfg = online_config.OnlineConfig(game="gridworld", min_replay_size=4, samples_per_insert=2.0,
                            batch_size=4, replay_capacity=1000)
  server, address = reverb_replay.start_server(online_config.make_server_tables(cfg))
  try:
    world = gridworld.GridWorld(slip_prob=0.0, horizon=3)
    env = gridworld_env.GridWorldEnvironment(world, seed=0)
    agent = online_config.build_agent("gridworld", *online_config.specs("gridworld"), cfg.bounds())
    scripted = _ScriptedPolicy([0, 0, 1, 0] * 4, env.time_step_spec(), env.action_spec(),
                               agent.exploration_policy.info_spec)
    trajectories = []
    py_driver.PyDriver(env, scripted.policy, [trajectories.append], max_steps=6).run(
        env.reset())
    to_reverb = reverb_utils.ReverbAddTrajectoryObserver(
        reverb.Client(address), reverb_replay.REPLAY_TABLE, sequence_length=2, stride_length=1)
    seeded = deterministic.SeededReplay(capacity=100, seed=0)
    observe = seeded.observer()
    for traj in trajectories:
      to_reverb(traj)
      observe(traj)
    to_reverb.flush()
    size = reverb.Client(address).server_info()[reverb_replay.REPLAY_TABLE].current_size
  finally:
    server.stop()
  items = [(world.cell(int(np.argmax(o))), int(a), float(r), world.cell(int(np.argmax(o2))),
            float(t)) for o, a, r, o2, t in seeded._items]  # pylint: disable=protected-access
  assert items == [((6, 0), 0, 0.0, (5, 0), 0.0), ((5, 0), 0, 0.0, (4, 0), 0.0),
                   ((4, 0), 1, 0.0, (4, 1), 0.0), ((6, 0), 0, 0.0, (5, 0), 0.0),
                   ((5, 0), 0, 0.0, (4, 0), 0.0)]
  assert size == len(seeded) == seeded.inserts == 5
  # The batch of a step is a function of (seed, step) and the contents: the dtypes of the
  # Reverb dataset's batches (reverb_replay.trajectory_to_transition).
  a, b = seeded.sample(8, step=7), seeded.sample(8, step=7)
  assert all(np.array_equal(a[k], b[k]) for k in a)
  assert not np.array_equal(seeded.sample(8, step=8)["observation"], a["observation"])
  assert {k: v.dtype for k, v in a.items()} == {
      "observation": tf.float32, "action": tf.int32, "reward": tf.float32,
      "next_observation": tf.float32, "terminal": tf.float32}


def test_fifo_capacity_and_the_inserts_due():
  seeded = deterministic.SeededReplay(capacity=3, seed=0)
  for i in range(5):
    seeded.add((np.float32(i),) * 5)
  assert sorted(float(x[0]) for x in seeded._items) == [2.0, 3.0, 4.0]  # pylint: disable=protected-access
  assert seeded.inserts == 5 and len(seeded) == 3
  # Before the k-th online learner step: min_size + ceil(k * batch / SPI) transitions
  # (batch 16, SPI 4: 4 per step; SPI 3: 16/3 per step, rounded up).
  cfg = online_config.OnlineConfig(game="gridworld", batch_size=16, samples_per_insert=4.0,
                            min_replay_size=32)
  actors = deterministic.InProcessActors.__new__(deterministic.InProcessActors)
  actors.cfg, actors.offline_step = cfg, 100
  assert [actors.inserts_due(s) for s in (100, 101, 149)] == [36, 40, 232]
  actors.cfg = dataclasses.replace(cfg, samples_per_insert=3.0)
  assert [actors.inserts_due(s) for s in (100, 101, 102)] == [38, 43, 48]


def test_errors_name_the_flag(tmp_path):
  offline = str(tmp_path)
  base = online_config.OnlineConfig(offline_dir=offline, root_dir=str(tmp_path / "r"),
                             schedule="deterministic")
  with pytest.raises(ValueError, match="--reverb_address is for --schedule=async"):
    dataclasses.replace(base, reverb_address="localhost:1").validate()
  with pytest.raises(ValueError, match="--schedule=deterministic .* --num_actors must be >= 1"):
    dataclasses.replace(base, num_actors=0).validate()
  with pytest.raises(ValueError, match="--schedule must be one of async, deterministic"):
    dataclasses.replace(base, schedule="lockstep").validate()


def test_every_evaluation_of_a_run_uses_the_same_seeds(monkeypatch):
  """The offline start ("before") and the end ("after") play episodes from the same
  environment and epsilon seeds, whatever the step."""
  from ccvl_tf.evaluation import rollouts
  from ccvl_tf.envs import factory
  cfg = online_config.OnlineConfig(game="gridworld", agent="cql", seed=3, eval_episodes=2)
  agent = online_config.build_agent("gridworld", *online_config.specs("gridworld"), cfg.bounds(),
                                    agent="cql")
  seen = []
  make_env = factory.make_env

  def recording_make_env(game, seed, *args, **kwargs):
    seen.append(("env", seed))
    return make_env(game, seed, *args, **kwargs)

  def recording_run_episodes(policy, env, episodes, **kwargs):
    seen.append(("episodes", kwargs["seed"]))
    return [rollouts.EpisodeRecord(run=0, episode=i, return_=0.0, raw_score=0.0, length=1,
                                     deltas=[], map_delta=float("nan"))
            for i in range(episodes)]

  monkeypatch.setattr(factory, "make_env", recording_make_env)
  monkeypatch.setattr(rollouts, "run_episodes", recording_run_episodes)
  monkeypatch.setattr(scores_and_bounds, "exact_gridworld_scores", lambda cfg, agent: {})
  scores_and_bounds.evaluate(cfg, agent, step=100)
  before = list(seen)
  seen.clear()
  scores_and_bounds.evaluate(cfg, agent, step=2600)
  assert seen == before == [("env", 10_003), ("episodes", 3)]


def _checkpoint_digest(root):
  path = tf.train.latest_checkpoint(os.path.join(root, "checkpoints"))
  return os.path.basename(path), checkpoint_digest.digest(path)


@pytest.mark.slow
def test_two_deterministic_runs_are_bit_identical(tmp_path):
  """The gridworld command twice (CCVL with both bounds, 2 actors, 100 offline steps, a budget
  of 400 env steps): every tensor of the final checkpoint and every recorded evaluation are
  equal. Before online step k the schedule has inserted min_size + k x 16 / 4 = 32 + 4k
  transitions (one per env step); the budget is checked at every push (push_period 5), so the
  run ends at the first push with 32 + 4k >= 400: k = 95, learner step 195, 412 inserts and
  95 batches of 16 sampled. Continuing the finished run to more env steps is refused, naming
  the flag (a deterministic run cannot resume)."""
  offline = str(tmp_path / "offline")
  online_start.train_offline_gridworld(offline, num_steps=100, seed=0, log=lambda s: None)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
  env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")

  def finetune(root, steps="--num_env_steps=400"):
    return forked_binary.run(
        "finetune_online.py",
        ["--game=gridworld", f"--offline_dir={offline}",
         f"--root_dir={root}", "--schedule=deterministic", steps,
         "--num_actors=2", "--batch_size=16", "--samples_per_insert=4",
         "--min_replay_size=32", "--replay_capacity=5000", "--checkpoint_interval=50",
         "--eval_interval=50", "--log_interval=50", "--eval_episodes=2",
         "--eval_max_steps=30", "--actor_update_period=20", "--push_period=5",
         "--export_policies=false"], cwd=REPO, env=env)

  roots = [str(tmp_path / "run1"), str(tmp_path / "run2")]
  for root in roots:
    r = finetune(root)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  summaries = [json.load(open(os.path.join(root, "summary.json"))) for root in roots]
  assert summaries[0]["step"] == summaries[0]["final_step"] == 195
  tp = summaries[0]["throughput"]
  assert (tp["replay/inserts"], tp["replay/samples"]) == (32 + 4 * 95, 95 * 16)
  assert tp["actors/env_steps"] >= 412 and summaries[0]["address"] is None
  assert summaries[0]["online_env_steps"] == 412
  assert _checkpoint_digest(roots[0]) == _checkpoint_digest(roots[1])
  evals = [json.load(open(os.path.join(root, "evals.json")))["evals"] for root in roots]
  assert sorted(evals[0], key=int) == ["100", "150", "195"]
  assert evals[0] == evals[1]
  r = finetune(roots[0], "--num_env_steps=800")  # the finished run, to be continued
  assert r.returncode != 0
  assert "--schedule=deterministic cannot resume the interrupted run" in r.stderr, (
      r.stderr[-2000:])
