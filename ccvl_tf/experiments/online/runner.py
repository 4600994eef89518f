# Over ~500 lines on purpose: the learner's phases share one _Runner's state (server link, env-step
# count, checkpoint manager, evaluation record); the pieces without that state are modules of
# this package.
"""Online fine-tuning after offline CCVL (paper Sec. "Online Fine-Tuning on Atari", Table 6).

More in docs/online.md "Module notes", `ccvl_tf/experiments/online/runner.py`.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Dict

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf

from ccvl_tf.algorithm import policies
from ccvl_tf.data import reverb_replay
from ccvl_tf.runtime import training
from ccvl_tf.envs import factory
from ccvl_tf.experiments.online import actor as online_actor
from ccvl_tf.experiments.online import bounds as online_bounds
from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.experiments.online import deterministic as online_deterministic
from ccvl_tf.experiments.online import distributed
from ccvl_tf.experiments.online import offline_share as online_offline_share
from ccvl_tf.experiments.online import own_data_share
from ccvl_tf.experiments.online import scores_and_bounds as online_eval
from ccvl_tf.experiments.online import penalty as online_penalty
from ccvl_tf.experiments.online import server as online_server
from ccvl_tf.experiments.online import start as online_start
from ccvl_tf.runtime import strict_json



ServerLost = online_server.ServerLost  # the Reverb server stopped answering (names the address)
ServerMismatch = online_server.ServerMismatch  # its replay table is not this learner's


class ActorsGone(RuntimeError):
  """Every actor process exited before the learner's budget was reached."""




# ---------------------------------------------------------------------------- learner
def _write_json(path: str, obj, last_good=None) -> None:
  """`obj` as JSON at `path` (atomic); a failed write is training.WriteFailed naming it."""
  with training.writing(path, last_good, [path + ".tmp"]):
    with open(path + ".tmp", "w") as f:
      strict_json.dump(obj, f, indent=2, default=float)
    os.replace(path + ".tmp", path)


def _write_status(cfg, **status):
  _write_json(os.path.join(cfg.root_dir, "status.json"), status)


