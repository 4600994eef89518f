"""Online fine-tuning on a real Reverb server (localhost, started by the tests themselves).

In process: what the observer writes is what the learner's dataset turns into transitions, the
variable container round trip, the rate limiter's timeout, clear errors. As subprocesses: a
tiny end-to-end gridworld fine-tune with two actors, one of which is killed -9 mid-run (the
run goes on with the other), ending in SavedModels that load with plain TensorFlow and act
exactly as the learner's policies restored from its checkpoint; the CQL baseline through the
same pipeline. (MirroredStrategy: tests/test_bounds_agent.py.)
"""
import json
import os
import subprocess
import sys
import time

import ccvl_tf  # noqa: F401

import numpy as np
import pytest
import tensorflow as tf

from ccvl_tf.data import reverb_replay
from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.experiments.online import start as online_start
from ccvl_tf.experiments.online import runner as online
from tests import forked_binary

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINETUNE = os.path.join(REPO, "binaries", "finetune_online.py")


@pytest.fixture(scope="module")
def offline_dir(tmp_path_factory):
  d = str(tmp_path_factory.mktemp("offline"))
  online_start.train_offline_gridworld(d, num_steps=100, seed=0, log=lambda s: None)
  return d


@pytest.fixture()
def server():
  cfg = online_config.OnlineConfig(game="gridworld", min_replay_size=4, samples_per_insert=2.0,
                            batch_size=4, replay_capacity=1000)
  srv, address = reverb_replay.start_server(online_config.make_server_tables(cfg))
  try:
    yield cfg, address
  finally:
    srv.stop()


class _ScriptedPolicy:
  """Actions from a list (a py policy for PyDriver), to know the transitions written."""

  def __init__(self, actions, time_step_spec, action_spec, info_spec):
    from tf_agents.policies import py_policy
    from tf_agents.trajectories import policy_step
    outer = self

    class P(py_policy.PyPolicy):
      def _action(self, time_step, policy_state):
        a = np.int32(outer.actions.pop(0))
        return policy_step.PolicyStep(a, (), outer.info)
    self.actions = list(actions)
    self.info = tf.nest.map_structure(lambda s: np.zeros(s.shape, s.dtype.as_numpy_dtype),
                                      info_spec)
    self.policy = P(time_step_spec, action_spec, info_spec=info_spec)


@pytest.fixture()
def sampling_server():
  """A server whose rate limiter lets the learner's dataset draw ~3,000 samples from 5 items
  (the `server` fixture's SPI 2 stops it after 18, which missed the one item drawn with
  probability 1/5 in 0.8^18 = 1.8% of runs)."""
  cfg = online_config.OnlineConfig(game="gridworld", min_replay_size=4, samples_per_insert=1000.0,
                            batch_size=4, replay_capacity=1000)
  srv, address = reverb_replay.start_server(online_config.make_server_tables(cfg))
  try:
    yield cfg, address
  finally:
    srv.stop()


def test_observer_items_become_the_right_transitions(sampling_server):
  """Gridworld start (6, 0): 'up' x2 leads to (4, 0) with reward 0; a 3-step episode cap
  (time-out, discount 1) then a new episode. The learner's dataset must yield exactly the
  non-boundary transitions with terminal 0 (time-out bootstraps); 200 draws from the 5 items
  miss one with probability below 1e-19."""
  import reverb
  from tf_agents.drivers import py_driver
  from tf_agents.replay_buffers import reverb_utils
  from ccvl_tf.tabular import gridworld
  from ccvl_tf.envs import gridworld_env
  cfg, address = sampling_server
  world = gridworld.GridWorld(slip_prob=0.0, horizon=3)
  env = gridworld_env.GridWorldEnvironment(world, seed=0)
  agent = online_config.build_agent("gridworld", *online_config.specs("gridworld"), cfg.bounds())
  spec = agent.exploration_policy.trajectory_spec
  scripted = _ScriptedPolicy([0, 0, 1, 0] * 4, env.time_step_spec(), env.action_spec(),
                             agent.exploration_policy.info_spec)
  observer = reverb_utils.ReverbAddTrajectoryObserver(
      reverb.Client(address), reverb_replay.REPLAY_TABLE, sequence_length=2, stride_length=1)
  py_driver.PyDriver(env, scripted.policy, [observer], max_steps=6).run(env.reset())
  observer.flush()
  ds = reverb_replay.replay_dataset(spec, address, batch_size=1, rate_limiter_timeout_ms=1000)
  seen = set()
  for batch in ds.take(200):
    s = int(np.argmax(batch["observation"][0]))
    s2 = int(np.argmax(batch["next_observation"][0]))
    seen.add((world.cell(s), int(batch["action"][0]), float(batch["reward"][0]), world.cell(s2),
              float(batch["terminal"][0])))
  expected = {((6, 0), 0, 0.0, (5, 0), 0.0), ((5, 0), 0, 0.0, (4, 0), 0.0),
              ((4, 0), 1, 0.0, (4, 1), 0.0)}
  assert seen == expected, seen


