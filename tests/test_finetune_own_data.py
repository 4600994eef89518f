"""Online fine-tuning of a ccvl_tf.fit run on own data in a Gymnasium environment
(ccvl_tf.finetune, finetune_online.py --game=gymnasium:CartPole-v1; experiments/online/
own_data.py, own_data_share.py).

The offline run (one per module): ccvl_tf.fit CCVL for 3 steps of a 16-unit MLP on 300 random
CartPole-v1 steps saved as an .npz (test_fit.py's collector), at alpha 0.3. In process: one
deterministic fine-tune of a few learner steps, half of each batch from that .npz, checked
against the record it starts from (network, alpha, |D|, learning rate, belief temperature, no
reward clip, the environment's own episode cap) and by hand (its step count, every offline
row); the resumed learner bit for bit its checkpoint; the fine-tuning run's own fingerprint;
the wrong combinations, each refused in one line before anything is written; a truncated
episode bootstrapping in both online replays. As a subprocess (slow): the binary, with actor
processes and a Reverb server, stopped at one budget and resumed to a larger one.
"""
import json
import os
import shutil
import types

import ccvl_tf

import numpy as np
import pytest
import tensorflow as tf

from ccvl_tf.envs import gymnasium_env
from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.experiments.online import deterministic
from ccvl_tf.experiments.online import distributed
from ccvl_tf.experiments.online import finetune as finetune_lib
from ccvl_tf.experiments.online import own_data
from ccvl_tf.experiments.online import runner as online
from ccvl_tf.runtime import training
from tests import forked_binary
from tests import run_copies
from tests.test_fit import _random_cartpole

ENV = "gymnasium:CartPole-v1"
FIT = dict(num_steps=3, batch_size=16, mlp_units=(16,), held_out_batches=2, eval_episodes=0,
           alpha=0.3, log_interval=3, checkpoint_interval=3)
# The fine-tune: deterministic schedule, batch 8 of which round(8 x 0.5) = 4 rows offline, 4
# online rows at SPI 4 (one env step per learner step), the first sample after 16 items.
FT = dict(schedule="deterministic", num_env_steps=40, num_actors=1, batch_size=8,
          offline_fraction=0.5, samples_per_insert=4.0, min_replay_size=16, replay_capacity=1000,
          checkpoint_interval=5, push_period=5, log_interval=5, eval_episodes=1)
OFFLINE_ROWS = 4
SEED_OFFSET = 50_000  # the offline share's stream: --seed + 50,000 (offline_share.SEED_OFFSET)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
  base = tmp_path_factory.mktemp("own_data")
  arrays = _random_cartpole(300)
  npz = str(base / "cartpole.npz")
  np.savez(npz, **arrays)
  result = ccvl_tf.fit(npz, "ccvl", env=ENV, root_dir=str(base / "fit"), log=lambda s: None,
                       **FIT)
  return types.SimpleNamespace(base=base, arrays=arrays, npz=npz, root=str(base / "fit"),
                               result=result, data=ccvl_tf.Transitions.from_npz(npz))


@pytest.fixture(scope="module")
def finetuned(fitted):
  """The fine-tune of FT through ccvl_tf.finetune, each batch its learner stepped on kept."""
  root = str(fitted.base / "online")
  trained, logs = [], []
  real = distributed.make_learner_step

  def recording(strategy, agent):
    step = real(strategy, agent)

    def learner_step(batch):
      trained.append({k: np.asarray(v) for k, v in batch.items()})
      return step(batch)
    return learner_step
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(distributed, "make_learner_step", recording)
    summary = ccvl_tf.finetune(fitted.root, env=ENV, root_dir=root, log=logs.append, **FT)
  return types.SimpleNamespace(root=root, summary=summary, trained=trained, logs=logs)


def _read(path):
  with open(path) as f:
    return json.load(f)


def _phases(cfg):
  """The learner's phases of online.run up to the restored (or resumed) checkpoint."""
  cfg.validate()
  runner = online._Runner(cfg, lambda s: None, tf.distribute.get_strategy())  # pylint: disable=protected-access
  runner._resolve_config()  # pylint: disable=protected-access
  runner._build_learner()  # pylint: disable=protected-access
  runner._initialize_checkpointer_and_maybe_resume()  # pylint: disable=protected-access
  return runner