class _Runner:
  """One fine-tuning run of the learner, in Dopamine's runner phases: `_build_learner`,
  `_initialize_checkpointer_and_maybe_resume`, `_open_offline_share`, `_connect_replay`,
  `_run_train_phase`, `_finish_actors`, `_run_eval_phase` and `_export_and_summarize` (`run`
  calls them in order).
  """

  def __init__(self, cfg: online_config.OnlineConfig, log: Callable[[str], None], strategy):
    self.cfg, self.log, self.strategy = cfg, log, strategy
    self.server = None
    self.eval_seconds = self.last_eval_seconds = 0.0
    self.sample_wait_seconds = 0.0  # in next(replay iterator): rate limiter + pipeline
    self.first_step_time = self.first_step = None
    self.eval_seconds_at_first_step = self.sample_wait_at_first_step = 0.0
    self.trained = False  # the train phase is over: env steps stay those it ended with
    # The offline run's dataset (--offline_fraction > 0; Atari, MinAtar, own data).
    self.offline_share = None

  def _resolve_config(self) -> None:
    """The offline run's summary.json checked against the flags, and the settings taken from
    it (online_start.resolve_config)."""
    self.cfg, self.offline_summary = online_start.resolve_config(self.cfg, self.log)

  def _build_learner(self) -> None:
    """The registered learner of --agent under the strategy's scope (alpha and |D| of the
    offline run), the control variables pushed with its weights, and its step function."""
    cfg = self.cfg
    self.tss, self.act = online_config.specs(cfg.game, cfg.seed)
    with self.strategy.scope():
      alpha, dataset_size = online_start.alpha_and_dataset_size(self.offline_summary, cfg)
      # The gridworld's CCVL bounds use exact n(s), grown with the online data (step loop).
      self.counts = (online_config.gridworld_counts()
                     if cfg.game.lower() == online_config.GRIDWORLD
                     and cfg.offline_agent == "ccvl" else None)
      self.settings = online_config.agent_settings(
          cfg.game, cfg.bounds(), alpha, cfg.seed, dataset_size=dataset_size, agent=cfg.agent,
          counts=self.counts, offline_settings=cfg.offline_settings, own_data=cfg.own_data,
          policy_delta=cfg.policy_delta, num_grid_deltas=cfg.exploration.num_grid_deltas)
      self.agent = online_config.agent_spec(cfg.agent).build(self.tss, self.act, self.settings)
      self.control = online_config.control_variables()
      self.offline_step = tf.Variable(-1, dtype=tf.int64, trainable=False, name="offline_step")
      # The actors' env steps (replay items inserted) since the run began.
      self.env_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="online_env_steps")
    self.learner_step = distributed.make_learner_step(self.strategy, self.agent)

  def _initialize_checkpointer_and_maybe_resume(self) -> None:
    """Resumes from root_dir/checkpoints, else restores the offline checkpoint; sets the
    online learning rate, the start step and the estimated end (planned_step)."""
    cfg, agent, log = self.cfg, self.agent, self.log
    extra = {} if self.counts is None else {"online_counts": self.counts}
    ckpt = agent.make_checkpoint(offline_step=self.offline_step,
                                 online_env_steps=self.env_steps, **extra)
    self.manager = tf.train.CheckpointManager(ckpt, os.path.join(cfg.root_dir, "checkpoints"),
                                              max_to_keep=3)
    latest = self.manager.latest_checkpoint
    if latest:
      self._check_fingerprint()  # before anything is restored or written
      self._start_online_counts()  # their variables are in an online checkpoint
      try:
        ckpt.restore(latest).assert_existing_objects_matched()
      except (AssertionError, ValueError, tf.errors.OpError) as e:
        raise ValueError(f"checkpoint {latest} does not match this run ({e});"
                         f" use a fresh --root_dir") from e
      log(f"Resumed from {latest} (train step {int(agent.train_step_counter.numpy())}).")
    else:
      self.offline_step.assign(online_start.restore_offline(agent, cfg.offline_dir, log))
      self._start_online_counts()  # not in an offline checkpoint
    if cfg.learning_rate is not None:
      agent.set_learning_rate(cfg.learning_rate)
    self.start_step = int(agent.train_step_counter.numpy())
    self.offline_step_value = int(self.offline_step.numpy())
    self.transitions = online_bounds.TransitionLog(
        os.path.join(cfg.root_dir, "online_transitions.npz"), self.start_step if latest else None)
    self.planned_step = self.offline_step_value + cfg.num_learner_steps  # for progress lines
    self.control["train_step"].assign(self.start_step)
    self.probe = None
    if cfg.penalty_diagnostic and cfg.offline_agent == "ccvl":
      self.probe = online_penalty.PenaltyProbe(online_penalty.offline_states(
          cfg.game, cfg.offline_states, 512, cfg.seed), seed=cfg.seed)

  def _check_fingerprint(self) -> None:
    """The run's compared settings (OnlineConfig.fingerprint) stored with its checkpoints, or
    compared with those stored (training.check_fingerprint): a resume, or a rerun of a
    finished run, under other settings is refused naming each change (old -> new), or with
    --allow_config_change recorded at the train step it took effect. Checkpoints of a run
    that stored none are checked against its online_config.json (the settings of its last
    start); keys a stored fingerprint lacks (settings added since) are not compared."""
    cfg, log = self.cfg, self.log
    ckpt_dir = os.path.join(cfg.root_dir, "checkpoints")
    now = cfg.fingerprint()
    if (os.path.isdir(ckpt_dir) and training.FINGERPRINT not in os.listdir(ckpt_dir)
        and self.manager.latest_checkpoint):
      earlier = _earlier_fingerprint(os.path.join(cfg.root_dir, "online_config.json"), now)
      if earlier is not None:
        training.check_fingerprint(ckpt_dir, earlier)
        log(f"The checkpoints in {ckpt_dir} have no {training.FINGERPRINT}: their settings "
            f"are those of online_config.json (the run's last start).")
    training.check_checkpoint_records(ckpt_dir, True, cfg.allow_config_change, log)
    training.check_fingerprint(ckpt_dir, now, cfg.allow_config_change, log,
                               since=tuple(now))

  def _note_changed_offline_settings(self, config_path: str) -> None:
    """A resumed run whose earlier start took other offline settings says so
    (online_start.changed_settings_note)."""
    if self.start_step != self.offline_step_value:
      note = online_start.changed_settings_note(config_path, self.cfg.offline_settings,
                                                self.start_step)
      if note:
        self.log(note)

  def _start_online_counts(self) -> None:
    """--online_counts=grow: the CCVL bounds' linear n(s)^-1 follows the online data
    (online_penalty.start_counts); the gridworld's exact counts grow in the step loop."""
    if self.cfg.online_counts == "grow":
      with self.strategy.scope():
        online_penalty.start_counts(self.agent, self.cfg.online_batch_size,
                                    self.cfg.samples_per_insert, self.log)

  def _connect_replay(self) -> None:
    """Starts the in-process Reverb server (unless --reverb_address), checks it, and pushes
    the learner's weights to its 'variables' table (online_server.LearnerServerLink: every
    call with a deadline)."""
    cfg, log = self.cfg, self.log
    self.address = cfg.reverb_address
    reverb_ckpt_dir = os.path.join(cfg.root_dir, "reverb_checkpoints")
    if self.address is None:
      self.server, self.address = reverb_replay.start_server(
          online_config.make_server_tables(cfg), cfg.reverb_port, reverb_ckpt_dir)
      log(f"Reverb server in this process at {self.address} (checkpoints in "
          f"{reverb_ckpt_dir}).")
      log(reverb_replay.security_note(self.server.port))
    info = reverb_replay.check_server(self.address, cfg.server_timeout_s)
    table = info[reverb_replay.REPLAY_TABLE]
    online_server.check_table(self.address, table, cfg,
                              self.agent.exploration_policy.trajectory_spec)
    online_server.check_variables_table(
        self.address, info[reverb_replay.VARIABLE_TABLE], cfg,
        online_config.pushed_variables(self.agent, self.control))
    got = reverb_replay.server_settings(table)
    log(f"Reverb replay table at {self.address}: {table.current_size} items; its settings, "
        f"as this learner's: samples per insert {got['samples_per_insert']:g}, min size "
        f"{got['min_size_to_sample']:.0f}, capacity {got['max_size']:.0f}.")
    # Env steps are the inserts counted from here on, added to the checkpoint's count.
    self.inserts_at_connect = int(reverb_replay.rate_limiter_stats(table)["inserts"])
    self.env_steps_at_connect = int(self.env_steps.numpy())
    self.link = online_server.LearnerServerLink(self.address, cfg.server_timeout_s,
                                                cfg.reverb_checkpoint_timeout_s)
    self.link.connect(online_config.pushed_variables(self.agent, self.control),
                      self.start_step)

  def _start_in_process_actors(self) -> None:
    """--schedule=deterministic: the actors in this process, standing in for the actor
    processes and the server link (online_deterministic.InProcessActors)."""
    self.address = None
    self.actors = self.link = online_deterministic.InProcessActors(
        self.cfg, online_config.pushed_variables(self.agent, self.control),
        self.offline_step_value, self.log)
    # Env steps are the in-process replay's inserts, from zero (no resume in this schedule).
    self.inserts_at_connect = 0
    self.env_steps_at_connect = int(self.env_steps.numpy())

  def _save(self, step: int) -> None:
    """A learner checkpoint, and one of the Reverb server's (its machine, its directory).

    Reverb's checkpoint call has no deadline of its own (it blocked forever on a killed server
    in tests/test_reverb_faults.py): it runs with --reverb_checkpoint_timeout_s
    (online_server.LearnerServerLink), so a server lost before or during it ends the run with
    ServerLost naming it. The learner's own checkpoint is written first: after a lost server
    it is the one a restart resumes from."""
    with training.writing(self.transitions.path, self.manager.latest_checkpoint,
                          [self.transitions.path + ".tmp.npz"]):
      self.transitions.save()
    training.save_checkpoint(self.manager, step)
    if self.server is not None or self.cfg.reverb_address:
      self.link.checkpoint(step)

  def _batches(self):
    """Online batches from the 'replay' table, each followed by its offline share (or None)."""
    cfg = self.cfg
    online = None  # --schedule=deterministic: batches from the in-process actors' replay
    if cfg.schedule == online_config.ASYNC:
      online = reverb_replay.replay_dataset(self.agent.exploration_policy.trajectory_spec,
                                     self.address, cfg.online_batch_size,
                                     rate_limiter_timeout_ms=int(cfg.sample_timeout_s * 1000))
    offline_it = None
    if self.offline_share is not None:  # a tf.data.Dataset (Atari, MinAtar) or an iterator
      # Batch i of the stream is the i-th learner step since the offline start: a resumed
      # run continues it where its checkpoint left it.
      offline_it = iter(self.offline_share.batches(
          cfg.offline_batch_size, cfg.seed, self.start_step - self.offline_step_value))
    elif cfg.offline_batch_size:  # the gridworld: its fixed dataset
      offline_it = online_start.offline_gridworld_batches(cfg.seed + self.start_step,
                                                             cfg.offline_batch_size)
    return online, offline_it

  def _open_offline_share(self) -> None:
    """--offline_fraction > 0 on Atari and MinAtar: the offline run's dataset loaded and checked
    against its record (offline_share.open_share), for a run on own data its transitions read
    again and checked (own_data_share.open_share), before anything is written; None otherwise
    (the gridworld's offline share is its fixed dataset)."""
    cfg = self.cfg
    self.offline_share = None
    if cfg.offline_batch_size and cfg.own_data:
      self.offline_share = own_data_share.open_share(
          cfg.offline_dir, self.offline_summary, cfg.offline_batch_size, log=self.log)
    elif cfg.offline_batch_size and cfg.game.lower() != online_config.GRIDWORLD:
      num_deltas = getattr(getattr(self.agent, "config", None), "num_deltas", 1)
      self.offline_share = online_offline_share.open_share(
          cfg.offline_dir, self.offline_summary, cfg.game, cfg.offline_batch_size,
          num_deltas=num_deltas, log=self.log)

  def _next_batch(self, online, it, offline_it, step: int):
    """(batch, iterator): the next online batch (with its offline share), or (None, a fresh
    iterator) after a sampling timeout when the server and the actors are still alive.
    --schedule=deterministic (`online` None): the in-process actors' batch at `step`.

    The sample runs under a deadline, --sample_timeout_s plus --server_timeout_s: the rate
    limiter's timeout ends a wait on a live server, but a sample stream whose server was
    killed can block for ever (the iterator is then left to its thread)."""
    cfg = self.cfg
    t0 = time.perf_counter()
    try:
      if online is None:
        batch = self.actors.next_batch(step)
      else:
        batch = reverb_replay.call_with_deadline(lambda: next(it), self.address,
                                          cfg.sample_timeout_s + cfg.server_timeout_s, "a sample")
      self.sample_wait_seconds += time.perf_counter() - t0
    except (StopIteration, tf.errors.OutOfRangeError, tf.errors.UnavailableError,
            tf.errors.DeadlineExceededError, tf.errors.CancelledError,
            reverb_replay.DeadlineExceeded) as e:
      self.link.check(step)
      if cfg.num_actors and self.actors.alive() == 0:
        raise ActorsGone(f"learner: all {cfg.num_actors} actor(s) exited at train step "
                         f"{step}, after {int(self.env_steps.numpy())} of the budget's "
                         f"{cfg.num_env_steps} env steps; see "
                         f"{cfg.root_dir}/actors/") from None
      self.log(f"no sample for {cfg.sample_timeout_s:.0f}s at step {step} "
               f"({type(e).__name__}); server and {self.actors.alive()} actor(s) alive, "
               "waiting")
      return None, iter(online)
    if offline_it is not None:
      off = next(offline_it)
      batch = {k: tf.concat([batch[k], tf.cast(off[k], batch[k].dtype)], 0) for k in batch}
    return batch, it

  def _log_progress(self, step: int, metrics, rate: float) -> None:
    shown = {k: float(v) for k, v in metrics.items() if k in (
        "loss", "upper/loss", "q_data", "upper/q_data")}
    with self.train_writer.as_default():
      for k, v in shown.items():
        tf.summary.scalar(k, v, step=step)
    self.log(f"step {step} (env steps {int(self.env_steps.numpy())}/{self.cfg.num_env_steps})  "
             f"{rate:.1f} steps/s  "
             + "  ".join(f"{k}={v:.4g}" for k, v in shown.items())
             + f"  actors alive {self.actors.alive()}/{self.cfg.num_actors}")

  def _count_env_steps(self, step: int) -> int:
    """The actors' env steps since the run began (the checkpoint's count plus the replay
    table's inserts since this learner connected), also kept in `env_steps`."""
    count = self.env_steps_at_connect + self.link.replay_inserts(step) - self.inserts_at_connect
    self.env_steps.assign(count)
    return count

  def _run_train_phase(self) -> int:
    """Trains on replay batches until the actors' env steps reach the budget (checked at every
    weight push, every push_period steps), logging and checkpointing; returns the last step."""
    cfg = self.cfg
    online, offline_it = self._batches()
    it = None if online is None else iter(online)
    step = self.start_step
    done = self._count_env_steps(step) >= cfg.num_env_steps
    self.log(f"Fine-tuning from learner step {self.start_step} until the actors have taken "
             f"{cfg.num_env_steps} env steps ({int(self.env_steps.numpy())} so far; about "
             f"learner step {self.planned_step} at SPI {cfg.samples_per_insert:g} and batch "
             f"{cfg.online_batch_size}, after the {cfg.min_replay_size} items before the first "
             f"sample).")
    if step == self.offline_step_value:
      self._evaluate_once(step)  # the offline start: scores "before" fine-tuning
    last_t, last_step = time.time(), step
    try:
      while not done:
        batch, it = self._next_batch(online, it, offline_it, step)
        if batch is None:
          continue
        metrics = self.learner_step(batch)
        step = int(self.agent.train_step_counter.numpy())
        self._record_online_part(batch, step)
        if self.first_step_time is None:  # the end of the warm-up (min size, tracing)
          self.first_step_time, self.first_step = time.time(), step
          self.eval_seconds_at_first_step = self.eval_seconds
          self.sample_wait_at_first_step = self.sample_wait_seconds
        pushing = step % cfg.push_period == 0
        if pushing:
          done = self._count_env_steps(step) >= cfg.num_env_steps
        if (cfg.eval_interval and not done
            and (step - self.offline_step_value) % cfg.eval_interval == 0):
          self._evaluate_once(step)
          last_t += self.last_eval_seconds  # progress rates count training time only
        if pushing:
          self.control["train_step"].assign(step)
          self.link.push(step)
        if step % cfg.log_interval == 0 or done:
          now = time.time()
          self._log_progress(step, metrics, (step - last_step) / max(now - last_t, 1e-9))
          last_t, last_step = now, step
        if step % cfg.checkpoint_interval == 0 or done:
          self._save(step)
    except (ServerLost, ActorsGone, FloatingPointError, KeyboardInterrupt):
      raise
    except Exception as e:  # pylint: disable=broad-except
      # A sample (or a step) failed: name the server if it is the cause.
      self.link.check(step, e)
      raise
    self.trained = True
    return step

  def _record_online_part(self, batch, step: int) -> None:
    """The online rows (the first online_batch_size) of a trained batch: into the penalty
    probe's sample of new states; on the gridworld (CCVL) into the exact n(s) with
    --online_counts=grow (weight 1 / SPI: each inserted transition is sampled SPI times on
    average) and into the transition log the end-of-run bounds report checks against."""
    if self.probe is None and self.counts is None:
      return
    observation = np.asarray(batch["observation"])[:self.cfg.online_batch_size]
    if self.probe is not None:
      self.probe.add(observation)
    if self.counts is None:
      return
    if self.cfg.online_counts == "grow":
      self.counts.add_one_hot(observation, 1.0 / self.cfg.samples_per_insert)
    self.transitions.add({k: np.asarray(v)[:self.cfg.online_batch_size]
                          for k, v in batch.items()}, step)

  def _finish_actors(self, step: int) -> None:
    """Tells the actors the run is over (`finished` in the variables) and stops them."""
    self.control["finished"].assign(1)
    self.control["train_step"].assign(step)
    self.link.push(step)
    # Actors see `finished` at their next pull, but one blocked on an insert (the rate limiter
    # waits for samples that will not come) never pulls: a short grace, then SIGTERM.
    self.actors.stop(grace_s=3.0)

  def online_env_steps(self, step: int) -> float:
    """The actors' env steps at learner step `step`: 0 at the offline start (its weights owe
    nothing to the online data), after training the count it ended with, else now."""
    if step == self.offline_step_value:
      return 0.0
    if self.trained:
      return float(self.env_steps.numpy())
    return float(self._count_env_steps(step))

  def _evaluate_once(self, step: int, tightness: bool = False) -> Dict[str, float]:
    """Evaluates the policies at `step` (online_eval.evaluate; with `tightness`, also the
    bounds against Monte-Carlo returns; on the gridworld, at the offline start and with
    `tightness` also against exact values: `_bounds_report`), exactly once per step: a rerun
    reports the recorded results (evals.json; eval.csv has one row per evaluated step). None
    when eval_episodes is 0."""
    self.last_eval_seconds = 0.0
    if not self.cfg.eval_episodes:
      return {}
    recorded = training.recorded_evaluation(self.cfg.root_dir, step)
    if recorded is not None:
      self.log(f"[eval] step {step} already evaluated (evals.json): " + ", ".join(
          f"{k}={v:.4g}" for k, v in sorted(recorded.items()) if shown_in_log(k)))
      return recorded
    t0 = time.time()
    results = online_eval.evaluate(self.cfg, self.agent, step)
    if step == self.offline_step_value and self.counts is not None:
      results.update(self._bounds_report(online_bounds.START, step))
    if self.probe is not None:
      results.update(self.probe.measure(self.agent))
    if tightness or self.cfg.penalty_diagnostic:
      results.update(online_eval.bound_tightness(self.cfg, self.agent, self.cfg.eval_episodes))
      if self.counts is not None and step > self.offline_step_value:
        results.update(self._bounds_report(online_bounds.AFTER, step))
    results["online_env_steps"] = self.online_env_steps(step)
    self.last_eval_seconds = time.time() - t0
    self.eval_seconds += self.last_eval_seconds
    self.log(f"[eval] step {step} ({self.last_eval_seconds:.0f}s): " + ", ".join(
        f"{k}={v:.4g}" for k, v in sorted(results.items()) if shown_in_log(k)))
    training.record_evaluation(self.cfg.root_dir, step, results, self.manager.latest_checkpoint)
    return results

  def _bounds_report(self, phase: str, step: int) -> Dict[str, float]:
    """Gridworld CCVL: the bounds against exact values at `phase` ('offline start' or 'after
    fine-tuning'; online_bounds.report_phase), with the learner's n(s) at that point."""
    return online_bounds.report_phase(self.cfg, self.agent,
                                      self.settings.agent_values.get("alpha"),
                                      self.counts.counts.numpy(), self.transitions, phase,
                                      step, self.log)

  def _run_eval_phase(self, step: int) -> Dict[str, float]:
    """The end-of-run evaluation, with the bounds' tightness (`_evaluate_once`)."""
    return self._evaluate_once(step, tightness=True)

  def _log_before_after(self, last_eval: Dict[str, float]) -> None:
    """One line per scored policy: its score at the offline start and after fine-tuning."""
    start = training.recorded_evaluation(self.cfg.root_dir, self.offline_step_value) or {}
    keys = [k for k in sorted(last_eval) if k in start and (
        k.endswith("_normalized_score") or (k.endswith("_mean_score") and not any(
            n.endswith("_normalized_score") for n in last_eval)))]
    for k in keys:
      self.log(f"[score] {k}: offline start {start[k]:.4g} -> after fine-tuning "
               f"{last_eval[k]:.4g} ({last_eval[k] - start[k]:+.4g})")

  def _throughput(self, step: int, train_seconds: float, end_time: float) -> Dict[str, float]:
    """Learner steps/s over this call's training (evaluations excluded) and after its
    warm-up (from the first completed step: filling min_replay_size, tracing), the learner's
    seconds waiting for samples (rate limiter + input pipeline), the local actors' env steps/s
    and seconds in their inserts (online_actor.read_stats), and the replay table's completed
    inserts / samples since its server started (reverb_replay.rate_limiter_stats)."""
    out = {"train_seconds": train_seconds,
           "learner_steps": float(step - self.start_step),
           "learner_steps_per_s": (step - self.start_step) / max(train_seconds, 1e-9),
           "sample_wait_seconds": self.sample_wait_seconds,
           "eval_seconds": self.eval_seconds}
    if self.first_step_time is not None and step > self.first_step:
      steady = (end_time - self.first_step_time
                - (self.eval_seconds - self.eval_seconds_at_first_step))
      out["warmup_seconds"] = train_seconds - steady
      out["steady_learner_steps_per_s"] = (step - self.first_step) / max(steady, 1e-9)
      out["steady_seconds"] = steady
      out["steady_sample_wait_seconds"] = (self.sample_wait_seconds
                                           - self.sample_wait_at_first_step)
    if self.cfg.schedule == online_config.DETERMINISTIC:
      out.update(self.actors.throughput(train_seconds))
      return out
    out.update({f"actors/{k}": v for k, v in online_actor.read_stats(
        self.cfg.root_dir, self.cfg.num_actors).items()})
    try:
      stats = reverb_replay.rate_limiter_stats(self.link.client.server_info(
          timeout=max(1, int(self.cfg.server_timeout_s)))[reverb_replay.REPLAY_TABLE])
    except Exception as e:  # pylint: disable=broad-except  (a report, not the run's result)
      self.log(f"could not read the replay table's statistics: {e}")
      return out
    out.update({f"replay/{k}": v for k, v in stats.items()})
    out["env_steps_per_s"] = stats["inserts"] / max(train_seconds, 1e-9)
    return out

  def _export_and_summarize(self, step: int, last_eval: Dict[str, float],
                            throughput: Dict[str, float]) -> Dict:
    """Exports the agent's SavedModels (unless --export_policies=false); writes and returns
    summary.json."""
    cfg, agent = self.cfg, self.agent
    exports, _ = online_config.agent_spec(cfg.agent).policies(agent, self.tss, self.act, None,
                                                              self.settings)
    dirs = {name: os.path.join(cfg.root_dir, name) for name in exports}
    last_good = self.manager.latest_checkpoint
    if cfg.export_policies:
      game = factory.make_env(cfg.game)  # the game and action set the exports record
      for name, pol in exports.items():
        with training.writing(dirs[name], last_good):
          policies.export_policy(pol, dirs[name], train_step=agent.train_step_counter,
                                 game=game.game,
                                 action_set=getattr(game.env, "action_set", None))
      self.log(f"Exported SavedModels: {', '.join(dirs.values())}.")
    result = dict(game=cfg.game, step=step, start_step=self.start_step,
                  offline_step=int(self.offline_step.numpy()), final_step=step,
                  online_env_steps=int(self.env_steps.numpy()),
                  env_step_budget=cfg.num_env_steps,
                  address=self.address, last_eval=last_eval,
                  start_eval=training.recorded_evaluation(cfg.root_dir, self.offline_step_value),
                  throughput=throughput,
                  checkpoint=self.manager.latest_checkpoint,
                  replay_items=self.link.replay_items(step),
                  config=cfg.record(), policy_dirs=dirs,
                  config_changes=training.read_changes(
                      os.path.join(cfg.root_dir, "checkpoints")),
                  machines=training.read_machines(os.path.join(cfg.root_dir, "checkpoints")))
    _write_json(os.path.join(cfg.root_dir, "summary.json"), result, last_good)
    return result

  def _plot_penalty(self) -> None:
    """penalty.png: the penalty diagnostic against online env steps (online_penalty.plot)."""
    if not (self.cfg.penalty_diagnostic and self.cfg.eval_episodes):
      return
    evals = training.load_eval_record(self.cfg.root_dir)["evals"]
    path = os.path.join(self.cfg.root_dir, "penalty.png")
    online_penalty.plot({self.cfg.agent: [evals[k] for k in sorted(evals, key=int)]}, path,
                        title=f"{self.cfg.game}: regularizer weight and bounds vs MC returns")
    self.log(f"Penalty diagnostic against online steps: {path}.")

  def run(self) -> Dict:
    """All phases; the actors and the in-process server are stopped whatever happens once
    the actors exist."""
    cfg = self.cfg
    cfg.validate()
    self._resolve_config()
    cfg = self.cfg
    self._build_learner()
    self._initialize_checkpointer_and_maybe_resume()
    self._open_offline_share()
    # Only now: an offline summary, setting, checkpoint or dataset refused above leaves no
    # --root_dir.
    os.makedirs(cfg.root_dir, exist_ok=True)
    if not self.manager.latest_checkpoint:
      self._check_fingerprint()  # a fresh run stores its settings with its checkpoints
    training.record_machine(os.path.join(cfg.root_dir, "checkpoints"), self.start_step,
                            self.manager.latest_checkpoint)  # the learner's, per start
    if cfg.schedule == online_config.DETERMINISTIC:
      env_steps = int(self.env_steps.numpy())
      if self.offline_step_value < self.start_step and env_steps < cfg.num_env_steps:
        raise ValueError(
            f"--schedule=deterministic cannot resume the interrupted run in {cfg.root_dir} "
            f"(train step {self.start_step}, {env_steps} of {cfg.num_env_steps} env steps): "
            f"its actors' environments and replay were not checkpointed. Delete it or use a "
            f"fresh --root_dir")
      self._start_in_process_actors()
    else:
      self._connect_replay()
    config_path = os.path.join(cfg.root_dir, "online_config.json")
    self._note_changed_offline_settings(config_path)
    _write_json(config_path, cfg.record(), self.manager.latest_checkpoint)
    if cfg.schedule == online_config.ASYNC:
      self.actors = online_actor.ActorProcesses(cfg, self.address, self.log)
    self.train_writer = tf.summary.create_file_writer(
        os.path.join(cfg.root_dir, "summaries", "train"))
    try:
      self.actors.start(config_path)
      _write_status(cfg, learner_pid=os.getpid(), address=self.address,
                    actor_pids=[p.pid for p in self.actors.procs], start_step=self.start_step,
                    planned_step=self.planned_step)
      t0 = time.time()
      self.eval_seconds = 0.0
      step = self._run_train_phase()
      end_time = time.time()
      train_seconds = end_time - t0 - self.eval_seconds
      throughput = self._throughput(step, train_seconds, end_time)
      self._finish_actors(step)
      self.log(f"Trained to step {step} in {train_seconds:.1f}s of training ("
               f"{throughput['learner_steps_per_s']:.1f} learner steps/s, "
               f"{throughput['sample_wait_seconds']:.1f}s waiting for samples; local actors "
               f"{throughput['actors/actor_env_steps_per_s']:.1f} env steps/s, "
               f"{100 * throughput['actors/insert_share']:.0f}% of their time inserting).")
      last_eval = self._run_eval_phase(step)
      self._log_before_after(last_eval)
      self._plot_penalty()
      return self._export_and_summarize(step, last_eval, throughput)
    finally:
      self.actors.stop(grace_s=5.0)
      if self.server is not None:
        self.server.stop()


