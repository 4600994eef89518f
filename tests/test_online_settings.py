"""The offline learner's network and loss settings carried into online fine-tuning
(experiments/online/start.py `offline_settings`, OnlineConfig.offline_settings): read from the
offline run's summary.json in each layout that writes one (train_offline.py's options given and
preset, compare.py's flat learner config, none), into the learner, the actors (their
online_config.json, both schedules) and the server's tables; invalid records named by file and
key; an online run started before the settings were kept resumes.

Offline runs: the gridworld's, 20 steps (`train_offline_gridworld`), one with the IQN cosine
head (the paper preset's head; the gridworld's own is the monotone one) and one with the
reading 'bound' (the gridworld's own is 'bonus'; the same variables).
"""
import json
import os

import ccvl_tf  # noqa: F401

import pytest
import tensorflow as tf

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.algorithm import readings
from ccvl_tf.data import reverb_replay
from ccvl_tf.experiments.offline import presets
from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.experiments.online import deterministic as online_deterministic
from ccvl_tf.experiments.online import runner as online
from ccvl_tf.experiments.online import start as online_start


def _offline(root, **options):
  online_start.train_offline_gridworld(str(root), num_steps=20, seed=0, log=lambda s: None,
                                       ccvl_options=options)
  return str(root)


@pytest.fixture(scope="module")
def cosine_dir(tmp_path_factory):
  return _offline(tmp_path_factory.mktemp("cosine"), delta_head="cosine")


def _runner(offline_dir, root, logs=None, **more):
  """The learner's phases up to the restored offline (or resumed) checkpoint (online.run's
  order), on the gridworld."""
  cfg = online_config.OnlineConfig(game="gridworld", offline_dir=offline_dir, root_dir=str(root),
                                   num_actors=1, eval_episodes=0, penalty_diagnostic=False,
                                   **more)
  cfg.validate()
  os.makedirs(cfg.root_dir, exist_ok=True)
  runner = online._Runner(cfg, (logs if logs is not None else []).append,  # pylint: disable=protected-access
                          tf.distribute.get_strategy())
  runner._resolve_config()  # pylint: disable=protected-access
  runner._build_learner()  # pylint: disable=protected-access
  runner._initialize_checkpointer_and_maybe_resume()  # pylint: disable=protected-access
  return runner


def _shapes(variables):
  return [(tuple(v.shape), v.dtype.name) for v in tf.nest.flatten(variables)]


@pytest.mark.slow
def test_the_cosine_head_of_the_offline_run_is_the_learners_and_every_actors(cosine_dir,
                                                                            tmp_path):
  logs = []
  runner = _runner(cosine_dir, tmp_path / "online", logs)
  cfg = runner.cfg
  assert cfg.offline_settings == {"delta_head": "cosine"}
  assert any("offline learner's settings" in line and "delta_head=cosine" in line
             for line in logs), logs
  # The offline checkpoint restored into both bounds (the cosine head's variables).
  assert runner.offline_step_value == 20
  assert runner.agent.config.delta_head == "cosine"
  assert runner.agent.upper.config.delta_head == "cosine"
  assert isinstance(runner.agent.config.reading, readings.bonus.Bonus)  # the gridworld's
  pushed = online_config.pushed_variables(runner.agent, runner.control)
  # An actor process builds from online_config.json: the record, through JSON.
  actor_cfg = online_config.OnlineConfig.from_record(json.loads(json.dumps(cfg.record())))
  assert actor_cfg.offline_settings == {"delta_head": "cosine"}
  actor = online_config.build_actor_agent(actor_cfg, runner.tss, runner.act)
  assert actor.config.delta_head == "cosine"
  actor_vars = online_config.pushed_variables(actor, online_config.control_variables())
  assert _shapes(actor_vars) == _shapes(pushed)
  # The server's 'variables' table takes these weights.
  _, var_sig = online_config.server_signatures(cfg.game, cfg.bounds(), cfg.agent,
                                               cfg.offline_settings)
  assert _shapes(var_sig) == _shapes(reverb_replay.variable_signature(pushed))
  # The deterministic schedule's in-process actors: the same network, the learner's weights.
  actors = online_deterministic.InProcessActors(cfg, pushed, runner.offline_step_value)
  for a in actors._actors:  # pylint: disable=protected-access
    assert _shapes(a["variables"]) == _shapes(pushed)
  # An exported policy is made from the learner (its q_network: the cosine head's).
  exports, _ = online_config.agent_spec(cfg.agent).policies(
      runner.agent, runner.tss, runner.act, None, runner.settings)
  assert exports["policy_fixed"]._q_network is runner.agent.q_network  # pylint: disable=protected-access