def test_the_fit_run_fine_tunes_with_its_record_and_its_data(fitted, finetuned):
  s, data = finetuned.summary, fitted.data
  # Before online step k the schedule has inserted 16 + k transitions (4 online rows per step
  # at SPI 4); the budget is checked at every push (every 5 learner steps), so after learner
  # step t = 3 + k it holds first at the push of t = 30 (16 + 27 = 43 >= 40).
  assert (s["offline_step"], s["step"], s["online_env_steps"]) == (3, 30, 43)
  assert len(finetuned.trained) == 27
  # |D|: each of the 300 steps is a transition but a time-out row, the last observation only.
  n = 300 - int(fitted.arrays["timeouts"].sum())
  assert data.num_transitions == n
  for i, batch in enumerate(finetuned.trained):
    assert {k: v.shape[0] for k, v in batch.items()} == {k: 8 for k in batch}
    # The offline rows: batch i of the run's own transitions at seed 0 + 50,000.
    expected = data.batch(np.random.default_rng([SEED_OFFSET, i]).integers(0, n, OFFLINE_ROWS))
    for key, value in expected.items():
      np.testing.assert_array_equal(batch[key][-OFFLINE_ROWS:], value, err_msg=f"{key} {i}")
    # The online rows: CartPole's own steps, 1 per step, as the environment pays it.
    assert batch["reward"][:-OFFLINE_ROWS].tolist() == [1.0] * 4
  cfg = _read(os.path.join(finetuned.root, "online_config.json"))
  fit_summary = _read(os.path.join(fitted.root, "summary.json"))
  assert cfg["own_data"] == {"network": fit_summary["network"], "reward_clip": None}
  assert cfg["own_data"]["network"]["torso"] == "mlp"
  assert cfg["own_data"]["network"]["mlp_units"] == [16]
  assert cfg["eval_max_steps"] == 500  # CartPole-v1's TimeLimit, not the Atari-scale 2,000
  assert cfg["belief_temperature"] == fit_summary["belief_temperature"]
  assert cfg["offline_settings"]["learning_rate"] == 1e-3  # fit's vector default
  for key in ("adaptive_mean_score", "lower_mean_score", "bounds_mean_score"):
    assert s["start_eval"][key] >= 1 and s["last_eval"][key] >= 1  # CartPole: >= 1 step
  assert set(s["policy_dirs"]) == {"policy", "policy_fixed", "policy_bounds"}
  for path in s["policy_dirs"].values():
    assert os.path.isfile(os.path.join(path, "saved_model.pb"))
  assert any(n.startswith("events.") for n in os.listdir(
      os.path.join(finetuned.root, "summaries", "train")))
  assert any(line.startswith("step 5 (env steps ") for line in finetuned.logs)
  assert _read(os.path.join(finetuned.root, "checkpoints", training.FINGERPRINT))[
      "game"] == ENV


def test_the_learner_is_the_fit_runs_network_and_settings(fitted, tmp_path):
  runner = _phases(finetune_lib.config(fitted.root, env=ENV, root_dir=str(tmp_path / "r"),
                                       **FT))
  agent = runner.agent
  assert runner.start_step == 3
  assert (agent.config.alpha, agent.config.learning_rate) == (0.3, 1e-3)
  assert agent.lower.counts.dataset_size == fitted.data.num_transitions
  assert runner.cfg.bounds().reward_clip is None and agent.bounds.reward_clip is None
  # Q_l is the fit run's network, restored bit for bit (Q_u starts as its copy).
  fit_weights = [v.numpy() for v in fitted.result.agent.q_network.variables]
  for net in (agent.q_network, agent.upper_q_network):
    weights = [v.numpy() for v in net.variables]
    assert len(weights) == len(fit_weights)
    assert all(np.array_equal(a, b) for a, b in zip(weights, fit_weights))


