"""ccvl_tf.fit end to end on one's own data: random CartPole-v1 transitions held as numpy arrays
(collected here with gymnasium itself), the one call, both CCVL policies scored in the real
environment, the exports reloaded in a process that imports only TensorFlow, exact resume and
the refusal of other settings; and train_offline.py on the same data as an .npz."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ccvl_tf
from ccvl_tf.experiments.fit import own_data

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = "gymnasium:CartPole-v1"
# Tiny: a few train steps of a small MLP; what is checked is the run's plumbing and records.
SMALL = dict(num_steps=6, batch_size=16, mlp_units=(16,), log_interval=3, checkpoint_interval=3,
             held_out_batches=2)


def _random_cartpole(num_steps=600, seed=0):
  """d3rlpy MDPDataset arrays of a uniformly random CartPole-v1 player; the last step of the
  collection is a time-out when its episode did not terminate."""
  import gymnasium as gym
  env = gym.make("CartPole-v1")
  obs, _ = env.reset(seed=seed)
  rng = np.random.default_rng(seed)
  out = {k: [] for k in ("observations", "actions", "rewards", "terminals", "timeouts")}
  for t in range(num_steps):
    a = int(rng.integers(2))
    nxt, r, term, trunc, _ = env.step(a)
    for k, v in zip(out, (obs, a, r, term, trunc or (t == num_steps - 1 and not term))):
      out[k].append(v)
    obs = nxt
    if term or trunc:
      obs, _ = env.reset()
  return {k: np.asarray(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def arrays():
  return _random_cartpole()


@pytest.fixture(scope="module")
def data(arrays):
  return ccvl_tf.Transitions.from_arrays(**arrays)


@pytest.fixture(scope="module")
def run(data, tmp_path_factory):
  root = str(tmp_path_factory.mktemp("fit") / "cartpole")
  lines = []
  result = ccvl_tf.fit(data, "ccvl", env=ENV, root_dir=root, eval_episodes=2, log=lines.append,
                       **SMALL)
  return root, result, lines


def _hand_episode_returns(arrays):
  """Each episode's return as the data's transitions hold it, by hand: CartPole pays 1 per
  step; a terminated episode of L steps has L transitions, the timed-out last one L - 1 (its
  last step has no next observation)."""
  ends = np.flatnonzero(arrays["terminals"] | arrays["timeouts"])
  starts = np.concatenate([[0], ends[:-1] + 1])
  return np.array([(e - s + 1) - (0 if arrays["terminals"][e] else 1)
                   for s, e in zip(starts, ends)], np.float64)


def test_the_call_returns_the_agent_policies_paths_and_table(run, arrays):
  root, result, lines = run
  assert set(result.policies) == {"policy", "policy_fixed"}
  assert result.agent.train_step_counter.numpy() == SMALL["num_steps"]
  for name in ("policy", "policy_fixed"):
    assert os.path.isfile(os.path.join(result.paths[name], "saved_model.pb"))
  for key in ("results_md", "results_csv", "results_json", "results_png", "summary"):
    assert os.path.isfile(result.paths[key]), key
  assert any(n.startswith("events.") for _, _, names in os.walk(result.paths["summaries"])
             for n in names)  # TensorBoard
  assert [r["policy"] for r in result.table] == ["CCVL (adaptive)", "Fixed-CCVL", "random",
                                                  "data (its episodes)"]
  assert [r["episodes"] for r in result.table[:3]] == [2, 2, 2]
  for row in result.table[:3]:  # a CartPole score is the episode's length: whole, >= 1
    assert all(s >= 1 and s == int(s) for s in row["scores"]), row
  # The adaptive row lists the squared Bellman errors its belief summed in each episode (K = 8
  # grid deltas): every transition of an episode is scored once (the LAST one too, the FIRST
  # step after it starts a new stream), so the counts are the lengths, here the scores.
  adaptive = result.table[0]
  assert adaptive["sq_error_count"] == [int(s) for s in adaptive["scores"]]
  assert [len(e) for e in adaptive["sq_error_sum"]] == [8, 8]
  assert all(np.isfinite(v) and v >= 0 for e in adaptive["sq_error_sum"] for v in e)
  assert not any("sq_error_sum" in r or "sq_error_count" in r for r in result.table[1:])
  saved = json.load(open(result.paths["results_json"]))
  assert saved[0]["sq_error_sum"] == adaptive["sq_error_sum"]
  hand = _hand_episode_returns(arrays)
  data_row = result.table[3]
  assert data_row["episodes"] == len(hand)
  assert data_row["mean"] == pytest.approx(hand.mean())
  summary = json.load(open(result.paths["summary"]))
  assert summary["step"] == SMALL["num_steps"] and summary["env"] == ENV
  assert 0 < summary["fixed_delta"] < 1
  assert [r["policy"] for r in summary["results"]] == [r["policy"] for r in result.table]
  assert any("ETA" in line for line in lines)  # progress
  # What fine-tuning starts from (experiments/online/own_data.py): CartPole's 4 float
  # observations and 2 actions, rewards as the data gives them; TensorFlow's threads as
  # train_offline.py sets them (2 by default), with the device line.
  assert summary["data_spec"] == {"observation_shape": [4], "observation_dtype": "float32",
                                  "num_actions": 2}
  assert summary["reward_clip"] is None and summary["settings"]["tf_threads"] == 2
  assert set(summary["tensorflow"]) == {"tf_threads", "deterministic"}
  assert any(line.startswith("device: ") for line in lines)


def test_rerun_resumes_and_scores_the_same(run, data):
  root, first, _ = run
  lines = []
  again = ccvl_tf.fit(data, "ccvl", env=ENV, root_dir=root, eval_episodes=2,
                      log=lines.append, **SMALL)
  assert any("nothing to do" in line for line in lines), lines
  assert [r["scores"] for r in again.table] == [r["scores"] for r in first.table]


def test_other_settings_in_the_same_root_dir_are_refused(run, data):
  root, _, _ = run
  with pytest.raises(ValueError, match="root_dir"):
    ccvl_tf.fit(data, "ccvl", env=ENV, root_dir=root, eval_episodes=2, alpha=5.0,
                log=lambda s: None, **SMALL)


def test_resume_is_exact(data, tmp_path):
  """3 steps, then on to 6, gives the weights of 6 steps in one go."""
  quiet = lambda s: None
  whole = ccvl_tf.fit(data, "cql", root_dir=str(tmp_path / "whole"), log=quiet, **SMALL)
  ccvl_tf.fit(data, "cql", root_dir=str(tmp_path / "parts"), log=quiet,
              **dict(SMALL, num_steps=3))
  parts = ccvl_tf.fit(data, "cql", root_dir=str(tmp_path / "parts"), log=quiet, **SMALL)
  a = [v.numpy() for v in whole.agent.q_network.variables]
  b = [v.numpy() for v in parts.agent.q_network.variables]
  assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
  assert not os.path.exists(tmp_path / "whole" / "results.md")  # no environment: no table


_LOAD = r"""
import collections, json, sys
import numpy as np
import tensorflow as tf
# TF-Agents' TimeStep as a plain namedtuple: the export takes any namedtuple of these fields.
TimeStep = collections.namedtuple("TimeStep", "step_type reward discount observation")
obs = np.array(json.loads(sys.argv[2]), np.float32)
policy = tf.saved_model.load(sys.argv[1])
actions = []
state = policy.get_initial_state(1)
for i in range(obs.shape[0]):
  one = TimeStep(tf.zeros([1], tf.int32), tf.zeros([1], tf.float32), tf.ones([1], tf.float32),
                 tf.constant(obs[i:i + 1]))
  out = policy.action(one, state)
  state = out.state
  actions.append(int(out.action.numpy()[0]))
