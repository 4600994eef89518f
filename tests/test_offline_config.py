"""The offline run's settings: OfflineConfig checked against its declarations, and the fixed
random streams of seeds.Seeds (checkpoints, cached datasets and reported scores depend on
their values, so the values themselves are pinned here, written out by hand)."""
import dataclasses
import json

import pytest

from ccvl_tf.experiments.offline import config
from ccvl_tf.experiments.offline import run_fingerprint
from ccvl_tf.runtime import config_flags
from ccvl_tf.algorithm.readings import bound, paper
from ccvl_tf.experiments.offline.seeds import Seeds


@pytest.mark.parametrize("name", ["num_steps", "batch_size", "checkpoint_interval",
                                  "log_interval", "summary_interval", "eval_episodes",
                                  "eval_max_steps", "default_dataset_steps", "num_grid_deltas"])
def test_counts_below_one_are_refused_naming_the_flag(name, tmp_path):
  cfg = config.OfflineConfig(root_dir=str(tmp_path / "run"))
  with pytest.raises(ValueError, match=f"^--{name} must be an integer >= 1"):
    dataclasses.replace(cfg, **{name: 0}).validate()
  with pytest.raises(ValueError, match=f"^--{name} must be an integer >= 1"):
    dataclasses.replace(cfg, **{name: 2.5}).validate()


def test_eval_interval_zero_is_allowed_negative_is_not(tmp_path):
  cfg = config.OfflineConfig(root_dir=str(tmp_path / "run"), eval_interval=0)
  cfg.validate()
  with pytest.raises(ValueError, match=r"^--eval_interval must be an integer >= 0, got -1$"):
    dataclasses.replace(cfg, eval_interval=-1).validate()


@pytest.mark.parametrize("changes,match", [
    ({"subset": "2%"}, r"^--subset must be one of 1%, 5%, initial10%, all, got '2%'$"),
    ({"eval_env": "gpu"}, r"^--eval_env must be one of vector, sequential, got 'gpu'$"),
    ({"default_dataset_policy": "x"}, r"^--default_dataset_policy must be one of auto, "),
    ({"behaviour_epsilon": 1.5}, r"^--behaviour_epsilon must be in \[0, 1\], got 1.5$"),
    ({"belief_temperature": 0.0}, r"^--belief_temperature must be a finite number > 0"),
    ({"belief_prior": "informed"}, r"^--belief_prior must be one of uniform, heldout_mean, "
                                   r"heldout_sum, got 'informed'$"),
    ({"belief_prior": "informed", "agent": "cql"}, r"^--belief_prior must be one of "),
    ({"belief_prior": "heldout_sum", "agent": "cql", "reference_agents": ("bc",)},
     r"^--belief_prior=heldout_sum is a setting of the adaptive policy of ccvl, fixed_ccvl; "
     r"neither --agent=cql nor --reference_agents=bc has one: leave it out$"),
    ({"eval_epsilon": -0.1}, r"^--eval_epsilon must be in \[0, 1\], got -0.1$"),
    ({"seed": -1}, r"^--seed must be an integer >= 0, got -1$"),
])
def test_choices_and_ranges_are_refused_naming_the_flag(changes, match, tmp_path):
  cfg = config.OfflineConfig(root_dir=str(tmp_path / "run"), **changes)
  with pytest.raises(ValueError, match=match):
    cfg.validate()


@pytest.mark.parametrize("key,value,match", [
    ("num_grid_deltas", "8", r"--num_grid_deltas must be of type int, got '8'$"),
    ("alpha", "3", r"--alpha must be of type float, got '3'$"),
    ("num_steps", 2**40, r"--num_steps must be an integer <= 2147483647 \(a 32-bit integer\)"),
    ("alpha", 1e300, r"--alpha must be a finite number of magnitude <= 1e\+12, got 1e\+300$"),
])
def test_a_record_of_another_type_or_past_the_ceiling_is_refused_naming_the_key(
    key, value, match, tmp_path):
  """A run's summary.json 'config' read back (diagnose.py): before, "8" for num_grid_deltas and
  "3" for alpha were accepted and failed far from the record; 2**40 steps and alpha 1e300 ran."""
  record = config.record(config.OfflineConfig(root_dir=str(tmp_path / "run")))
  config.resolve(config.from_record(record))  # the record as written is a run's
  record[key] = value
  with pytest.raises(ValueError, match=match):
    config.resolve(config.from_record(record))