def _earlier_fingerprint(config_path: str, now: Dict[str, object]):
  """The fingerprint of the online_config.json at `config_path` (the settings of a run's last
  start), its keys those of `now` it records; None when it cannot be read."""
  import json  # pylint: disable=g-import-not-at-top
  try:
    with open(config_path) as f:
      saved = json.load(f)
  except (OSError, ValueError):
    return None
  if not isinstance(saved, dict):
    return None
  out = {k: saved[k] for k in now if k in saved}
  if out.get("offline_dir"):
    out["offline_dir"] = os.path.realpath(str(out["offline_dir"]))
  return out


def shown_in_log(key: str) -> bool:
  """Whether an evaluation result goes into the [eval] line: not the per-delta bounds metrics
  and exact per-delta scores (logged as tables; all of them are in evals.json)."""
  return not key.startswith(("bounds", "exact/"))


def run(cfg: online_config.OnlineConfig, log: Callable[[str], None] = print, strategy=None) -> Dict:
  """The learner (and, unless cfg.reverb_address, the Reverb server); see the module notes.

  Args:
    cfg: online_config.OnlineConfig.
    log: progress lines.
    strategy: a tf.distribute.Strategy (default: tf.distribute.get_strategy(), i.e. the
      default strategy; pass MirroredStrategy() on a multi-GPU machine). The agent's variables
      are created under its scope; steps as in `distributed.make_learner_step`.

  Raises:
    ServerLost: the Reverb server stopped answering (message names the address).
    ActorsGone (a RuntimeError): every local actor exited before the budget was reached.
    ValueError: bad flags or an offline checkpoint that does not fit.
  """
  return _Runner(cfg, log, strategy or tf.distribute.get_strategy()).run()