def test_variable_container_round_trip_and_rate_limiter_timeout(server):
  from tf_agents.experimental.distributed import reverb_variable_container
  cfg, address = server
  learner = online_config.build_agent("gridworld", *online_config.specs("gridworld"), cfg.bounds(),
                                      seed=0)
  actor = online_config.build_agent("gridworld", *online_config.specs("gridworld"), cfg.bounds(),
                                    seed=1)
  lv = online_config.pushed_variables(learner, online_config.control_variables())
  av = online_config.pushed_variables(actor, online_config.control_variables())
  lv["train_step"].assign(42)
  container = reverb_variable_container.ReverbVariableContainer(
      address, table_names=[reverb_replay.VARIABLE_TABLE])
  container.push(lv)
  obs = np.eye(64, dtype=np.float32)[:5]
  assert not np.allclose(actor.upper.q_values(obs, 0.5), learner.upper.q_values(obs, 0.5))
  container.update(av)
  assert int(av["train_step"].numpy()) == 42
  np.testing.assert_allclose(actor.upper.q_values(obs, 0.5), learner.upper.q_values(obs, 0.5))
  np.testing.assert_allclose(actor.lower.q_values(obs, 0.5), learner.lower.q_values(obs, 0.5))
  # An empty replay table: the sample waits rate_limiter_timeout_ms, then the dataset ends.
  ds = reverb_replay.replay_dataset(learner.exploration_policy.trajectory_spec, address, 4,
                             rate_limiter_timeout_ms=300)
  t = time.monotonic()
  assert list(ds.take(1)) == []
  assert time.monotonic() - t < 20


def test_unreachable_server_error_names_the_address():
  import portpicker
  address = f"localhost:{portpicker.pick_unused_port()}"
  t = time.monotonic()
  with pytest.raises(ConnectionError, match=f"Reverb server at {address} is not reachable"):
    reverb_replay.check_server(address, timeout_s=1)
  assert time.monotonic() - t < 15
  with pytest.raises(ValueError, match="host:port"):
    reverb_replay.check_server("localhost", 1)


@pytest.mark.slow
def test_config_and_offline_errors(tmp_path, offline_dir):
  with pytest.raises(ValueError, match="--offline_dir .*nope does not exist"):
    online_config.OnlineConfig(offline_dir=str(tmp_path / "nope"),
                               root_dir=str(tmp_path)).validate()
  (tmp_path / "a_file").write_text("x")
  with pytest.raises(ValueError, match="--offline_dir .*a_file is a file, not a directory"):
    online_config.OnlineConfig(offline_dir=str(tmp_path / "a_file"),
                               root_dir=str(tmp_path)).validate()
  with pytest.raises(ValueError, match="samples_per_insert"):
    online_config.OnlineConfig(offline_dir=offline_dir, root_dir=str(tmp_path),
                        samples_per_insert=0).validate()
  cfg = online_config.OnlineConfig(offline_dir=offline_dir, root_dir=str(tmp_path),
                                   num_env_steps=140,
                            batch_size=32, samples_per_insert=8, offline_fraction=0.25,
                            min_replay_size=40)
  # About (140 - 40) x 8 / 24 learner steps: the first sample after 40 items.
  assert (cfg.online_batch_size, cfg.offline_batch_size, cfg.num_learner_steps) == (24, 8, 34)
  agent = online_config.build_agent("gridworld", *online_config.specs("gridworld"), cfg.bounds())
  with pytest.raises(ValueError, match="no checkpoint in .*empty"):
    online_start.restore_offline(agent, str(tmp_path / "empty"))
  assert online_start.restore_offline(agent, offline_dir, log=lambda s: None) == 100
  with pytest.raises(ValueError, match="ALE|game|Atari|valid"):
    online_config.specs("NoSuchGame")