@pytest.mark.parametrize("method", ["ccvl_lower", "cql"])
def test_the_baselines_start_from_their_fit_runs(fitted, tmp_path, method):
  """--agent=ccvl_lower (Q_l alone) from the CCVL run; --agent=cql from a CQL fit run (1 step
  on the same .npz): each learner is the run's network, restored bit for bit, at its alpha."""
  root = fitted.root
  result = fitted.result
  if method == "cql":
    root = str(tmp_path / "cql_fit")
    result = ccvl_tf.fit(fitted.npz, "cql", root_dir=root, log=lambda s: None,
                         **dict(FIT, num_steps=1))
  runner = _phases(finetune_lib.config(root, env=ENV, root_dir=str(tmp_path / "r"),
                                       method=method, **FT))
  assert runner.start_step == (1 if method == "cql" else 3)
  assert runner.agent.config.alpha == 0.3
  fit_weights = [v.numpy() for v in result.agent.q_network.variables]
  weights = [v.numpy() for v in runner.agent.q_network.variables]
  assert len(weights) == len(fit_weights)
  assert all(np.array_equal(a, b) for a, b in zip(weights, fit_weights))


def test_a_resume_restores_the_checkpoint_bit_for_bit_and_continues_the_offline_stream(
    fitted, finetuned, tmp_path):
  """The finished run's learner rebuilt as a resume builds it: its train step, env steps and
  offline step those of the last checkpoint, every tensor of it (saved again here) the
  checkpoint's, and the offline share continuing at batch 27 (learner steps since the start)."""
  cfg = online_config.OnlineConfig.from_record(
      _read(os.path.join(finetuned.root, "online_config.json")))
  runner = _phases(cfg)
  assert (runner.start_step, int(runner.env_steps.numpy()), runner.offline_step_value) == (
      30, 43, 3)
  saved = tf.train.load_checkpoint(runner.manager.latest_checkpoint)
  again = tf.train.load_checkpoint(runner.agent.make_checkpoint(
      offline_step=runner.offline_step, online_env_steps=runner.env_steps).write(
          str(tmp_path / "again")))
  names = [k for k in sorted(again.get_variable_to_shape_map())
           if k.endswith("/.ATTRIBUTES/VARIABLE_VALUE")]
  assert len(names) > 20  # both bounds' networks, Adam, counts, steps
  for name in names:
    np.testing.assert_array_equal(again.get_tensor(name), saved.get_tensor(name), name)
  runner._open_offline_share()  # pylint: disable=protected-access
  _, offline_it = runner._batches()  # pylint: disable=protected-access
  n = fitted.data.num_transitions
  expected = fitted.data.batch(np.random.default_rng([SEED_OFFSET, 27]).integers(
      0, n, OFFLINE_ROWS))
  got = next(offline_it)
  for key, value in expected.items():
    np.testing.assert_array_equal(got[key], value, err_msg=key)


def test_the_fine_tunes_own_settings_are_compared_on_a_rerun(fitted, finetuned, tmp_path):
  with pytest.raises(training.FingerprintMismatch, match=r"offline_fraction: 0.5 -> 0.25"):
    ccvl_tf.finetune(fitted.root, env=ENV, root_dir=finetuned.root, log=lambda s: None,
                     **dict(FT, offline_fraction=0.25))
  copy = str(tmp_path / "copy")
  shutil.copytree(finetuned.root, copy)
  summary = ccvl_tf.finetune(fitted.root, env=ENV, root_dir=copy, log=lambda s: None,
                             **dict(FT, offline_fraction=0.25, allow_config_change=True,
                                    export_policies=False))
  assert summary["config_changes"] == [{"step": 30, "changes": ["offline_fraction: 0.5 -> 0.25"]}]