def _without_recorded_settings(cosine_dir, offline):
  """The cosine run's checkpoints under a summary.json that records no settings: what
  fine-tuning did before the settings were carried (the defaults' monotone head)."""
  offline.mkdir()
  os.symlink(os.path.join(cosine_dir, "checkpoints"), offline / "checkpoints")
  with open(os.path.join(cosine_dir, "summary.json")) as f:
    summary = json.load(f)
  del summary["config"]
  with open(offline / "summary.json", "w") as f:
    json.dump(summary, f)
  return str(offline)


def test_without_the_recorded_settings_the_cosine_checkpoint_is_refused_naming_the_head(
    cosine_dir, tmp_path):
  offline = _without_recorded_settings(cosine_dir, tmp_path / "offline")
  with pytest.raises(ValueError, match="does not fit this agent/game/network.*this learner's "
                     "delta head is 'cosine_monotone'"):
    _runner(offline, tmp_path / "online")


@pytest.mark.parametrize("case", ["checkpoint does not fit", "no checkpoint"])
def test_a_refused_offline_checkpoint_leaves_no_root_dir(cosine_dir, tmp_path, case):
  if case == "no checkpoint":
    offline = str(tmp_path / "offline")
    os.makedirs(offline)
    match = "no checkpoint in"
  else:
    offline = _without_recorded_settings(cosine_dir, tmp_path / "offline")
    match = "does not fit this agent/game/network"
  root = tmp_path / "online"
  cfg = online_config.OnlineConfig(game="gridworld", offline_dir=offline, root_dir=str(root),
                                   num_actors=1, eval_episodes=0, penalty_diagnostic=False)
  with pytest.raises(ValueError, match=match):
    online.run(cfg, log=lambda s: None)
  assert not root.exists()


def test_reading_bound_is_the_learners_and_an_earlier_run_resumes_with_a_note(tmp_path):
  offline = _offline(tmp_path / "offline", reading="bound")
  root = tmp_path / "online"
  runner = _runner(offline, root)
  assert runner.cfg.offline_settings == {
      "reading": "bound", "gap": "logsumexp", "delta_weight": "sqrt_log",
      "count_weight": "linear", "train_delta": None}
  assert isinstance(runner.agent.config.reading, readings.bound.Bound)
  # Q_u is the upper pair loss of the same config: its reading is the bound's too.
  assert isinstance(runner.agent.upper.config.reading, readings.bound.Bound)
  # An online run of this offline run started before the settings were kept: its
  # online_config.json has no 'offline_settings' (the defaults), its checkpoint one step on.
  old_record = runner.cfg.record()
  del old_record["offline_settings"]
  assert online_config.OnlineConfig.from_record(old_record).offline_settings == {}
  with open(root / "online_config.json", "w") as f:
    json.dump(old_record, f)
  runner.agent.train_step_counter.assign_add(1)
  runner.manager.save(checkpoint_number=21)
  logs = []
  resumed = _runner(offline, root, logs)
  assert resumed.start_step == 21 and resumed.offline_step_value == 20
  assert isinstance(resumed.agent.config.reading, readings.bound.Bound)
  resumed._note_changed_offline_settings(str(root / "online_config.json"))  # pylint: disable=protected-access
  assert any(line.startswith("Note: this run's earlier start trained with the offline "
                             "settings {} (the defaults)") and "'reading': 'bound'" in line
             for line in logs), logs


def _summary(tmp_path, summary):
  path = tmp_path / "summary.json"
  path.write_text(json.dumps(summary))
  return str(path)