@pytest.mark.parametrize("agent", ["cql", "bc", "rem", "dqn", "ccvl"])
def test_every_agents_record_reads_back_as_its_run(agent, tmp_path):
  """saved_plan's route (diagnose.py, headroom.py, tools): the record keeps N, M and
  policy_delta in force for every agent; a CQL run's used to be refused as given settings it
  does not take."""
  cfg = config.OfflineConfig(root_dir=str(tmp_path / "run"), agent=agent,
                             agent_values={"alpha": 2.0} if agent in ("cql", "ccvl") else {})
  record = json.loads(json.dumps(config.record(cfg)))
  assert record["num_deltas"] == 8  # in force, recorded whatever the agent
  again = config.from_record(record)
  assert config.resolve(again).learner.name == agent
  assert again.agent_values == {**({"alpha": 2.0} if agent in ("cql", "ccvl") else {}),
                                **({"num_deltas": 8, "num_pairs": 2, "policy_delta": 0.5}
                                   if agent == "ccvl" else {})}


def test_seed_streams_keep_their_values():
  s = Seeds(5)
  assert (s.weights(), s.learner(), s.data_order(), s.probe_env(), s.behaviour_policy(),
          s.diagnostics()) == (5, 5, 5, 5, 5, 5)
  assert s.collection_env() == 1_005
  assert (s.held_out(), s.diagnostics_held_out()) == (782, 783)
  assert (s.eval_env(2_500), s.eval_episodes(2_500)) == (12_505, 2_505)
  assert (s.adaptive_eval(), s.diagnostics_env()) == (30_005, 40_005)
  assert (s.table_behaviour(), s.table_eval()) == (12, 60_005)


def test_an_eval_seed_moves_only_the_evaluation_episodes():
  """--eval_seed=0 on a run seeded 5: the evaluation streams are seed 0's (10,000 + step,
  step, 30,000, 7, 60,000), the training and data streams stay seed 5's; resolve() hands the
  data stage that pair of seeds."""
  s = Seeds(5, eval_base=0)
  assert (s.weights(), s.learner(), s.data_order(), s.held_out(), s.diagnostics_env()) == (
      5, 5, 5, 782, 40_005)
  assert (s.eval_env(2_500), s.eval_episodes(2_500), s.adaptive_eval()) == (12_500, 2_500,
                                                                             30_000)
  assert (s.table_behaviour(), s.table_eval()) == (7, 60_000)
  cfg = config.OfflineConfig(seed=5, eval_seed=0)
  assert config.resolve(cfg).data.seeds == Seeds(5, 0)
  assert config.record(cfg)["eval_seed"] == 0
  # Not part of what the checkpoints were trained on: the fingerprint ignores it.
  other = config.OfflineConfig(seed=5)
  assert (run_fingerprint.fingerprint(config.record(cfg), config.resolve(cfg).learner, {}, 10)
          == run_fingerprint.fingerprint(config.record(other), config.resolve(other).learner, {}, 10))


@pytest.mark.parametrize("env", ["vector", "sequential"])
def test_atari_evaluation_plays_its_episodes_to_the_step_cap(env):
  # A player that only ever chooses NOOP never serves in Breakout: no reward and no game over,
  # so each of the 2 episodes is cut at the 15-step cap with raw score 0, whichever env runs it.
  import collections
  import tensorflow as tf
  from ccvl_tf.experiments.offline import runner
  step = collections.namedtuple("Step", ["action", "state", "info"])

  class Noop:
    def get_initial_state(self, batch_size=1):
      return ()

    def action(self, time_step, state):
      return step(tf.zeros([time_step.step_type.shape[0]], tf.int32), state, ())

  evaluation = runner.AtariEvaluation(game="Breakout", episodes=2, max_steps=15, epsilon=0.0,
                                      env=env, belief_episodes=2)
  records = evaluation(Noop(), env_seed=3, seed=3)
  assert [(r.raw_score, r.length) for r in records] == [(0.0, 15), (0.0, 15)]


def test_atari_evaluation_carries_a_belief_over_its_sequences():
  """An adaptive policy's vector evaluation plays episodes / belief_episodes slots, each slot's
  episodes one after another with one policy state: a policy that counts the episodes it
  started in its state (the 'log_belief' entry, recorded at each episode's end) sees 1, 2, 3
  in one slot of 3 episodes, and 1 in every episode of a one-episode-per-slot evaluation."""
  import collections
  import tensorflow as tf
  from ccvl_tf.experiments.offline import runner
  step = collections.namedtuple("Step", ["action", "state", "info"])

  class CountsEpisodes:
    def get_initial_state(self, batch_size=1):
      return {"log_belief": tf.zeros([batch_size, 2])}

    def action(self, time_step, state):
      first = tf.cast(time_step.is_first(), tf.float32)[:, None]        # [B, 1]
      counted = state["log_belief"] + first * tf.constant([[1.0, 0.0]])  # [B, 2]
      return step(tf.zeros([time_step.step_type.shape[0]], tf.int32), {"log_belief": counted},
                  ())

  def started(belief_episodes, episodes=6, carries_belief=True):
    evaluation = runner.AtariEvaluation(game="Breakout", episodes=episodes, max_steps=3,
                                        epsilon=0.0, env="vector",
                                        belief_episodes=belief_episodes)
    records = evaluation(CountsEpisodes(), env_seed=3, seed=3, carries_belief=carries_belief)
    return [float(r.log_belief[0]) for r in records]

  # Episode e is position e // S of slot e % S.
  assert started(3) == [1, 1, 2, 2, 3, 3]        # 2 slots of 3 episodes
  assert started(6) == [1, 2, 3, 4, 5, 6]        # 1 slot: one belief over the evaluation
  assert started(1) == [1] * 6                   # a fresh state per episode
  assert started(6, carries_belief=False) == [1] * 6  # a policy without a belief: 6 slots
  evaluation = runner.AtariEvaluation(game="Breakout", episodes=200, max_steps=3, epsilon=0.0,
                                      env="vector", belief_episodes=1)
  assert (evaluation.slots(True), evaluation.slots(False)) == (64, 64)  # the vector env's cap


def test_fingerprint_holds_the_dataset_given_and_the_settings_in_force():
  cfg = config.OfflineConfig(preset="demo", agent_values={"num_deltas": 4})
  identity = {"path": "/data/Breakout/1/replay_logs", "files": 3, "listing_sha256": "ab"}
  plan = config.resolve(cfg).with_dataset(identity, 1234)
  fp = plan.learner.fingerprint
  assert fp["dataset"] == identity and fp["num_transitions"] == 1234
  # The demo preset's CCVL settings (presets.py), N given, the seed and the agent.
  assert (fp["alpha"], fp["learning_rate"], fp["num_deltas"]) == (3.0, 1e-3, 4)
  assert (fp["agent"], fp["seed"], fp["preset"]) == ("ccvl", 0, "demo")
  ref = plan.learners["bc"].fingerprint
  assert ref["agent"] == "bc" and "alpha" not in ref


def test_stage_settings_are_the_flags_given_over_the_preset(tmp_path):
  # The demo preset gives CCVL and CQL the same settings, alpha 3, lr 1e-3, DR3 off
  # (docs/budget.md, docs/ladder.md, docs/demo_alpha.md); a flag given wins over the preset's
  # value. Each learner carries its own config, made once: its defaults with those values.
  cfg = config.OfflineConfig(root_dir=str(tmp_path / "run"), game="Pong", seed=3,
                             dataset_dir=None, subset="5%", batch_size=16, num_grid_deltas=6,
                             belief_temperature=0.5, default_dataset_steps=700,
                             agent_values={"alpha": 0.3, "num_deltas": 4})
  plan = config.resolve(cfg).with_dataset({}, 1234)
  ccvl = plan.learners["ccvl"]
  assert ccvl.overrides == {"alpha": 0.3, "learning_rate": 1e-3, "dr3_coef": 0.0}
  assert type(ccvl.config).__name__ == "CCVLConfig" and ccvl.settings.agent_values == {}
  assert (ccvl.config.num_deltas, ccvl.config.alpha, ccvl.config.learning_rate,
          ccvl.config.adam_epsilon, ccvl.config.dr3_coef, ccvl.config.seed) == (
              4, 0.3, 1e-3, 3.125e-4, 0.0, 3)
  settings = ccvl.settings
  assert (settings.dataset_size, settings.num_grid_deltas, settings.belief_temperature,
          settings.reward_clip, settings.seed, settings.network_config.torso) == (
              1234.0, 6, 0.5, 1.0, 3, "nature")
  cql = plan.learners["cql"]
  assert cql.overrides == {"alpha": 0.3, "learning_rate": 1e-3, "dr3_coef": 0.0}
  assert (type(cql.config).__name__, cql.config.alpha, cql.config.learning_rate,
          cql.config.dr3_coef) == ("CQLConfig", 0.3, 1e-3, 0.0)
  bc = plan.learners["bc"]  # BC: its own (d3rlpy's) step size, none of CCVL's settings
  assert (type(bc.config).__name__, bc.config.learning_rate) == ("BCConfig", 1e-3)
  data = plan.data
  assert (data.dataset_dir, data.subset, data.batch_size, data.num_deltas, data.seeds.base) \
      == (None, "5%", 16, 4, 3)
  assert (data.default.steps, data.default.policy, data.default.env, data.default.seed,
          data.default.behaviour_epsilon) == (700, "auto", "auto", 3, 0.25)
  assert data.default.out_dir == str(tmp_path / "run" / "default_dataset" / "Pong")
  loop = plan.loop
  assert (loop.root_dir, loop.num_steps, loop.checkpoint_interval, loop.log_interval,
          loop.summary_interval, loop.eval_interval) == (str(tmp_path / "run"), 17_500, 2_500,
                                                         500, 100, 5_000)
  assert plan.record == config.record(cfg) and plan.preset_line.startswith("Preset demo")


def test_an_agent_setting_outside_its_declaration_is_refused_while_resolving():
  cfg = config.OfflineConfig(agent_values={"num_pairs": 2000})  # M <= 1024 (CCVLConfig)
  with pytest.raises(ValueError, match="num_pairs"):
    config.resolve(cfg)


def test_a_game_in_another_case_is_stored_in_its_one_spelling(tmp_path):
  """--game=breakout and --game=Breakout are one run setting: the same stored name, default
  dataset folder and fingerprint (a resume with the other spelling finds its dataset and is not
  refused as another configuration); an unknown name is refused naming it."""
  lower = config.OfflineConfig(game="breakout", root_dir=str(tmp_path / "run"))
  camel = config.OfflineConfig(game="Breakout", root_dir=str(tmp_path / "run"))
  assert lower.game == "Breakout" and config.record(lower)["game"] == "Breakout"
  assert (config.default_dataset_spec(lower).out_dir
          == config.default_dataset_spec(camel).out_dir
          == str(tmp_path / "run" / "default_dataset" / "Breakout"))
  assert (run_fingerprint.fingerprint(config.record(lower), config.resolve(lower).learner, {}, 10)
          == run_fingerprint.fingerprint(config.record(camel), config.resolve(camel).learner, {}, 10))
  assert config.OfflineConfig(game="SPACE_INVADERS").game == "SpaceInvaders"
  with pytest.raises(ValueError, match=r"unknown Atari game 'Breakot'; valid names: "):
    config.OfflineConfig(game="Breakot", root_dir=str(tmp_path / "run")).validate()


def test_paper_preset_selects_the_papers_ccvl_and_a_flag_still_wins(tmp_path):
  # The paper's section 5, written out here from the paper, not from presets.py: Eq. (cql
  # update) as Algorithm 1 (max over j), the IQN cosine embedding of delta, the CQL(H) gap
  # weighted by alpha sqrt(log(1/delta_1) n(s)^-1) with the raw linear n(s)^-1, 1/2 x^2 TD,
  # no support head; the DR3 setup's Adam lr 5e-5 and DR3 0.03 are CCVLConfig's own defaults.
  cfg = config.OfflineConfig(root_dir=str(tmp_path / "run"), preset="paper",
                             reference_agents=("cql",))
  c = config.resolve(cfg).learners["ccvl"].config
  assert c.reading == paper.Paper()  # no option: CQL(H) gap, sqrt(log(1/delta_1)), no support
  assert (c.reading.gap, c.reading.delta_weight, c.reading.count_weight,
          c.reading.support_threshold, c.reading.train_delta) == (
              "logsumexp", "sqrt_log", "linear", 0.0, None)
  assert (c.delta_head, c.td_loss, c.count_normalization) == ("cosine", "squared", "none")
  assert (c.alpha, c.learning_rate, c.dr3_coef) == (0.1, 5e-5, 0.03)
  # Only CCVL takes a reading: CQL keeps its own Huber TD under the same preset.
  assert config.resolve(cfg).learners["cql"].config.td_loss == "huber"
  # A flag given wins over the preset's reading; the fingerprint holds the value in force.
  given = dataclasses.replace(cfg, agent_values={"delta_head": "monotone"})
  plan = config.resolve(given).with_dataset({}, 10)
  assert plan.learner.config.delta_head == "monotone"
  assert plan.learner.fingerprint["delta_head"] == "monotone"
  # --objective (the older name of --reading) wins over the preset's reading too.
  older = config.resolve(dataclasses.replace(cfg, agent_values={"objective": "bound"}))
  assert older.learners["ccvl"].config.reading == bound.Bound()
  # The demo preset keeps CCVL's default reading (cosine-monotone head, batch-normalized
  # counts).
  demo = config.resolve(dataclasses.replace(cfg, preset="demo")).learners["ccvl"].config
  assert (demo.delta_head, demo.count_normalization, demo.td_loss) == (
      "cosine_monotone", "batch", "huber")


@pytest.mark.parametrize("subset,steps", [
    ("1%", 6_250_000), ("5%", 12_500_000), ("initial10%", 12_500_000)])
def test_paper_preset_sets_the_papers_run_and_a_flag_still_wins(subset, steps, tmp_path):
  # The paper's protocol, written out here from the paper, not from presets.py: 6.25M gradient
  # steps on 1%, 12.5M on 5% and the initial 10% (section 5's Atari table); each score the
  # average of 100 episodes; 108K frames per episode at most = 27,000 agent steps at frame
  # skip 4; DR3 for every method (0.03, the agents' default); one learner per run.
  args = [f"--root_dir={tmp_path / 'run'}", "--preset=paper", f"--subset={subset}"]
  cfg = config.config_from_args(args)
  assert (cfg.num_steps, cfg.eval_episodes, cfg.eval_max_steps) == (steps, 100, 27_000)
  assert tuple(cfg.reference_agents) == ()
  assert (cfg.eval_interval, cfg.checkpoint_interval) == (250_000, 50_000)
  plan = config.resolve(cfg)
  assert list(plan.learners) == ["ccvl"] and plan.loop.num_steps == steps
  assert plan.learner.config.dr3_coef == 0.03 and plan.data.batch_size == 32
  assert plan.record["num_steps"] == steps and plan.record["eval_episodes"] == 100
  # Each flag given wins over the preset.
  given = config.config_from_args(args + [
      "--num_steps=5", "--eval_episodes=3", "--eval_max_steps=400", "--eval_interval=0",
      "--checkpoint_interval=7", "--reference_agents=bc", "--dr3_coef=0"])
  assert (given.num_steps, given.eval_episodes, given.eval_max_steps, given.eval_interval,
          given.checkpoint_interval, tuple(given.reference_agents)) == (5, 3, 400, 0, 7,
                                                                         ("bc",))
  plan = config.resolve(given)
  assert list(plan.learners) == ["ccvl", "bc"] and plan.learner.config.dr3_coef == 0.0
  # The same record reads back as the same settings (summary.json, diagnose.py).
  saved = json.loads(json.dumps(config.record(given)))
  assert json.loads(json.dumps(config.record(config.from_record(saved)))) == saved


def test_demo_preset_keeps_the_demos_run_settings():
  cfg = config.config_from_args([])
  assert (cfg.preset, cfg.num_steps, cfg.eval_episodes, cfg.eval_max_steps, cfg.eval_interval,
          cfg.checkpoint_interval, tuple(cfg.reference_agents)) == (
              "demo", 17_500, 10, 2_000, 5_000, 2_500, ("bc", "cql"))
  assert config.OfflineConfig().num_steps == 17_500
  # The paper preset's line names its run settings.
  line = config.resolve(config.OfflineConfig(preset="paper", subset="1%")).preset_line
  assert "6.25M steps on 1%" in line and "100 evaluation episodes" in line


@pytest.mark.parametrize("values,match", [
    ({"reading": "paper", "gap": "max"},
     r"^--gap='max' is not an option of reading 'paper' \(it takes none\); give "
     r"--reading=ablation or bound or bonus$"),
    ({"objective": "bonus", "train_delta": 0.5}, r"give --reading=ablation or bound$")])
def test_an_option_the_reading_does_not_take_is_refused_before_anything_is_written(
    values, match, tmp_path):
  cfg = config.OfflineConfig(root_dir=str(tmp_path / "run"), agent_values=values)
  with pytest.raises(ValueError, match=match):
    config.resolve(cfg)
  assert not (tmp_path / "run").exists()


def test_ccvl_options_at_their_default_are_no_change_of_configuration():
  """Resuming a default run with --reading=paper (the default reading) was refused as a change
  of configuration: the fingerprint compared the flags given, not the settings in force."""
  eff = run_fingerprint.effective_ccvl_options
  assert eff({"reading": "paper"}) == {}
  assert eff({"reading": "bonus"}) == {"reading": "bonus"}
  assert eff({"reading": "bonus", "support_threshold": 0.0}) == {"reading": "bonus"}
  assert eff({"delta_head": "cosine_monotone", "count_ridge": 0.5}) == {"count_ridge": 0.5}
  given = {"agent": "ccvl", "ccvl_options": {"reading": "paper"}, "alpha": 3.0}
  assert run_fingerprint.normalize_fingerprint(given) == dict(given, ccvl_options={})
  assert run_fingerprint.normalize_fingerprint({"agent": "bc"}) == {"agent": "bc"}


def test_a_paper_preset_run_stored_when_the_preset_named_the_default_reading_resumes(tmp_path):
  """The paper preset once also set reading 'paper' (CCVL's default), so its runs' fingerprints
  hold it at the top level; the preset now sets only where the paper differs, and the stored
  fingerprint compares equal to today's."""
  cfg = config.OfflineConfig(root_dir=str(tmp_path / "run"), preset="paper")
  today = config.resolve(cfg).with_dataset({}, 10).learner.fingerprint
  assert "reading" not in today and today["delta_head"] == "cosine"
  stored = json.loads(json.dumps(dict(today, reading="paper")))
  now = json.loads(json.dumps(today))
  assert run_fingerprint.normalize_fingerprint(stored) == run_fingerprint.normalize_fingerprint(now)
  # A preset-set setting away from the default still counts.
  assert run_fingerprint.normalize_fingerprint(dict(now, delta_head="monotone")) != \
      run_fingerprint.normalize_fingerprint(now)


def test_device_settings_that_change_results_are_compared_on_resume_and_reuse(tmp_path):
  """Before, a run trained to step 4 resumed to 8 with --jit_compile or --distribute=mirrored
  (or a finished run rerun with them) was accepted without a note and the record held only
  the new value, while XLA changes which deltas CCVL draws. --tf_threads and --deterministic
  change the float rounding only: not compared (config._NOT_COMPARED says why)."""
  from ccvl_tf.runtime import training  # pylint: disable=g-import-not-at-top
  base = ["--game=Breakout", f"--root_dir={tmp_path / 'r'}"]
  identity = {"path": "/data/Breakout/1/replay_logs", "files": 3, "listing_sha256": "ab"}

  def fingerprint(*args):
    plan = config.resolve(config.config_from_args(base + list(args)))
    return run_fingerprint.fingerprint(plan.record, plan.learner, identity, 10)

  default = fingerprint()
  assert "jit_compile" not in default and "distribute" not in default  # as before: unchanged
  assert fingerprint("--tf_threads=1", "--deterministic") == default
  saved = json.loads(json.dumps(config.record(config.config_from_args(base))))
  for i, (flag, change) in enumerate([("--jit_compile", "jit_compile: None -> True"),
                                      ("--distribute=mirrored",
                                       "distribute: None -> 'mirrored'")]):
    ckpt = str(tmp_path / f"ckpt{i}")
    training.check_fingerprint(ckpt, default)
    with pytest.raises(training.FingerprintMismatch, match=change.replace("(", r"\(")):
      training.check_fingerprint(ckpt, fingerprint(flag))
    assert config.changed_settings(saved, config.config_from_args(base + [flag])) == [
        change.replace("None", "False" if flag == "--jit_compile" else "'none'")]
  assert config.changed_settings(saved, config.config_from_args(
      base + ["--tf_threads=1", "--deterministic"])) == []


def test_the_belief_prior_is_uniform_unless_given_compared_and_recorded(tmp_path):
  """--belief_prior: 'uniform' by default (what every run did before the setting existed),
  handed to each learner's AgentSettings, kept in the record (summary.json's 'config') and the
  learner settings in force, and compared when a run is reused: a record made before the
  setting existed reads as the default."""
  cfg = config.OfflineConfig(root_dir=str(tmp_path / "run"))
  assert cfg.belief_prior == "uniform"
  assert "belief_prior" in config_flags.comparison(config.OfflineConfig).compared
  given = dataclasses.replace(cfg, belief_prior="heldout_sum")
  plan = config.resolve(given)
  assert plan.record["belief_prior"] == "heldout_sum"
  assert plan.learner.settings.belief_prior == "heldout_sum"
  assert plan.learner.resolved()["belief_prior"] == "heldout_sum"
  assert config.resolve(cfg).learner.settings.belief_prior == "uniform"
  assert config.changed_settings(config.record(cfg), given) == [
      "belief_prior: 'uniform' -> 'heldout_sum'"]
  old = {k: v for k, v in config.record(cfg).items() if k != "belief_prior"}
  assert config.changed_settings(old, cfg) == []
  assert config.from_record(config.record(given)).belief_prior == "heldout_sum"
  # CQL beside a CCVL reference takes it (the reference's adaptive policy uses it).
  dataclasses.replace(given, agent="cql", reference_agents=("ccvl",)).validate()