def _read(path):
  with open(path) as f:
    return f.read()


def _restored_learner(root, offline_dir):
  """(OnlineConfig, specs, agent) of the run in `root`: the learner built as `online.run`
  builds it (its online_config.json, the offline run's alpha) and restored from the latest
  checkpoint with assert_consumed() (every saved value has a home and every variable a value)."""
  with open(os.path.join(root, "online_config.json")) as f:
    cfg = online_config.OnlineConfig.from_record(json.load(f))
  with open(os.path.join(offline_dir, "summary.json")) as f:
    offline = json.load(f)
  alpha = offline.get("alpha", offline.get("config", {}).get("alpha"))
  tss, act = online_config.specs(cfg.game, cfg.seed)
  agent = online_config.build_agent(cfg.game, tss, act, cfg.bounds(), alpha=alpha, seed=cfg.seed,
                             agent=cfg.agent)
  offline_step = tf.Variable(-1, dtype=tf.int64, trainable=False)
  env_steps = tf.Variable(0, dtype=tf.int64, trainable=False)   # the actors' env steps
  path = tf.train.latest_checkpoint(os.path.join(root, "checkpoints"))
  counts = online.online_config.gridworld_counts()     # n(s), grown online: saved too
  agent.make_checkpoint(offline_step=offline_step, online_env_steps=env_steps,
                        online_counts=counts).restore(path).assert_consumed()
  assert int(env_steps.numpy()) >= cfg.num_env_steps
  assert counts.counts.numpy().sum() > 2500           # the offline data's 2500 + online ones
  assert int(agent.train_step_counter.numpy()) == int(path.rsplit("-", 1)[1])
  assert int(offline_step.numpy()) == 100
  return cfg, (tss, act), agent


def _assert_exports_equal_in_process_policies(root, offline_dir, work_dir):
  from ccvl_tf.algorithm import policies
  from tests import policy_compare
  cfg, (tss, act), agent = _restored_learner(root, offline_dir)
  built = {  # as online.run exports them
      "policy": policies.ConfidenceAdaptivePolicy(
          tss, act, agent.q_network, num_grid_deltas=cfg.exploration.num_grid_deltas,
          gamma=agent.config.gamma, seed=cfg.seed, upper_network=agent.upper_q_network,
          beta=cfg.exploration.beta, reward_clip=None),
      "policy_fixed": policies.FixedDeltaPolicy(tss, act, agent.q_network, cfg.policy_delta),
      "policy_bounds": agent.bounds_policy,
  }
  # Two streams walking through start-side and goal-side cells of the 8x8 grid.
  cells = np.array([[48, 55], [40, 47], [32, 39], [24, 31], [48, 23], [49, 54], [50, 48]])
  data = policy_compare.time_steps(np.eye(64, dtype=np.float32)[cells])
  child = policy_compare.saved_policy_steps(root, list(built), data, work_dir)
  for name, policy in built.items():
    policy_compare.assert_same_steps(child, policy_compare.in_process_steps(policy, data), name)


@pytest.mark.slow
def test_end_to_end_gridworld_two_actors_one_killed(offline_dir, tmp_path):
  """Learner + in-process server + 2 actor processes; actor 0 is killed -9 once training runs.
  The learner reaches its budget, 800 env steps counted at the server, with the other actor
  (offline 100 steps + about (800 - 32) x SPI 4 / batch 16 = 192 learner steps), evaluates,
  exports. Measured ~45 s here."""
  root = str(tmp_path / "run")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
  env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
  log_path = str(tmp_path / "learner.log")
  out = open(log_path, "w")
  proc = subprocess.Popen(
      [sys.executable, FINETUNE, "--game=gridworld", f"--offline_dir={offline_dir}",
       f"--root_dir={root}", "--num_env_steps=800", "--num_actors=2", "--batch_size=16",
       "--samples_per_insert=4", "--min_replay_size=32", "--replay_capacity=5000",
       "--checkpoint_interval=50", "--log_interval=10", "--eval_episodes=1",
       "--eval_max_steps=30", "--actor_update_period=20", "--push_period=5",
       "--server_timeout_s=3", "--sample_timeout_s=10"],
      stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
  actor_pids = []
  try:
    deadline = time.monotonic() + 240   # a bound, not a sleep: ~25 s quiet, ~45-130 s loaded
    killed = False
    while proc.poll() is None and time.monotonic() < deadline:
      text = _read(log_path)
      if not killed and "step 120 (" in text:     # training is running on both actors
        actor_pids = json.loads(_read(os.path.join(root, "status.json")))["actor_pids"]
        os.kill(actor_pids[0], 9)
        killed = True
      try:
        proc.wait(timeout=0.25)
      except subprocess.TimeoutExpired:
        pass
    code = proc.wait(timeout=max(1.0, deadline - time.monotonic() + 30))
    text = _read(log_path)
    assert code == 0, text[-3000:]
    assert killed, text[-3000:]
    assert f"actor 0 (pid {actor_pids[0]}) exited with code -9; 1 actor(s) left" in text
    # The in-process server says at start that it listens on every interface, with its port.
    port = text.split("Reverb server in this process at localhost:")[1].split(
        " ")[0]
    assert f"Note: this Reverb server listens on every network interface ([::]:{port}) with " \
        f"no authentication" in text, text[:3000]
    summary = json.loads(_read(os.path.join(root, "summary.json")))
    assert summary["offline_step"] == 100 and summary["step"] == summary["final_step"]
    assert summary["step"] % 5 == 0  # the budget is checked at the weight pushes
    # The env steps are the actors' (replay inserts counted at the server): the budget, at most
    # what the server counted by the end of training, and what the final evaluation reports.
    env_steps = summary["online_env_steps"]
    assert summary["env_step_budget"] == 800 <= env_steps <= summary["throughput"][
        "replay/inserts"], summary
    assert summary["last_eval"]["online_env_steps"] == env_steps
    assert "its settings, as this learner's: samples per insert 4, min size 32, capacity 5000" \
        in text
    assert summary["replay_items"] >= 32
    actor1 = _read(os.path.join(root, "actors", "actor_1.log"))
    assert "collecting into" in actor1
    # The offline start is evaluated, and the bounds are checked against exact values at the
    # start and at the end: report files, per-delta metrics, before/after lines.
    assert summary["start_eval"]["online_env_steps"] == 0
    assert "bounds_start/lower_holds@0.0625" in summary["start_eval"]
    assert "bounds/upper_holds@0.9375" in summary["last_eval"]
    assert "lower_exact_normalized_score" in summary["last_eval"]
    report = _read(os.path.join(root, "bounds_report.md"))
    assert "### offline start" in report and "### after fine-tuning" in report
    assert os.path.exists(os.path.join(root, "bounds_report.png"))
    assert "[score] adaptive_normalized_score: offline start" in text
    # The penalty diagnostic: the weights of both bounds on offline states at the
    # start, on the new online states too at the end, the bounds against Monte-Carlo returns
    # at both, penalty.png against online steps.
    start, last = summary["start_eval"], summary["last_eval"]
    assert {"penalty/lower_weight_offline", "penalty/upper_weight_offline",
            "tight/lower_minus_mc@0.5", "tight/upper_minus_mc@0.5"} <= set(start)
    assert "penalty/lower_weight_new" not in start
    assert last["penalty/new_states"] == (summary["step"] - 100) * 16  # every online row
    assert 0 < last["penalty/lower_weight_new"] and 0 < last["penalty/upper_weight_new"]
    assert os.path.exists(os.path.join(root, "penalty.png"))
    assert "coverage >= 1 - delta at every grid delta" in text
    # The three exports, run in a fresh TensorFlow-only process, act (and carry state) exactly
    # as the learner's policies rebuilt here from its final checkpoint.
    assert {os.path.dirname(d) for d in summary["policy_dirs"].values()} == {root}
    _assert_exports_equal_in_process_policies(root, offline_dir, tmp_path)
  finally:
    if proc.poll() is None:
      proc.kill()
    proc.wait(timeout=10)
    out.close()
    for pid in actor_pids:
      try:
        os.kill(pid, 9)
      except ProcessLookupError:
        pass


@pytest.mark.slow
def test_cql_baseline_fine_tunes_through_the_same_pipeline(tmp_path):
  """--agent=cql: offline CQL on the gridworld data, then the same Reverb/actor pipeline with
  CQL's greedy policy + epsilon as the exploration policy (1 actor, 100 learner steps)."""
  offline = str(tmp_path / "offline_cql")
  summary = online_start.train_offline_gridworld(offline, num_steps=50, seed=0, log=lambda s: None,
                                           agent="cql")
  assert summary["agent"] == "cql"
  root = str(tmp_path / "run")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
  env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
  proc = forked_binary.run(
      "finetune_online.py",
      ["--game=gridworld", "--agent=cql", f"--offline_dir={offline}",
       f"--root_dir={root}", "--num_env_steps=400", "--batch_size=16", "--samples_per_insert=4",
       "--min_replay_size=32", "--replay_capacity=5000", "--log_interval=50",
       "--eval_episodes=1", "--eval_max_steps=10", "--actor_update_period=20",
       "--server_timeout_s=3", "--sample_timeout_s=10"], cwd=REPO, env=env, timeout=150)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
  result = json.loads(_read(os.path.join(root, "summary.json")))
  assert result["offline_step"] == 50 and result["step"] == 150
  scored = {k for k in result["last_eval"] if k.endswith("_score")}
  assert scored == {"lower_mean_score", "lower_normalized_score",   # CQL: its greedy policy,
                    "lower_exact_normalized_score"}                 # also scored exactly
  assert not any(k.startswith("bounds") for k in result["last_eval"])
  assert "tight/lower_holds@0.5" in result["last_eval"]  # Q against Monte-Carlo returns
  assert not any(k.startswith("tight/upper") for k in result["last_eval"])
  assert os.path.exists(os.path.join(root, "policy", "saved_model.pb"))
  assert json.loads(_read(os.path.join(root, "policy", "ccvl_policy.json"))) == {
      "game": "gridworld", "action_set": None}
  # A CCVL fine-tune refuses the CQL offline run, naming both.
  bad = online_config.OnlineConfig(offline_dir=offline, root_dir=str(tmp_path / "bad"),
                                   agent="ccvl")
  with pytest.raises(ValueError, match="holds a cql run .*, not --agent=ccvl"):
    online.run(bad, log=lambda s: None)


def _connect(cfg, log=lambda s: None):
  """The learner's phases up to connecting to its Reverb server (online.run's order)."""
  cfg.validate()
  runner = online._Runner(cfg, log, tf.distribute.get_strategy())  # pylint: disable=protected-access
  runner._resolve_config()  # pylint: disable=protected-access
  runner._build_learner()  # pylint: disable=protected-access
  runner._initialize_checkpointer_and_maybe_resume()  # pylint: disable=protected-access
  runner._connect_replay()  # pylint: disable=protected-access
  return runner


def test_a_server_with_another_rate_limiter_or_capacity_is_refused_naming_each(
    offline_dir, tmp_path, server):
  """The `server` fixture's table: SPI 2, min size 4, batch 4, capacity 1000, gridworld."""
  srv_cfg, address = server
  base = dict(game="gridworld", offline_dir=offline_dir, reverb_address=address, num_actors=0,
              min_replay_size=4, batch_size=4, replay_capacity=1000, eval_episodes=0,
              num_env_steps=100)
  cfg = online_config.OnlineConfig(root_dir=str(tmp_path / "a"), samples_per_insert=8.0, **base)
  with pytest.raises(online.ServerMismatch) as e:
    _connect(cfg)
  msg = str(e.value)
  assert msg.startswith(
      f"the Reverb server at {address} runs another 'replay' table than this learner's: "
      "samples_per_insert 2 (this learner's --samples_per_insert give 8); min_diff -8 (this "
      "learner's --batch_size, --offline_fraction, --samples_per_insert and --min_replay_size "
      "give 16); max_diff 24 (this learner's --batch_size, --offline_fraction, "
      "--samples_per_insert and --min_replay_size give 48). "
      "Its rate limiter sets how many env steps"), msg
  cfg = online_config.OnlineConfig(root_dir=str(tmp_path / "b"), samples_per_insert=2.0,
                            **dict(base, replay_capacity=500))
  with pytest.raises(online.ServerMismatch, match=r"max_size 1000 \(this learner's "
                                                  r"--replay_capacity give 500\)\. "):
    _connect(cfg)
  # The same settings: connected; the log gives the server's own values, and the env steps
  # are counted from the server's inserts since then.
  logs = []
  runner = _connect(online_config.OnlineConfig(root_dir=str(tmp_path / "c"), samples_per_insert=2.0,
                                        **base), logs.append)
  assert any("its settings, as this learner's: samples per insert 2, min size 4, capacity "
             "1000" in line for line in logs), logs
  assert runner._count_env_steps(100) == 0  # pylint: disable=protected-access