def test_each_summary_layout_gives_the_offline_learners_settings(tmp_path):
  # train_offline.py --preset=paper: the preset's reading, head, TD loss and count normalization
  # ('settings'); alpha (an online flag) is not among them.
  # (as runs stored it when the preset also named the default reading).
  paper = {"config": {"preset": "paper", "ccvl_options": {}, "alpha": None},
           "settings": {"alpha": 0.1, "reading": "paper", "delta_head": "cosine",
                        "td_loss": "squared", "count_normalization": "none"}}
  assert online_start.offline_settings(paper, "s.json") == {
      "reading": "paper", "delta_head": "cosine", "td_loss": "squared",
      "count_normalization": "none"}
  # Today's: the preset sets only what differs from CCVL's default reading.
  today = dict(paper, settings={"alpha": 0.1, **presets.PAPER_READING})
  assert online_start.offline_settings(today, "s.json") == {
      "delta_head": "cosine", "td_loss": "squared", "count_normalization": "none"}
  # --reading=bound under the paper preset: the flag given wins over the preset's reading.
  given = {"config": {"ccvl_options": {"reading": "bound", "gap": "max"}},
           "settings": {"alpha": 0.1, "delta_head": "cosine"}}
  out = online_start.offline_settings(given, "s.json")
  assert out == {"reading": "bound", "gap": "max", "delta_weight": "sqrt_log",
                 "count_weight": "linear", "train_delta": None, "delta_head": "cosine"}
  settings = online_config.agent_spec("ccvl").resolve(online_config.agent_settings(
      "gridworld", online_config.OnlineConfig().bounds(), offline_settings=out))
  assert settings.agent_config.reading == readings.bound.Bound(gap="max")
  assert settings.agent_config.delta_head == "cosine"
  assert settings.agent_config.td_loss == "squared"  # the gridworld's, not recorded
  # compare.py: the learner's config flat (CCVLConfig.record); the older name 'objective'.
  flat = ccvl_agent.CCVLConfig().with_values(
      {"reading": "bonus", "gap_weight": 0.5, "td_loss": "squared", "count_ridge": 0.01}).record()
  out = online_start.offline_settings({"config": flat}, "s.json")
  assert out["reading"] == "bonus" and out["gap_weight"] == 0.5
  assert (out["td_loss"], out["count_ridge"], out["delta_head"]) == (
      "squared", 0.01, "cosine_monotone")
  # The training settings of CCVLConfig's defaults (ccvl_tf/agents/ccvl_agent.py, q_agent_base.py).
  assert {k: out[k] for k in ("num_deltas", "num_pairs", "dr3_coef", "gamma", "adam_epsilon",
                              "target_update_period")} == {
      "num_deltas": 8, "num_pairs": 2, "dr3_coef": 0.03, "gamma": 0.99,
      "adam_epsilon": 3.125e-4, "target_update_period": 2000}
  assert "alpha" not in out and "learning_rate" not in out
  # CQL takes the TD loss and the shared training settings, not CCVL's.
  assert online_start.offline_settings({"config": flat}, "s.json", "cql") == {
      "td_loss": "squared", "dr3_coef": 0.03, "gamma": 0.99, "adam_epsilon": 3.125e-4,
      "target_update_period": 2000}
  # train_offline.py --preset=demo: DR3 off ('settings'), N and M at the top level; the
  # learning rate and alpha (online flags) are not taken.
  demo = {"config": {"preset": "demo", "ccvl_options": {}, "num_deltas": 8, "num_pairs": 2,
                     "dr3_coef": None},
          "settings": {"alpha": 1.0, "learning_rate": 1e-3, "dr3_coef": 0.0}}
  assert online_start.offline_settings(demo, "s.json") == {
      "num_deltas": 8, "num_pairs": 2, "dr3_coef": 0.0}
  settings = online_config.agent_spec("ccvl").resolve(online_config.agent_settings(
      "Breakout", online_config.OnlineConfig().bounds(),
      offline_settings=online_start.offline_settings(demo, "s.json")))
  assert settings.agent_config.dr3_coef == 0.0
  assert online_config.agent_spec("ccvl").resolve(online_config.agent_settings(
      "Breakout", online_config.OnlineConfig().bounds())).agent_config.dr3_coef == 0.03
  # No settings recorded (older runs, train_offline_gridworld): the defaults.
  for old in ({}, {"game": "gridworld", "objective": "bonus", "counts": "exact"},
              {"config": {"alpha": 0.1, "learning_rate": 1e-3}, "settings": {"alpha": 1.0}}):
    assert online_start.offline_settings(old, "s.json") == {}
  settings = online_config.agent_spec("ccvl").resolve(online_config.agent_settings(
      "gridworld", online_config.OnlineConfig().bounds(), offline_settings={}))
  assert isinstance(settings.agent_config.reading, readings.bonus.Bonus)
  assert settings.agent_config.delta_head == "cosine_monotone"