def test_wrong_combinations_are_refused_in_one_line_before_anything_is_written(
    fitted, tmp_path):
  other = str(tmp_path / "other.npz")  # other data: the first 200 steps, the last a time-out
  first = {k: v[:200].copy() for k, v in fitted.arrays.items()}
  first["timeouts"][-1] = not first["terminals"][-1]
  np.savez(other, **first)
  no_env = run_copies.copy_run(fitted.root, tmp_path / "no_env", env=None)
  cases = [
      # Acrobot-v1: 6 observations, 3 actions; the data's CartPole 4 and 2.
      (fitted.root, "gymnasium:Acrobot-v1", "ccvl",
       r"^--game=gymnasium:Acrobot-v1 does not match the data --offline_dir .*fit trained on "
       r"\('.*cartpole.npz', .*summary.json 'data_spec'\): observations \[6\] vs the data's "
       r"\[4\]; 3 actions vs the data's 2$"),
      (no_env, "gridworld", "ccvl",
       r"^--game=gridworld: --offline_dir .*no_env is a run of ccvl_tf.fit on own data .*; its "
       r".*summary.json records no environment \('env' null\): give --game=gymnasium:<EnvId>$"),
      (fitted.root, "gridworld", "ccvl",
       r"^--game=gridworld: .* records 'env' 'gymnasium:CartPole-v1': give "
       r"--game=gymnasium:<EnvId>$"),
      (fitted.root, ENV, "cql",
       r"^--offline_dir .*fit holds a ccvl run \(.*summary.json 'method' 'ccvl'\), not "
       r"--agent=cql"),
      (run_copies.copy_run(fitted.root, tmp_path / "rem", method="rem"), ENV, "ccvl",
       r"^--offline_dir .*rem holds a rem run of ccvl_tf.fit .*: online fine-tuning starts "
       r"from a ccvl, cql, fixed_ccvl run$"),
      (run_copies.copy_run(fitted.root, tmp_path / "old", data_spec=run_copies.REMOVED), ENV,
       "ccvl",
       r"^.*summary.json has no 'data_spec' .*: rerun ccvl_tf.fit \(or train_offline.py "
       r"--dataset\) with the run's arguments"),
      (run_copies.copy_run(fitted.root, tmp_path / "edited", network=dict(
          fitted.result.summary["network"], mlp_units=[32])), ENV, "ccvl",
       r"^.*summary.json records 'network' = .*, but the checkpoints' .*fingerprint.json "
       r"records 'network'"),
      (run_copies.copy_run(fitted.root, tmp_path / "in_memory", data="arrays"), ENV, "ccvl",
       r"^--offline_fraction > 0 draws .* records 'data' = 'arrays': data the ccvl_tf.fit "
       r"call held in memory, which cannot be read again"),
      (run_copies.copy_run(fitted.root, tmp_path / "replaced", data=other), ENV, "ccvl",
       r"^--offline_fraction > 0 draws .*other.npz .* is not those transitions any more: its "
       r"fingerprint"),
      (fitted.root, "gymnasium:Pendulum-v1", "ccvl",
       r"^--game: gymnasium:Pendulum-v1: its action space Box\(.*\) is not Discrete"),
  ]
  for i, (offline_dir, env, method, message) in enumerate(cases):
    root = tmp_path / f"ft_{i}"
    with pytest.raises(ValueError, match=message) as e:
      ccvl_tf.finetune(offline_dir, env=env, root_dir=str(root), log=lambda s: None,
                       method=method, **FT)
    assert "\n" not in str(e.value)
    assert not root.exists(), message


def test_a_gymnasium_game_needs_a_run_on_own_data(tmp_path):
  gridworld_run = tmp_path / "gridworld"
  gridworld_run.mkdir()
  (gridworld_run / "summary.json").write_text(json.dumps(
      {"game": "gridworld", "agent": "ccvl_bounds", "counts": "exact"}))
  with pytest.raises(ValueError, match=r"^--game=gymnasium:CartPole-v1: online fine-tuning in "
                                       r"a Gymnasium environment starts from a run of "
                                       r"ccvl_tf.fit on own data .*holds a 'gridworld' run"):
    ccvl_tf.finetune(str(gridworld_run), env=ENV, root_dir=str(tmp_path / "r"), **FT)
  # A server's tables for a Gymnasium environment follow a run on own data's network.
  with pytest.raises(ValueError, match=r"starts from a run of ccvl_tf.fit on own data"):
    online_config.make_server_tables(online_config.OnlineConfig(game=ENV))


def test_the_evaluation_cap_is_the_environments_own_unless_given():
  """CartPole-v1 and Acrobot-v1 register a TimeLimit of 500 agent steps, CliffWalking-v1
  none; the gridworld, MinAtar and Atari keep 2,000."""
  assert online_config.OnlineConfig(game=ENV).eval_steps == 500
  assert online_config.OnlineConfig(game="gymnasium:Acrobot-v1").eval_steps == 500
  assert online_config.OnlineConfig(game=ENV, eval_max_steps=7).eval_steps == 7
  assert online_config.OnlineConfig(game="gridworld").eval_steps == 2000
  assert online_config.OnlineConfig(game="Breakout").eval_steps == 2000
  with pytest.raises(ValueError, match=r"^--eval_max_steps is needed with "
                                       r"--game=gymnasium:CliffWalking-v1, which registers no "
                                       r"TimeLimit"):
    online_config.OnlineConfig(game="gymnasium:CliffWalking-v1").validate_settings()


def test_finetune_takes_the_binarys_config_back_and_refuses_unknown_settings(tmp_path):
  cfg = online_config.OnlineConfig(offline_dir="off", game=ENV, root_dir=str(tmp_path),
                                   agent="cql", num_env_steps=7, offline_fraction=0.25,
                                   exploration_values={"beta": 0.3})
  assert finetune_lib.config(**finetune_lib.arguments(cfg)) == cfg
  with pytest.raises(ValueError, match=r"^unknown setting num_env_step; fine-tuning's "
                                       r"settings are .*num_env_steps"):
    finetune_lib.config("off", env=ENV, root_dir=str(tmp_path), num_env_step=5)


def _expected_transitions(seed, cap, actions):
  """(s, a, r, s', terminal) of CartPole-v1 played with gymnasium itself: reset(seed) first,
  then each action; an action after an episode's end only resets (as the TF-Agents wrapper's
  next step does); terminal is gymnasium's `terminated`, never its `truncated`. Returns (the
  transitions, each step's end: 'terminated', 'truncated' or '', whether the last action only
  reset)."""
  import gymnasium  # pylint: disable=g-import-not-at-top
  env = gymnasium.make("CartPole-v1", max_episode_steps=cap)
  obs, _ = env.reset(seed=seed)
  out, done, ends, reset = [], False, [], False
  for a in actions:
    reset = done
    if done:
      obs, _ = env.reset()
      done = False
      continue
    nxt, r, terminated, truncated, _ = env.step(a)
    out.append((obs, a, float(r), nxt, float(terminated)))
    ends.append("terminated" if terminated else "truncated" if truncated else "")
    obs, done = nxt, terminated or truncated
  return out, ends, reset