assert not any(m.startswith(("ccvl_tf", "tf_agents")) for m in sys.modules), "not TF-only"
print(json.dumps(actions))
"""


def test_exports_load_in_a_tensorflow_only_process(run, data):
  _, result, _ = run
  obs = data.observations[:5]
  for name in ("policy_fixed", "policy"):
    out = subprocess.run([sys.executable, "-c", _LOAD, result.paths[name],
                          json.dumps(obs.tolist())], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert out.returncode == 0, out.stderr[-3000:]
    actions = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(actions) == 5 and set(actions) <= {0, 1}
    if name == "policy_fixed":  # no state: the in-process policy's greedy actions
      from tf_agents.trajectories import time_step as ts
      import tensorflow as tf
      step = ts.restart(tf.constant(obs), batch_size=5)
      expected = result.policies[name].action(step).action.numpy().tolist()
      assert actions == expected


def test_a_mismatched_environment_is_one_line(data, tmp_path):
  with pytest.raises(ValueError, match=r"env='gymnasium:Acrobot-v1' does not match the data"):
    ccvl_tf.fit(data, "ccvl", env="gymnasium:Acrobot-v1", root_dir=str(tmp_path / "r"),
                log=lambda s: None, **SMALL)


def test_unknown_settings_are_refused_naming_them(data, tmp_path):
  with pytest.raises(ValueError, match="unknown setting num_step;"):
    ccvl_tf.fit(data, "ccvl", root_dir=str(tmp_path / "r"), num_step=5)
  with pytest.raises(ValueError, match="method=.bc. does not take --alpha"):
    ccvl_tf.fit(data, "bc", root_dir=str(tmp_path / "r"), alpha=1.0)


@pytest.mark.parametrize("env", ["gymnasium:CartPole-v1", "minatar/Breakout", "gridworld"])
def test_a_directory_of_no_own_data_format_for_a_non_atari_env_is_one_line(env, tmp_path):
  # A directory is read as DQN Replay data, which is Atari's: said before any run starts.
  empty = tmp_path / "empty"
  empty.mkdir()
  with pytest.raises(ValueError, match=rf"^data {empty}: not an .npz file, a Minari dataset "
                     rf"directory or 'tfds:<dir>', so it is read as a DQN Replay directory, "
                     rf"which is Atari data; env '{env}' takes own data"):
    ccvl_tf.fit(str(empty), "ccvl", env=env, root_dir=str(tmp_path / "r"))
  assert not (tmp_path / "r").exists()


def test_a_replay_directory_without_checkpoint_files_is_refused_before_reading(tmp_path):
  # Every route's --dataset_dir check (OfflineConfig.validate): before the ALE starts.
  from ccvl_tf.experiments.offline import config as offline_config
  empty = tmp_path / "empty"
  empty.mkdir()
  with pytest.raises(ValueError, match=rf"^--dataset_dir {empty} holds no Dopamine checkpoint "
                     rf"files \(expected a replay_logs directory"):
    offline_config.OfflineConfig(dataset_dir=str(empty),
                                 root_dir=str(tmp_path / "r")).validate()
  (empty / "replay_logs").mkdir()  # the directory a run's replay_logs is read from
  with pytest.raises(ValueError, match=r"empty/replay_logs holds no Dopamine checkpoint files"):
    offline_config.OfflineConfig(dataset_dir=str(empty),
                                 root_dir=str(tmp_path / "r")).validate()


def test_the_belief_prior_reaches_the_adaptive_policy_or_is_refused_without_one(data, tmp_path):
  from ccvl_tf.experiments.fit import settings
  given = settings.FitSettings(root_dir=str(tmp_path / "r"), belief_prior="heldout_sum")
  assert settings.FitSettings().belief_prior == "uniform"
  assert own_data.plan(data, "ccvl", None, given, {}).agent_settings.belief_prior == (
      "heldout_sum")
  with pytest.raises(ValueError, match=r"^belief_prior=heldout_sum is a setting of the "
                                       r"adaptive policy of ccvl, fixed_ccvl; method=bc has "
                                       r"none: leave it out$"):
    own_data.plan(data, "bc", None, given, {})
  with pytest.raises(ValueError, match=r"^belief_prior must be one of uniform, heldout_mean, "
                                       r"heldout_sum, got 'sum'$"):
    ccvl_tf.fit(data, "ccvl", root_dir=str(tmp_path / "r"), belief_prior="sum")


def test_mlp_units_of_every_spelling_and_a_wrong_one_is_one_line_naming_it(data, tmp_path):
  from ccvl_tf.experiments.fit import settings
  for given in ("64,32", ["64", "32"], (64, 32), np.array([64, 32])):
    assert settings.parse_units(given) == (64, 32)
  assert settings.parse_units(64) == settings.parse_units(np.int64(64)) == (64,)  # one layer
  for bad in (True, 64.5, None, (), "64,x", (64, 0), object()):
    with pytest.raises(ValueError, match=r"^mlp_units must be one or more integers >= 1 "):
      settings.parse_units(bad)
  with pytest.raises(ValueError, match=r"^mlp_units must be one or more integers >= 1 .*got None$"):
    ccvl_tf.fit(data, "cql", root_dir=str(tmp_path / "r"), mlp_units=None)
  assert not (tmp_path / "r").exists()  # refused before the run directory is made


def test_torso_follows_the_observations():
  from ccvl_tf.experiments.fit import settings
  assert settings.torso_for((4,), np.float32) == "mlp"
  assert settings.torso_for((10, 10, 4), np.uint8) == "minatar"
  assert settings.torso_for((84, 84, 4), np.uint8) == "nature"
  with pytest.raises(ValueError, match="no torso takes them"):
    settings.torso_for((3, 4), np.float32)


@pytest.mark.slow
def test_train_offline_on_an_npz(arrays, tmp_path):
  """The binary on the data as an .npz, with --tf_threads=1 (a fresh process: TensorFlow's
  runtime starts in the run, so the count it then reports is the flag's)."""
  path = str(tmp_path / "cartpole.npz")
  np.savez_compressed(path, **arrays)
  cmd = [sys.executable, os.path.join(ROOT, "binaries", "train_offline.py"),
         f"--dataset={path}", f"--game={ENV}", f"--root_dir={tmp_path / 'run'}",
         "--agent=cql", "--num_steps=4", "--batch_size=16", "--mlp_units=16",
         "--eval_episodes=1", "--checkpoint_interval=2", "--tf_threads=1"]
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
  out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
  assert out.returncode == 0, out.stderr[-3000:]
  assert "Done: 4 steps" in out.stdout
  rows = json.load(open(tmp_path / "run" / "results.json"))
  assert [r["policy"] for r in rows] == ["CQL", "random", "data (its episodes)"]
  summary = json.load(open(tmp_path / "run" / "summary.json"))
  assert summary["settings"]["tf_threads"] == 1
  from ccvl_tf.experiments import tf_setup  # pylint: disable=g-import-not-at-top
  if not tf_setup.visible_gpus():  # with a GPU TensorFlow keeps its own threads (tf_setup)
    assert summary["tensorflow"] == {"tf_threads": 1, "deterministic": False}
    assert "device: CPU (no GPU visible), 1 TensorFlow threads (--tf_threads)" in out.stdout
  # A DQN Replay setting with own data: one line naming it.
  bad = subprocess.run(cmd[:3] + [f"--root_dir={tmp_path / 'bad'}", "--subset=1%"],
                       capture_output=True, text=True, timeout=600, env=env)
  assert bad.returncode != 0
  assert "--subset: DQN Replay settings; with --dataset" in bad.stderr
  assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr

