"""Writing a TF-Agents policy as a SavedModel that loads in a process importing only TensorFlow
(`export_policy`; docs/policies.md, "Using an exported policy").

The export view (`_ActionOnlyPolicy`) keeps `action` and `get_initial_state` only, checks the
observation against the policy's spec at run time (a time step without its batch dimension
included) and refuses other dtypes naming that spec, and a batch size of get_initial_state that
is not an integer >= 0 naming batch_size (`initial_state_batch`, which the in-process CCVL
policies use too, as they use `state_for_batch` for a state of batch 0).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np
import tensorflow as tf
from tf_agents.policies import policy_saver
from tf_agents.policies import tf_policy
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import policy_step
from tf_agents.utils import nest_utils
# The context tf.saved_model.save traces under (its options are part of tf.function's cache
# key): tracing the export's functions under it once lets the save reuse them.
from tensorflow.python.saved_model import save_context

from ccvl_tf.runtime import quiet
from ccvl_tf.runtime import strict_json


# What get_initial_state takes, in every refusal of another batch size (in process: ValueError or
# TypeError; exported: the assertion's text). No quotes: TensorFlow escapes them in assertions.
BATCH_SIZE_TEXT = (
    "get_initial_state(batch_size) takes the number of environments the time steps batch, an "
    "integer >= 1 (0: an empty state that action() replaces by the initial state of the batch "
    "of the time step)")


def initial_state_batch(batch_size):
  """`batch_size` of a policy's get_initial_state, checked (BATCH_SIZE_TEXT): a Python or numpy
  integer >= 0 is returned as an int; a negative one is a ValueError, anything else (a float, a
  bool, None, a string) a TypeError, each one line naming batch_size and what was given. An
  integer tensor (a batch size known when run, as inside a traced function) is returned as int32
  after an assertion of >= 0 that runs first, never below 0 where shapes are inferred (the
  assertion, not a Fill error, names it); a tensor of another dtype is a TypeError."""
  if isinstance(batch_size, (tf.Tensor, tf.Variable)):
    if not batch_size.dtype.is_integer:
      raise TypeError(f"{BATCH_SIZE_TEXT}; got a {batch_size.dtype.name} tensor")
    size = tf.cast(batch_size, tf.int32)
    check = tf.debugging.Assert(size >= 0, [BATCH_SIZE_TEXT + "; got", size])
    with tf.control_dependencies([check]):
      return tf.maximum(size, 0)
  if isinstance(batch_size, np.ndarray) and batch_size.ndim == 0:
    batch_size = batch_size[()]
  if isinstance(batch_size, (bool, np.bool_)) or not isinstance(batch_size, (int, np.integer)):
    raise TypeError(f"{BATCH_SIZE_TEXT}; got {batch_size!r}")
  if batch_size < 0:
    raise ValueError(f"{BATCH_SIZE_TEXT}; got {batch_size!r}")
  return int(batch_size)


def state_for_batch(policy: tf_policy.TFPolicy, time_step, policy_state):
  """`policy_state` of `policy` for `time_step`: as given when its batch is the time step's, the
  initial state of the time step's batch when its batch is 0 (get_initial_state(0): what
  TF-Agents' py policies ask for without a batch size), else an assertion naming both batch
  sizes."""
  batch = tf.shape(time_step.step_type)[0]
  given = tf.shape(tf.nest.flatten(policy_state)[0])[0]
  check = tf.debugging.Assert(
      tf.logical_or(tf.equal(given, 0), tf.equal(given, batch)),
      ["the policy state has batch size", given, "but the time step has", batch,
       "; pass get_initial_state(batch_size=<the time step's batch size>)"])
  with tf.control_dependencies([check]):
    # Only the branch taken runs: no initial state made, nothing copied, for a state given.
    return tf.cond(tf.equal(given, 0), lambda: policy.get_initial_state(batch),
                   lambda: tf.nest.map_structure(tf.identity, policy_state))


class _ActionOnlyPolicy(tf_policy.TFPolicy):
  """Export view of a policy: `action` and `get_initial_state` only, as TF-Agents' loaders
  call them.

  PolicySaver also serializes `distribution()`, whose output is a TFP distribution; loading such
  a SavedModel requires TFP to be imported (its type spec must be registered), so a process that
  imports only TensorFlow could not load it. This view makes `distribution()` unserializable
  (PolicySaver then stores a stub that raises when called), so the SavedModel loads anywhere.

  `action` takes an observation of any shape (the saved signature's observation has no fixed
  shape) and checks it against the policy's observation spec, so a wrong shape, and a time step
  of batch size 0, is an error naming that spec instead of a failed signature match or an
  error deep inside the network. Observations of another dtype (float32, int64, ...) reach a
  concrete function of their own (`export_policy` traces them, `refusal_step`), which says the
  same instead of TensorFlow's "Could not find matching concrete function". A time step of
  any shape reaches a concrete function too (`_trace_any_rank`, `_trace_other_states`), so one
  without its batch dimension is named ("the observation has no batch dimension") rather than
  unmatched. A policy state of batch size 0 (what TF-Agents'
  `SavedModelPyTFEagerPolicy.get_initial_state()` returns without a batch size, and `PyDriver`
  passes on an unbatched environment) is replaced by the initial state of the time step's batch;
  a state of another batch size than the time step's is an error (`state_for_batch`).
  `get_initial_state` refuses a negative batch size when run, and a float or None (concrete
  functions of their own, OTHER_BATCH_SIZES) naming batch_size.
  """

  def __init__(self, policy: tf_policy.TFPolicy):
    observation = policy.time_step_spec.observation
    time_step_spec = policy.time_step_spec
    if isinstance(observation, tf.TensorSpec):
      time_step_spec = time_step_spec._replace(
          observation=tf.TensorSpec(None, observation.dtype, observation.name))
    # validate_args=False: a policy state of another structure reaches _action, which refuses
    # it naming both, instead of failing while the SavedModel's extra signatures are traced.
    super().__init__(time_step_spec, policy.action_spec, policy.policy_state_spec,
                     policy.info_spec, automatic_state_reset=False, validate_args=False,
                     name=(policy.name or "policy") + "_export")
    self._policy = policy
    self._spec_text = ""
    self._observation_dtype = getattr(observation, "dtype", None)
    if isinstance(observation, tf.TensorSpec):
      self._spec_text = (
          f"the observation must be {observation.dtype.name} [batch, "
          f"{', '.join(map(str, observation.shape.as_list()))}] with batch >= 1 (the "
          f"time_step_spec.observation of the policy, policy_specs.pbtxt)")

  def _variables(self):
    return self._policy.variables()

  def _state_text(self, policy_state) -> str:
    """What the state must be and what was given (for a dict of other keys: the keys missing
    and those not taken), for the refusal."""
    def describe(state) -> str:
      if state is None:
        return "None"
      if isinstance(state, dict):
        return "a dict with the keys " + ", ".join(sorted(state))
      if not tf.nest.flatten(state):
        return "()"
      return f"a {type(state).__name__} of {len(tf.nest.flatten(state))} tensors"
    if tf.nest.flatten(self.policy_state_spec):
      want = (f"{describe(self.policy_state_spec)} (get_initial_state(batch_size=B), then the "
              f"state each step returns)")
    else:
      want = "() or left out (this policy keeps no state)"
    other = ": the state of another policy" if tf.nest.flatten(policy_state) else ""
    if isinstance(policy_state, dict) and isinstance(self.policy_state_spec, dict):
      missing = sorted(set(self.policy_state_spec) - set(policy_state))
      extra = sorted(set(policy_state) - set(self.policy_state_spec))
      other = "".join(f" ({what} {', '.join(keys)})" for what, keys in (
          ("missing", missing), ("not taken", extra)) if keys)
    return f"the policy state must be {want}; got {describe(policy_state)}{other}"

  def _dtype_text(self, policy_state) -> Optional[str]:
    """The refusal of a state of the policy's structure with an entry of another dtype (known
    when traced), naming the first such entry; None when every dtype is the spec's."""
    paths = [p for p, _ in nest_utils.flatten_with_joined_paths(self.policy_state_spec)]
    for path, state, spec in zip(paths, tf.nest.flatten(policy_state),
                                 tf.nest.flatten(self.policy_state_spec)):
      dtype = tf.as_dtype(getattr(state, "dtype", None) or tf.convert_to_tensor(state).dtype)
      if dtype != spec.dtype:
        return _entry_text(path, spec) + f"); got {dtype.name}"
    return None

  def _get_initial_state(self, batch_size):
    """The policy's initial state of `batch_size` rows (initial_state_batch: 0 is the empty
    state that `action` replaces by the time step's batch); a negative batch size is refused
    naming it when run, and one of another dtype or None (a concrete function of its own,
    `export_policy` traces them) likewise."""
    if batch_size is None or not tf.as_dtype(
        getattr(batch_size, "dtype", tf.int32)).is_integer:  # known when traced
      got = ["; got None"] if batch_size is None else [
          f"; got a {batch_size.dtype.name} number", batch_size]
      check = tf.debugging.Assert(False, [BATCH_SIZE_TEXT + got[0]] + got[1:])
      with tf.control_dependencies([check]):
        return tf.nest.map_structure(tf.identity, self._policy.get_initial_state(0))
    return self._policy.get_initial_state(initial_state_batch(tf.convert_to_tensor(batch_size)))

  def _checked_inputs(self, time_step, policy_state):
    """(time_step, policy_state) after checking the observation against the policy's spec at
    run time: its shape, and a batch of at least 1. Every input passes through the check (so
    no other op runs before it) and loses its static batch size (a batch of 0 known when the
    saved function is called would otherwise fail shape inference deep inside the policy)."""
    spec = self._policy.time_step_spec.observation
    if not isinstance(spec, tf.TensorSpec):
      return time_step, policy_state
    want = spec.shape.as_list()
    got = tf.shape(time_step.observation)
    padded = tf.concat([got, tf.zeros([len(want) + 1], tf.int32)], 0)
    # The observation of one environment, no batch dimension (ts.restart(frame) unbatched).
    unbatched = tf.logical_and(tf.equal(tf.size(got), len(want)),
                               tf.reduce_all(tf.equal(padded[:len(want)], want)))
    no_batch = tf.debugging.Assert(tf.logical_not(unbatched), [
        "the observation has no batch dimension: it must be " + self._spec_text[
            len("the observation must be "):] + ", and step_type, reward and discount [batch]; "
        "add one (x[None] for each) or load it with TF-Agents SavedModelPyTFEagerPolicy, "
        "which does; got shape", got], summarize=16)
    ok = tf.logical_and(tf.equal(tf.size(got), len(want) + 1),
                        tf.reduce_all(tf.equal(padded[1:len(want) + 1], want)))
    ok = tf.logical_and(ok, padded[0] >= 1)
    with tf.control_dependencies([no_batch]):
      check = tf.debugging.Assert(ok, [self._spec_text + "; got shape", got], summarize=16)
    # step_type, reward and discount: one entry per observation, [batch].
    shapes = [tf.shape(x) for x in (time_step.step_type, time_step.reward, time_step.discount)]
    same = tf.reduce_all([tf.logical_and(tf.equal(tf.size(s), 1),
                                         tf.equal(tf.concat([s, [-1]], 0)[0], got[0]))
                          for s in shapes])
    with tf.control_dependencies([check]):
      batch_check = tf.debugging.Assert(same, [
          "the time step's step_type, reward and discount must each have the shape [batch] of "
          "the observation's batch", got[:1], "; got step_type", shapes[0], "reward", shapes[1],
          "discount", shapes[2]], summarize=16)
    checks = [check, batch_check] + self._time_step_checks(time_step)

    def unbatched(x):
      x = tf.convert_to_tensor(x)
      shape = None if x.shape.rank is None else [None] + x.shape.as_list()[1:]
      with tf.control_dependencies(checks):
        return tf.identity(tf.compat.v1.placeholder_with_default(x, shape))

    time_step, policy_state = tf.nest.map_structure(unbatched, (time_step, policy_state))
    # step_type, reward and discount are [batch] once checked; a time step of any shape
    # (_trace_any_rank) gets that static shape back here (a reshape, valid for any shape: a
    # wrong one never gets past the checks).
    time_step = time_step._replace(**{
        k: tf.reshape(getattr(time_step, k), [-1]) for k in ("step_type", "reward", "discount")})
    # Under tf.cond: a caller that knows the wrong shape statically (TF-Agents' loaders trace
    # with the actual shapes) would otherwise fail at ensure_shape before the check runs.
    observation = tf.cond(ok, lambda: tf.ensure_shape(time_step.observation, [None] + want),
                          lambda: tf.zeros([0] + want, spec.dtype))
    return time_step._replace(observation=observation), policy_state

  @staticmethod
  def _time_step_checks(time_step):
    """Assertions on the time step's step_type (FIRST 0, MID 1 or LAST 2: another value would
    be taken for MID) and discount (in [0, 1]: a discount above 1 would scale the adaptive
    policy's Bellman errors and push its belief without bound). A non-finite discount is left
    to the adaptive policy's own check, which names the reward and the discount together."""
    step_type = tf.cast(time_step.step_type, tf.int32)
    discount = tf.cast(time_step.discount, tf.float32)
    valid_type = tf.reduce_all(tf.logical_and(step_type >= 0, step_type <= 2))
    out_of_range = tf.logical_and(tf.math.is_finite(discount),
                                  tf.logical_or(discount < 0.0, discount > 1.0))
    return [
        tf.debugging.Assert(valid_type, [
            "the step_type of the time step must be 0 (FIRST), 1 (MID) or 2 (LAST); got",
            step_type], summarize=16),
        tf.debugging.Assert(tf.logical_not(tf.reduce_any(out_of_range)), [
            "the discount of the time step must be in [0, 1] (1 within an episode, 0 at its end); "
            "got", discount], summarize=16)]

  def refusal_step(self, time_step, policy_state, message=None):
    """The policy step of an input the policy cannot take: an assertion that names what was
    expected and what was given (`message`; by default, an observation of another dtype than
    the spec's), then a placeholder step (actions 0, the state as given) that is never
    returned."""
    got = time_step.observation
    if message is None:
      message = [
          self._spec_text + f"; got {got.dtype.name} of shape", tf.shape(got),
          f"; convert it first (np.asarray(observation, np.{self._observation_dtype.name}))"]
    else:
      message = [message]
    check = tf.debugging.Assert(False, message, summarize=16)
    with tf.control_dependencies([check]):
      batch = tf.shape(time_step.step_type)[:1]
      zeros = lambda spec: tf.zeros(
          tf.concat([batch, tf.constant(spec.shape.as_list(), tf.int32)], 0), spec.dtype)
      action = tf.nest.map_structure(zeros, self.action_spec)
      info = tf.nest.map_structure(zeros, self.info_spec)
      state = () if policy_state is None else tf.nest.map_structure(tf.identity, policy_state)
    return policy_step.PolicyStep(action, state, info)

  def _checked_state(self, policy_state):
    """`policy_state` after checking each tensor's shape past the batch against the policy's
    state spec at run time: a state of the same structure but other sizes (the belief of a
    policy exported with another number K of quantized deltas, another game's frames) is
    refused naming the tensor, the shape it must have and the shape given. Each tensor gets
    its static shape back ([batch] + the spec's) for the policy."""
    def checked(path, state, spec):
      want = spec.shape.as_list()
      got = tf.shape(state)
      padded = tf.concat([got, tf.zeros([len(want) + 1], tf.int32)], 0)
      ok = tf.logical_and(tf.equal(tf.size(got), len(want) + 1),
                          tf.reduce_all(tf.equal(padded[1:len(want) + 1], want)))
      check = tf.debugging.Assert(ok, [
          # No quotes: TensorFlow escapes them in the assertion's text.
          _entry_text(path, spec) + "; a policy exported with another number of quantized "
          "deltas K keeps a belief of another size); got shape", got], summarize=16)
      with tf.control_dependencies([check]):
        state = tf.identity(state)
      # Under tf.cond, as the observation's: a shape known wrong when traced never reaches
      # ensure_shape before the check.
      return tf.cond(ok, lambda: tf.ensure_shape(state, [None] + want),
                     lambda: tf.zeros([0] + want, spec.dtype))
    paths = [p for p, _ in nest_utils.flatten_with_joined_paths(self.policy_state_spec)]
    flat = [checked(path, state, spec) for path, state, spec in zip(
        paths, tf.nest.flatten(policy_state), tf.nest.flatten(self.policy_state_spec))]
    return tf.nest.pack_sequence_as(self.policy_state_spec, flat)

  def _state_for(self, time_step, policy_state):
    """`policy_state`, or the initial state of the time step's batch when its batch is 0
    (state_for_batch)."""
    return state_for_batch(self._policy, time_step, self._checked_state(policy_state))

  def _action(self, time_step, policy_state, seed):
    try:  # known when traced: a function apart
      tf.nest.assert_same_structure(policy_state, self.policy_state_spec)
    except (TypeError, ValueError):
      return self.refusal_step(time_step, policy_state, self._state_text(policy_state))
    dtype_text = self._dtype_text(policy_state)
    if dtype_text is not None:  # known when traced: a function apart
      return self.refusal_step(time_step, policy_state, dtype_text)
    spec = self._policy.time_step_spec.observation
    if isinstance(spec, tf.TensorSpec) and time_step.observation.dtype != spec.dtype:
      return self.refusal_step(time_step, policy_state)  # known when traced: a function apart
    time_step, policy_state = self._checked_inputs(time_step, policy_state)
    if tf.nest.flatten(policy_state):
      policy_state = self._state_for(time_step, policy_state)
    return self._policy.action(time_step, policy_state, seed=seed)

  def _distribution(self, time_step, policy_state):
    raise NotImplementedError(
        "exported CCVL policies provide action() only "
        "(see ccvl_tf.algorithm.policy_export.export_policy)")


def _entry_text(path: str, spec: tf.TensorSpec) -> str:
  """What a policy state entry must be, for a refusal (the caller closes the parenthesis)."""
  dims = "".join(f", {d}" for d in spec.shape.as_list())
  return (f"the policy state entry {path} must be {spec.dtype.name} [batch{dims}] "
          f"(get_initial_state(batch_size=B), then the state each step returns")


# The record of the game an export was trained in, beside policy_specs.pbtxt: the action
# count alone cannot tell Breakout's [0, 1, 3, 4] from Atlantis's [0, 1, 11, 12].
POLICY_RECORD = "ccvl_policy.json"


def game_record(game: str, action_set: Optional[Sequence[int]]) -> dict:
  """What POLICY_RECORD holds: the game (ccvl_tf.envs.factory's name: an Atari game,
  'minatar/<Game>' or 'gridworld') and its ALE / MinAtar action ids (None: the game has none,
  the gridworld)."""
  return {"game": str(game),
          "action_set": None if action_set is None else [int(a) for a in action_set]}


def export_policy(policy: tf_policy.TFPolicy, directory: str, train_step=None,
                  game: Optional[str] = None, action_set: Optional[Sequence[int]] = None,
                  other_states: Sequence = ()) -> str:
  """Writes `policy` as a SavedModel with TF-Agents' PolicySaver; returns `directory`.

  The SavedModel has `action`, `get_initial_state` and `get_train_step` (functions and
  signatures) and loads with plain `tf.saved_model.load` in a process that imports only
  TensorFlow. Carry the state yourself (docs/policies.md):

      saved = tf.saved_model.load(directory)
      state = saved.get_initial_state(batch_size=1)
      step = saved.action(time_step, state); state = step.state

  `policy_specs.pbtxt` next to it holds the specs (read by ccvl_tf.evaluation.rollouts).
  Use this rather than `PolicySaver(policy)` directly: that also saves `distribution()`, and the
  result then needs TFP imported to load.

  A local export is written to a temporary directory beside `directory` and then put in its
  place: a failed write (disk full) leaves the previous export, if any, and no partial one.

  With `game`, `ccvl_policy.json` beside it records the game and its action set
  (`game_record`), which evaluation and collection check against theirs
  (ccvl_tf.evaluation.rollouts.load_saved_policy).

  Args:
    policy: any TFPolicy (CCVL policies, possibly wrapped by `epsilon_greedy`).
    directory: output directory (created).
    train_step: optional scalar int64 tf.Variable saved as the train step.
    game: the game the policy was trained in (ccvl_tf.envs.factory's name).
    action_set: that game's action ids, index i of the policy's actions being action_set[i].
    other_states: policy state specs (no batch dimension) of other policies a caller may pass
      by mistake; the export refuses each naming the state it takes. None, no state and ()
      are refused (or, for a policy without state, None) anyway.
  """
  with quiet.notices_hidden():  # every export's absl notices (quiet.EXPORT_NOTICES)
    return _export(policy, directory, train_step, game, action_set, other_states)


def _export(policy, directory, train_step, game, action_set, other_states) -> str:
  """export_policy's work."""
  view = _ActionOnlyPolicy(policy)
  # Traced under the save's own context and options (SAVE_OPTIONS): tf.function's cache key
  # holds the save context's variable policy, so functions traced outside it are all traced
  # again by the save (each export's functions traced twice, about 60% of its time).
  with save_context.save_context(SAVE_OPTIONS):
    saver = policy_saver.PolicySaver(view, batch_size=None, train_step=train_step)
    _trace_other_batch_sizes(saver)
    _trace_any_rank(saver, view)
    _trace_other_dtypes(saver, view)
    others = [o for o in other_states
              if tf.nest.flatten(o) and not _same(o, view.policy_state_spec)]
    _trace_other_states(saver, view, others)
  record = None if game is None else game_record(game, action_set)
  if "://" in directory:  # remote (gs://): written in place
    _save(saver, policy, directory, record)
    return directory
  parent, name = os.path.split(os.path.abspath(directory))
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=parent)
  old = None
  try:
    _save(saver, policy, tmp, record)
    if os.path.isdir(directory):
      old = tempfile.mkdtemp(prefix=f".{name}.old-", dir=parent)
      os.rename(directory, os.path.join(old, name))
    os.rename(tmp, directory)
    tmp = None
  finally:
    if tmp is not None:
      shutil.rmtree(tmp, ignore_errors=True)
      if old is not None and not os.path.exists(directory):  # put the previous export back
        os.rename(os.path.join(old, name), directory)
    if old is not None:
      shutil.rmtree(old, ignore_errors=True)
  return directory


# Observation dtypes a caller may pass by mistake (frames scaled to floats, half precision,
# numpy's default integers, a mask): each gets a concrete function of the saved `action` that
# refuses it naming the observation spec (_ActionOnlyPolicy.refusal_step), instead of
# TensorFlow's 23-48-line "Could not find matching concrete function". Other dtypes still get
# TensorFlow's message.
OTHER_OBSERVATION_DTYPES = (tf.uint8, tf.float32, tf.float64, tf.float16, tf.int32, tf.int64,
                            tf.int8, tf.int16, tf.uint16, tf.bool)


# Batch sizes of get_initial_state a caller may pass besides int32 (PolicySaver's signature):
# numpy's default integer, taken as it is; a float and None, each refused naming batch_size
# (_ActionOnlyPolicy._get_initial_state) instead of "Could not find matching concrete function".
OTHER_BATCH_SIZES = (tf.TensorSpec((), tf.int64, "batch_size"),
                     tf.TensorSpec((), tf.float32, "batch_size"),
                     tf.TensorSpec((), tf.float64, "batch_size"), None)


def _trace_other_batch_sizes(saver) -> None:
  """Traces the saved `get_initial_state` of `saver` for each of OTHER_BATCH_SIZES."""
  for spec in OTHER_BATCH_SIZES:
    saver.policy.get_initial_state.get_concrete_function(spec)


def _any_rank_time_step(view: _ActionOnlyPolicy):
  """The time step spec of the observation's dtype whose step_type, reward, discount and
  observation have any shape (named as PolicySaver names its specs)."""
  any_shape = lambda spec: tf.TensorSpec(None, spec.dtype, spec.name)
  return policy_saver.rename_spec_with_nest_paths(
      tf.nest.map_structure(any_shape, view.time_step_spec))


def _trace_any_rank(saver, view: _ActionOnlyPolicy) -> None:
  """Traces the saved `action` of `saver` of a policy without state for a time step of any
  shape (_any_rank_time_step), without a state and with (): a time step without its batch
  dimension (ts.restart(frame) unbatched) then reaches the run-time checks of
  _ActionOnlyPolicy._checked_inputs, which name the observation's missing batch dimension or the
  step_type's batch, instead of TensorFlow's "Could not find matching concrete function". (A
  policy with state gets the same from the trace of its state of any shape,
  _trace_other_states.) A batched time step may run this function too: it computes the same
  steps."""
  if not isinstance(view.time_step_spec.observation, tf.TensorSpec) or tf.nest.flatten(
      view.policy_state_spec):
    return
  time_step = _any_rank_time_step(view)
  saver.policy.action.get_concrete_function(time_step=time_step, policy_state=())
  saver.policy.action.get_concrete_function(time_step=time_step)


def _trace_other_dtypes(saver, view: _ActionOnlyPolicy) -> None:
  """Traces the saved `action` of `saver` for observations of each OTHER_OBSERVATION_DTYPES
  (the specs named as PolicySaver does, the time step of any shape: batched or not), so the
  SavedModel holds those concrete functions too; each is only the refusal (the dtype is known
  when it is traced)."""
  observation = view.time_step_spec.observation
  if not isinstance(observation, tf.TensorSpec):
    return
  batch = lambda spec: policy_saver.add_batch_dim(spec, [None])
  state = policy_saver.rename_spec_with_nest_paths(
      tf.nest.map_structure(batch, view.policy_state_spec))
  any_shape = lambda spec: tf.TensorSpec(None, spec.dtype, spec.name)
  for dtype in OTHER_OBSERVATION_DTYPES:
    if dtype == observation.dtype:
      continue
    time_step = tf.nest.map_structure(any_shape, view.time_step_spec)._replace(
        observation=tf.TensorSpec(None, dtype, observation.name))
    time_step = policy_saver.rename_spec_with_nest_paths(time_step)
    saver.policy.action.get_concrete_function(time_step=time_step, policy_state=state)
    if not state:  # PolicySaver's action of a stateless policy also takes the time step alone
      saver.policy.action.get_concrete_function(time_step=time_step)


# Dtypes a policy state entry may be given by mistake, by the spec's dtype: numpy's defaults
# (float64, int64; an int for a bool), frames scaled to floats, float32 for a float64 record.
# Each is one more concrete function of every export; other dtypes still get TensorFlow's
# message.
STATE_DTYPE_MISTAKES = {tf.float32: (tf.float64,), tf.float64: (tf.float32,),
                        tf.int32: (tf.int64,), tf.int64: (tf.int32,), tf.bool: (tf.int64,),
                        tf.uint8: (tf.float32, tf.int64)}


def _trace_other_states(saver, view: _ActionOnlyPolicy, other_states: Sequence) -> None:
  """Traces the saved `action` of `saver` for the policy states a caller may pass by mistake:
  None, and no state or () to a policy that keeps one; None to one that keeps none; each
  of `other_states` (state specs without the batch dimension, e.g. another policy's of the same
  run); a dict state with one of its keys left out, or with one entry of a dtype of
  STATE_DTYPE_MISTAKES -- each only the refusal (_ActionOnlyPolicy._action); and the policy's
  own state structure with tensors of any shape and a time step of any shape, checked at run
  time (_ActionOnlyPolicy._checked_state, _checked_inputs)."""
  if not isinstance(view.time_step_spec.observation, tf.TensorSpec):
    return
  batch = lambda spec: policy_saver.add_batch_dim(spec, [None])
  time_step = policy_saver.rename_spec_with_nest_paths(
      tf.nest.map_structure(batch, view.time_step_spec))
  action = saver.policy.action
  if tf.nest.flatten(view.policy_state_spec):
    action.get_concrete_function(time_step=time_step)
  action.get_concrete_function(time_step=time_step, policy_state=None)
  for other in other_states:
    action.get_concrete_function(time_step=time_step, policy_state=(
        policy_saver.rename_spec_with_nest_paths(tf.nest.map_structure(batch, other))))
  if tf.nest.flatten(view.policy_state_spec):
    # The state's structure with any shape, and a time step of any shape: a state of other
    # sizes, or a time step without its batch dimension, reaches the run-time checks
    # (_ActionOnlyPolicy._checked_state, _checked_inputs) instead of "Could not find matching
    # concrete function".
    any_shape = lambda spec: tf.TensorSpec(None, spec.dtype, spec.name)
    state = tf.nest.map_structure(any_shape, view.policy_state_spec)
    action.get_concrete_function(time_step=_any_rank_time_step(view), policy_state=(
        policy_saver.rename_spec_with_nest_paths(state)))
    if isinstance(state, dict):
      for key in sorted(state):
        trace = lambda s: action.get_concrete_function(
            time_step=time_step, policy_state=policy_saver.rename_spec_with_nest_paths(s))
        if len(state) > 1:
          trace({k: v for k, v in state.items() if k != key})
        if isinstance(state[key], tf.TensorSpec):
          for dtype in STATE_DTYPE_MISTAKES.get(state[key].dtype, ()):
            trace(dict(state, **{key: tf.TensorSpec(None, dtype, state[key].name)}))


def _same(a, b) -> bool:
  try:
    tf.nest.assert_same_structure(a, b)
    return True
  except (TypeError, ValueError):
    return False


# The options every export is saved with, and its functions traced under (export_policy).
SAVE_OPTIONS = tf.saved_model.SaveOptions()


def _save(saver, policy: tf_policy.TFPolicy, directory: str, record: Optional[dict]) -> None:
  """saver.save(directory), then policy_specs.pbtxt with the policy's own specs (the export
  view's observation has no fixed shape; TF-Agents' loaders read the real one from there) and
  the game `record` (POLICY_RECORD) when given."""
  saver.save(directory, options=SAVE_OPTIONS)
  tensor_spec.to_pbtxt_file(
      os.path.join(directory, policy_saver.POLICY_SPECS_PBTXT),
      {"collect_data_spec": policy.collect_data_spec,
       "policy_state_spec": policy.policy_state_spec})
  if record is not None:
    with tf.io.gfile.GFile(os.path.join(directory, POLICY_RECORD), "w") as f:
      f.write(strict_json.dumps(record, indent=1, sort_keys=True))