@pytest.mark.parametrize("summary, message", [
    ({"config": {"ccvl_options": {"delta_head": "iqn"}}},
     r"records 'config' 'ccvl_options' 'delta_head' = 'iqn', which the online learner cannot "
     r"take: --delta_head must be one of cosine, monotone"),
    ({"config": {"ccvl_options": {}}, "settings": {"count_ridge": "small"}},
     r"records 'settings' 'count_ridge' = 'small', which the online learner cannot take: it "
     r"must be of type float"),
    ({"config": {"objective": "bound", "delta_weight": "sqrt_log", "gap_weight": 0.5}},
     r"records a reading the online learner cannot take \('config' 'objective', 'config' "
     r"'gap_weight', 'config' 'delta_weight'\): gap_weight=0.5 is not an option of reading "
     r"'bound'"),
    ({"config": {"ccvl_options": ["cosine"]}},
     r": 'config' 'ccvl_options' must be a JSON object"),
])
def test_an_invalid_record_is_named_by_file_and_key(tmp_path, summary, message):
  path = _summary(tmp_path, dict(summary, game="gridworld", agent="ccvl_bounds", counts="exact"))
  cfg = online_config.OnlineConfig(game="gridworld", offline_dir=str(tmp_path),
                                   root_dir=str(tmp_path / "online"))
  with pytest.raises(ValueError, match=message) as e:
    online_start.resolve_config(cfg, log=lambda s: None)
  assert str(e.value).startswith(path)


def test_a_server_whose_variables_are_the_default_heads_is_refused_by_the_cosine_learner(
    cosine_dir, tmp_path):
  """A server started without --offline_dir holds the default (cosine-monotone) head's
  'variables' table; the learner of the cosine-head offline run would push weights of other
  shapes (the default head's knots are a weight of their own). Its
  'replay' table is the same (the items do not depend on the head), so only the variables'
  check can see it."""
  table = dict(min_replay_size=4, samples_per_insert=2.0, batch_size=4, replay_capacity=1000)
  srv, address = reverb_replay.start_server(online_config.make_server_tables(
      online_config.OnlineConfig(game="gridworld", **table)))
  try:
    runner = _runner(cosine_dir, tmp_path / "online", reverb_address=address, **table)
    with pytest.raises(online.ServerMismatch) as e:
      runner._connect_replay()  # pylint: disable=protected-access
    assert str(e.value) == (
        f"the Reverb server at {address} runs another 'variables' table than this learner's: "
        f"its weights are another network's (this learner: --game=gridworld --agent=ccvl, "
        f"delta head cosine from --offline_dir's summary.json). Start "
        f"binaries/reverb_server.py with this learner's --game, --agent and --offline_dir.")
    # The server of the same offline settings: connected.
    srv2, address2 = reverb_replay.start_server(online_config.make_server_tables(
        online_config.OnlineConfig(game="gridworld", offline_settings={"delta_head": "cosine"},
                                   **table)))
    try:
      _runner(cosine_dir, tmp_path / "online2", reverb_address=address2,
              **table)._connect_replay()  # pylint: disable=protected-access
    finally:
      srv2.stop()
  finally:
    srv.stop()