@pytest.mark.parametrize("cap, actions, ends", [
    # A cap of 3: every episode is truncated (CartPole cannot fall in 3 steps).
    (3, [1, 0, 1, 0, 0, 1, 0, 1], ["", "", "truncated", "", "", "truncated"]),
    # Pushing right until the pole falls: a termination, then a new episode.
    (None, [1] * 12 + [0, 0], None),
])
def test_a_truncated_episode_bootstraps_in_the_online_replays(finetuned, cap, actions, ends):
  """The actors' loop (collect_steps) over a CartPole-v1 of the fine-tune's own-data learner
  (its online_config.json read as an actor reads it), scripted actions, into the deterministic
  schedule's replay and the Reverb table: the transitions are gymnasium's own, a truncated
  step keeps terminal 0 (discount 1: it bootstraps) and a terminated one has terminal 1."""
  import reverb  # pylint: disable=g-import-not-at-top
  from tf_agents.replay_buffers import reverb_utils  # pylint: disable=g-import-not-at-top
  from ccvl_tf.data import reverb_replay  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.online import actor as online_actor  # pylint: disable=g-import-not-at-top
  from tests.test_online import _ScriptedPolicy  # pylint: disable=g-import-not-at-top
  expected, got_ends, last_reset = _expected_transitions(5, cap, actions)
  if ends is not None:
    assert got_ends == ends
  else:
    assert "terminated" in got_ends
  cfg = online_config.OnlineConfig.read_record(
      os.path.join(finetuned.root, "online_config.json"))
  tss, act = online_config.specs(cfg.game)
  agent = online_config.build_actor_agent(cfg, tss, act)
  env = gymnasium_env.GymnasiumEnvironment("CartPole-v1", seed=5, max_episode_steps=cap)
  scripted = _ScriptedPolicy(actions, env.time_step_spec(), env.action_spec(),
                             agent.exploration_policy.info_spec)
  trajectories = []
  online_actor.collect_steps(env, scripted.policy, trajectories.append, env.reset(), (),
                             len(actions))
  if cap is not None:  # the truncation itself: the third step is LAST with discount 1
    assert (int(trajectories[2].next_step_type), float(trajectories[2].discount)) == (2, 1.0)
  seeded = deterministic.SeededReplay(capacity=100, seed=0)
  observe = seeded.observer()
  # The run's replay table signature, under a rate limiter that never blocks (MinSize 1): the
  # run's own SampleToInsertRatio stops inserts a few items past its min size when nothing
  # samples.
  replay_signature, _ = online_config.server_signatures(cfg.game, cfg.bounds(), cfg.agent,
                                                        cfg.offline_settings, cfg.own_data)
  table = reverb.Table(reverb_replay.REPLAY_TABLE, sampler=reverb.selectors.Uniform(),
                       remover=reverb.selectors.Fifo(), max_size=1000,
                       rate_limiter=reverb.rate_limiters.MinSize(1), signature=replay_signature)
  server, address = reverb_replay.start_server([table])
  try:
    to_reverb = reverb_utils.ReverbAddTrajectoryObserver(
        reverb.Client(address), reverb_replay.REPLAY_TABLE, sequence_length=2, stride_length=1)
    for traj in trajectories:
      observe(traj)
      to_reverb(traj)
    to_reverb.flush()
    sampled = set()
    ds = reverb_replay.replay_dataset(agent.exploration_policy.trajectory_spec, address, 1,
                                      rate_limiter_timeout_ms=1000)
    for batch in ds.take(300):
      sampled.add(tuple(np.concatenate([np.asarray(batch[k][0], np.float64).ravel() for k in (
          "observation", "action", "reward", "next_observation", "terminal")])))
  finally:
    server.stop()
  # A last step that is no reset waits for the next step (its pair) in both replays.
  items = [(o, int(a), float(r), o2, float(t)) for o, a, r, o2, t in seeded._items]  # pylint: disable=protected-access
  assert len(items) == len(expected) - (0 if last_reset else 1)
  for (o, a, r, o2, t), (eo, ea, er, eo2, et) in zip(items, expected):
    np.testing.assert_array_equal(o, eo)
    np.testing.assert_array_equal(o2, eo2)
    assert (a, r, t) == (ea, er, et)
  as_rows = {tuple(np.concatenate([np.asarray(x, np.float64).ravel() for x in e]))
             for e in expected[:len(items)]}
  assert sampled == as_rows  # 300 draws of <= 12 items miss one with probability < 1e-10


@pytest.mark.slow
def test_the_binary_fine_tunes_with_actor_processes_and_resumes(fitted, tmp_path):
  """finetune_online.py with one actor process and the in-process Reverb server, to 120 env
  steps; the same command to 240 resumes from its last checkpoint, the server from its Reverb
  checkpoint, and trains on from there."""
  root = str(tmp_path / "run")
  args = [f"--offline_dir={fitted.root}", f"--game={ENV}", f"--root_dir={root}",
          "--num_actors=1", "--batch_size=16", "--offline_fraction=0.25",
          "--samples_per_insert=4", "--min_replay_size=32", "--replay_capacity=5000",
          "--checkpoint_interval=10", "--log_interval=10", "--eval_episodes=1",
          "--actor_update_period=20", "--push_period=5", "--server_timeout_s=5",
          "--sample_timeout_s=20", "--noexport_policies"]
  env = forked_binary.binary_env(PYTHONPATH=os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))))
  first = forked_binary.run("finetune_online.py", args + ["--num_env_steps=120"], env=env,
                            timeout=300)
  assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
  step = _read(os.path.join(root, "summary.json"))["step"]
  second = forked_binary.run("finetune_online.py", args + ["--num_env_steps=240"], env=env,
                             timeout=300)
  assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
  out = second.stdout
  assert f"Resumed from {root}/checkpoints/ckpt-{step} (train step {step})" in out, out[-3000:]
  assert "Restored the offline checkpoint" not in out
  items = int(out.split("Reverb replay table at ")[1].split(": ")[1].split(" items")[0])
  assert items >= 120  # the first run's inserts, restored from the Reverb checkpoint
  summary = _read(os.path.join(root, "summary.json"))
  assert summary["start_step"] == step < summary["step"]
  assert summary["offline_step"] == 3 and summary["online_env_steps"] >= 240
  assert summary["config_changes"] == []  # --num_env_steps is a budget, not compared
  assert "Offline share of each batch: 4 transitions of " in out