def test_the_variables_check_names_no_delta_head_for_cql():
  """CQL's network has no delta head: the refusal names --game and --agent alone."""
  import types  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.online import server as online_server  # pylint: disable=g-import-not-at-top
  mine = [tf.Variable(tf.zeros([3, 2]))]
  other = types.SimpleNamespace(signature=reverb_replay.variable_signature(
      [tf.Variable(tf.zeros([2, 2]))]))
  cfg = online_config.OnlineConfig(game="gridworld", agent="cql")
  with pytest.raises(online_server.ServerMismatch) as e:
    online_server.check_variables_table("localhost:1", other, cfg, mine)
  assert "(this learner: --game=gridworld --agent=cql). Start" in str(e.value), str(e.value)
  # The same shapes: accepted.
  online_server.check_variables_table(
      "localhost:1", types.SimpleNamespace(signature=reverb_replay.variable_signature(mine)),
      cfg, mine)


@pytest.mark.parametrize("text, message", [
    ('{"game": "gridworld", "config": ', r"cannot be read as JSON \(Expecting value"),
    ('["gridworld"]', r"must hold a JSON object \(the offline run's summary\), got list"),
    ('{"game": "gridworld", "agent": "ccvl_bounds", "counts": "exact", '
     '"belief_temperature": "warm"}', r"records 'belief_temperature' = 'warm', which is not a "
                                      r"number"),
])
def test_a_summary_that_is_not_a_json_object_is_named(tmp_path, text, message):
  path = tmp_path / "summary.json"
  path.write_text(text)
  cfg = online_config.OnlineConfig(game="gridworld", offline_dir=str(tmp_path),
                                   root_dir=str(tmp_path / "online"))
  with pytest.raises(ValueError, match=message) as e:
    online_start.resolve_config(cfg, log=lambda s: None)
  assert str(e.value).startswith(str(path)), str(e.value)


@pytest.mark.parametrize("summary, message", [
    ({"config": {"ccvl_options": {}}, "settings": {"alpha": "x"}},
     r"records 'settings' 'alpha' = 'x', which is not a finite number >= 0 \(alpha of the "
     r"offline run\); give --alpha"),
    ({"alpha": -1.0}, r"records 'alpha' = -1.0, which is not a finite number >= 0"),
    ({"alpha": 0.1, "num_transitions": "2500"},
     r"records 'num_transitions' = '2500', which is not a number > 0"),
    ({"alpha": 0.1, "num_transitions": 0}, r"records 'num_transitions' = 0, which"),
])
def test_a_recorded_alpha_or_dataset_size_that_is_not_one_is_named(tmp_path, summary, message):
  cfg = online_config.OnlineConfig(game="gridworld", offline_dir=str(tmp_path))
  with pytest.raises(ValueError, match=message) as e:
    online_start.alpha_and_dataset_size(summary, cfg)
  assert str(e.value).startswith(str(tmp_path / "summary.json")), str(e.value)


def test_the_recorded_alpha_and_dataset_size_by_layout():
  cfg = online_config.OnlineConfig(game="gridworld", offline_dir="off")
  # gridworld / compare.py: top level; train_offline.py: 'settings' (the preset's under the
  # flags), else (older runs) 'config'; |D| 2500 (the gridworld dataset) when not recorded.
  assert online_start.alpha_and_dataset_size({"alpha": 0.2}, cfg) == (0.2, 2500.0)
  assert online_start.alpha_and_dataset_size(
      {"config": {"alpha": None}, "settings": {"alpha": 1.0}, "num_transitions": 4000},
      cfg) == (1.0, 4000.0)
  assert online_start.alpha_and_dataset_size({"config": {"alpha": 0.3}}, cfg) == (0.3, 2500.0)
  assert online_start.alpha_and_dataset_size({}, cfg) == (None, 2500.0)
  # --alpha wins, also over a recorded value it replaces.
  given = online_config.OnlineConfig(game="gridworld", offline_dir="off", alpha=0.5)
  assert online_start.alpha_and_dataset_size({"alpha": "x"}, given) == (0.5, 2500.0)


def test_a_refused_offline_run_leaves_no_root_dir(tmp_path):
  (tmp_path / "summary.json").write_text('{"game": "gridworld", "config": ')
  root = tmp_path / "online"
  cfg = online_config.OnlineConfig(game="gridworld", offline_dir=str(tmp_path), root_dir=str(root),
                                   num_actors=1, eval_episodes=0)
  with pytest.raises(ValueError, match="cannot be read as JSON"):
    online.run(cfg, log=lambda s: None)
  assert not root.exists()
