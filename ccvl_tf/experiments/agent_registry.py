"""The agent registry: every learner of ccvl_tf/agents/ built from one place.

`AGENT_REGISTRY` maps a name to an `AgentSpec`: the agent's own config (CCVLConfig, CQLConfig,
BCConfig, ...: its defaults and the settings of a run it takes; `resolve` makes it once), the
learner built with it (`build`: time_step_spec, action_spec, AgentSettings ->
ccvl_tf.agents.learner.Learner) and the policies it is evaluated / exported with. Its users: --agent=NAME of train_offline.py (experiments/offline/runner.py) and
compare.py (the offline names, `AGENTS`), and online fine-tuning (experiments/online/runner.py),
which builds 'ccvl_bounds' (ccvl_tf.agents.ccvl_bounds_agent.CCVLBoundsAgent, lower and upper bounds)
or 'cql' ('ccvl_lower', Q_l alone) here with its own settings (gridworld MLP, MinAtar network
or Nature torso). `AgentSettings` carries what a builder needs beyond the specs: the agent's config
resolved by the run (`agent_config`; the offline run resolves it once, `AgentSpec.resolve`), or
the values given for the run (`agent_values`), applied with dataclasses.replace on the config's
own defaults, each agent taking the ones its config has.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Optional, Tuple

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np

from ccvl_tf.agents import aevl_agent
from ccvl_tf.agents import bc_agent
from ccvl_tf.agents import ccvl_agent
from ccvl_tf.agents import ccvl_bounds_agent
from ccvl_tf.agents import cql_agent
from ccvl_tf.agents import dqn_agent
from ccvl_tf.agents import q_agent_base
from ccvl_tf.agents import rem_agent
from ccvl_tf.algorithm import belief
from ccvl_tf.algorithm import networks
from ccvl_tf.algorithm import policies
from ccvl_tf.algorithm import readings
from ccvl_tf.runtime import run_settings


@dataclasses.dataclass
class AgentSettings:
  """What an agent builder needs beyond the specs (suite- and run-dependent values)."""
  network_config: object = None                 # ccvl_tf.algorithm.networks.QNetworkConfig
  dataset_size: Optional[float] = None          # |D| for CCVL's linear n(s)^-1
  inverse_count_fn: Optional[Callable] = None   # exact tabular n(s)^-1 (replaces dataset_size)
  # CCVL's count_gram='exact': num_states -> (() -> the dataset's observation batches), e.g.
  # experiments/offline/dataset.Batches.state_batches; None where the run has no dataset store.
  state_batches: Optional[Callable] = None
  # The agent configs' settings given for this run (field -> value: alpha, num_deltas N,
  # num_heads H, learning_rate, CCVL's objective, ...; ccvl_tf/agents/*_agent.py declare them); the
  # others keep the agent config's default. An agent takes those its config has.
  agent_values: Dict[str, object] = dataclasses.field(default_factory=dict)
  # The agent's own config as the run resolved it (AgentSpec.resolve), e.g. a CCVLConfig;
  # None: made from agent_values when the learner is built.
  agent_config: Optional[q_agent_base.CommonQConfig] = None
  num_grid_deltas: int = 8                      # K of CCVL's adaptive / Fixed-CCVL grid
  # CCVL and AEVL belief temperature; None: CCVL sets it from held-out data
  # (auto_belief_temperature), AEVL uses its config's default.
  belief_temperature: Optional[float] = None
  # The most steps of one evaluation episode: when set, the CCVL belief temperature is
  # spread_belief_temperature; None (every run's default, docs/results/factorial.md):
  # auto_belief_temperature.
  belief_episode_steps: Optional[int] = None
  # Where CCVL's adaptive belief starts (run_settings.BELIEF_PRIORS): 'uniform', or from the
  # held-out Bellman errors that choose Fixed-CCVL's delta (`informed_prior`).
  belief_prior: str = "uniform"
  reward_clip: Optional[float] = None           # clip rewards when scoring Bellman errors
  bounds: object = None                         # ccvl_bounds: BoundsConfig (None: defaults)
  seed: int = 0


def policy_grid(s: AgentSettings) -> int:
  """K of the delta grid the run's policies act on: the exploration belief's
  (BoundsConfig.num_grid_deltas) for the online learners, else num_grid_deltas."""
  return int(s.num_grid_deltas if s.bounds is None else s.bounds.num_grid_deltas)


def make_settings(ccvl_options: Optional[Dict[str, object]] = None,
                  **values) -> AgentSettings:
  """AgentSettings from keywords: its own fields by name, every other keyword (an agent
  config's setting: alpha=, num_deltas=, learning_rate=, ...) and the entries of
  `ccvl_options` into agent_values; None values are left out (the default applies)."""
  own = {f.name for f in dataclasses.fields(AgentSettings)} - {"agent_values"}
  agent_values = {k: v for k, v in {**values, **(ccvl_options or {})}.items()
                  if k not in own and v is not None}
  return AgentSettings(agent_values=agent_values,
                       **{k: v for k, v in values.items() if k in own})


@dataclasses.dataclass(frozen=True)
class AgentSpec:
  """One registered agent.

  Attributes:
    name: the --agent value.
    description: one line for --help.
    train_key: agents with the same key train the same learner (ccvl and fixed_ccvl differ
      only in the evaluation policy), so a comparison trains it once.
    config: the agent's own config (ccvl_tf/agents/*_agent.py) with its defaults.
    takes: the settings of `AgentSettings.agent_values` the agent takes (`resolve`).
    learner: (time_step_spec, action_spec, config, AgentSettings) -> learner
      (ccvl_tf.agents.learner.Learner; the GuardedLearners and CCVLBoundsAgent are also
      ccvl_tf.agents.learner.OnlineLearners).
    policies: (learner, time_step_spec, action_spec, held_out_batches, settings) ->
      (dict export_name -> TF-Agents policy, dict of extra summary values); the first entry is
      the method's evaluation policy.
    offline: one of the offline --agent choices (`AGENTS`: train_offline.py, compare.py);
      False for 'ccvl_bounds', which online fine-tuning builds.
    from_settings: AgentSettings -> values of the config taken from the run's AgentSettings
      rather than from its agent values (AEVL: the belief temperature and reward clip).
    mixed_precision: whether keras mixed precision (--mixed_precision) reaches the learner's
      networks; False for DQN, whose TF-Agents QNetwork is built in legacy tf_keras at
      float32 (experiments/compute.py reads the precision back from the built networks and
      refuses a setting that did not reach them).
  """
  name: str
  description: str
  train_key: str
  config: q_agent_base.CommonQConfig
  takes: Tuple[str, ...]
  learner: Callable
  policies: Callable
  offline: bool = True
  from_settings: Callable[[AgentSettings], Dict[str, object]] = lambda s: {}
  mixed_precision: bool = True

  def resolve(self, settings: AgentSettings) -> AgentSettings:
    """`settings` holding the agent's config (`agent_config`), made once: its defaults with
    the values given of the settings it takes, the run's seed and `from_settings`."""
    config = self.config.with_values({n: settings.agent_values.get(n) for n in self.takes},
                                     seed=settings.seed, **self.from_settings(settings))
    if getattr(config, "delta_head", None) == "quantized":  # refused before anything trains
      networks.check_grid(config.delta_members, policy_grid(settings))
    return dataclasses.replace(settings, agent_config=config, agent_values={})

  def build(self, time_step_spec, action_spec, settings: AgentSettings):
    """The learner, with the config the settings hold (resolved), else made from them."""
    if settings.agent_config is None:
      settings = self.resolve(settings)
    return self.learner(time_step_spec, action_spec, settings.agent_config, settings)


# The settings each agent takes from a run (the rest keep its config's defaults).
_SHARED = ("dr3_coef", "gamma", "learning_rate", "adam_epsilon", "target_update_period",
           "td_loss", "collect_epsilon")
# CCVL: its settings and the reading's flags (CCVLConfig.with_values makes the reading).
_CCVL = tuple(f.name for f in dataclasses.fields(ccvl_agent.CCVLConfig)
              if f.name not in ("seed", "reading")) + readings.FLAGS
_CQL = ("alpha",) + _SHARED
_AEVL = ("alpha", "num_members") + _SHARED
# Behaviour cloning: its own defaults (d3rlpy's DiscreteBC) unless a setting is given.
_BC = ("learning_rate", "adam_epsilon", "collect_epsilon")
_DQN = ("gamma", "learning_rate", "adam_epsilon", "target_update_period", "collect_epsilon")


def _count_kwargs(s: AgentSettings):
  """n(s)^-1: the exact tabular function if given, else the linear estimate at |D|."""
  return ({"inverse_count_fn": s.inverse_count_fn} if s.inverse_count_fn is not None
          else {"dataset_size": s.dataset_size})


def _build_ccvl(time_step_spec, action_spec, config: ccvl_agent.CCVLConfig, s: AgentSettings):
  exact = config.count_gram == "exact" and s.state_batches is not None
  return ccvl_agent.CCVLAgent(
      time_step_spec, action_spec, config=config, network_config=s.network_config,
      dataset_observations=s.state_batches(config.count_gram_states) if exact else None,
      **_count_kwargs(s))


def _build_ccvl_bounds(time_step_spec, action_spec, config: ccvl_agent.CCVLConfig,
                       s: AgentSettings):
  bounds = ccvl_bounds_agent.BoundsConfig() if s.bounds is None else s.bounds
  return ccvl_bounds_agent.CCVLBoundsAgent(time_step_spec, action_spec, config,
                                           s.network_config, bounds, **_count_kwargs(s))


def _bounds_policies(agent, time_step_spec, action_spec, held_out, s: AgentSettings):
  """CCVLBoundsAgent: the confidence-adaptive policy over Q_l acting with Eq. upper policy
  (upper_network=Q_u, beta), Q_l greedy at policy_delta, and Eq. upper policy itself (what
  online fine-tuning exports as policy/, policy_fixed/, policy_bounds/)."""
  del held_out
  adaptive = policies.ConfidenceAdaptivePolicy(
      time_step_spec, action_spec, agent.q_network, num_grid_deltas=s.num_grid_deltas,
      gamma=agent.config.gamma, seed=s.seed, upper_network=agent.upper_q_network,
      beta=agent.bounds.beta, reward_clip=s.reward_clip)
  fixed = policies.FixedDeltaPolicy(time_step_spec, action_spec, agent.q_network,
                                    agent.config.policy_delta)
  return {"policy": adaptive, "policy_fixed": fixed, "policy_bounds": agent.bounds_policy}, {}


def _build_ccvl_lower(time_step_spec, action_spec, config: ccvl_agent.CCVLConfig,
                      s: AgentSettings):
  bounds = ccvl_bounds_agent.BoundsConfig() if s.bounds is None else s.bounds
  return ccvl_bounds_agent.LowerCCVLAgent(time_step_spec, action_spec, config,
                                          s.network_config, bounds, **_count_kwargs(s))


def _lower_policies(agent, time_step_spec, action_spec, held_out, s: AgentSettings):
  """LowerCCVLAgent: the confidence-adaptive policy over Q_l it explores with (without
  epsilon) and Q_l greedy at policy_delta (policy/, policy_fixed/)."""
  del time_step_spec, action_spec, held_out, s
  return {"policy": agent.adaptive_policy, "policy_fixed": agent.policy}, {}


def auto_belief_temperature(errors) -> float:
  """The belief temperature set from the offline data, as the tabular experiment does
  (ccvl_tf/experiments/gridworld/runner.py): T = 2 x the smallest held-out mean squared Bellman
  error over the delta grid, so that one transition of the best-fitting delta moves log b by ~1/2
  on average and the others by more in proportion to how much worse they fit. Floored at 1e-6."""
  errors = np.asarray(errors, np.float64)
  if errors.size == 0 or not np.all(np.isfinite(errors)):
    raise ValueError(f"held-out Bellman errors must be finite and non-empty, got {errors!r}")
  return float(max(2.0 * errors.min(), 1e-6))


def spread_belief_temperature(errors, episode_steps: int) -> float:
  """The belief temperature under which one episode cannot settle the belief on its own:
  T = episode_steps x (max_k e_k - min_k e_k) / log K from the held-out mean squared Bellman
  errors e_k of the K grid deltas (Bellman consistency, the errors the belief sums; Eq.
  delta_selection). An episode of at most `episode_steps` steps whose per-step errors are the
  held-out means moves the log-odds of the best- against the worst-fitting delta by at most
  log K: after one such episode the worst keeps at least 1/K of the best's weight, and it takes
  several episodes for the belief to settle. Floored at 1e-6."""
  errors = np.asarray(errors, np.float64)
  if errors.size < 2 or not np.all(np.isfinite(errors)):
    raise ValueError(f"held-out Bellman errors must be finite with at least 2 grid deltas, "
                     f"got {errors!r}")
  if int(episode_steps) != episode_steps or episode_steps < 1:
    raise ValueError(f"episode_steps must be an integer >= 1, got {episode_steps!r}")
  return float(max(int(episode_steps) * (errors.max() - errors.min()) / np.log(errors.size),
                   1e-6))


def informed_prior(prior: str, errors, temperature: float, num_transitions: int):
  """(log b_0 [K] or None for the uniform prior, N) of the belief prior `prior`
  (run_settings.BELIEF_PRIORS) from the held-out mean squared Bellman errors `errors` [K] that
  choose Fixed-CCVL's delta, the belief temperature and the number of held-out transitions
  they average over: 'uniform' -> (None, None); 'heldout_mean' -> belief.informed_log_prior
  with N = 1; 'heldout_sum' -> with N = `num_transitions`. A ValueError naming belief_prior
  for another value."""
  if prior == "uniform":
    return None, None
  if prior not in run_settings.BELIEF_PRIORS:
    raise ValueError(f"belief_prior must be one of {', '.join(run_settings.BELIEF_PRIORS)}, "
                     f"got {prior!r}")
  n = 1 if prior == "heldout_mean" else int(num_transitions)
  return belief.informed_log_prior(errors, temperature, n), n


def _ccvl_policies(agent, time_step_spec, action_spec, held_out, s: AgentSettings,
                   primary: str = "adaptive"):
  """CCVL: the confidence-adaptive policy; Fixed-CCVL: the grid delta whose TD error against
  the target network (the Bellman error offline training minimizes) is lowest on the held-out
  batches (ccvl_tf.agents.ccvl_agent.select_fixed_delta's rule; both errors of the held-out batches in
  one pass, bellman_errors_both). The belief temperature is
  s.belief_temperature, else spread_belief_temperature of the held-out Bellman-consistency
  errors (the belief's own) when s.belief_episode_steps is set, else auto_belief_temperature
  of them. The belief starts from s.belief_prior (`informed_prior` of the TD errors that
  choose Fixed-CCVL's delta, that temperature and the held-out transitions' count)."""
  grid = belief.delta_grid(s.num_grid_deltas)
  both = ccvl_agent.bellman_errors_both(agent.q_network, held_out, grid, agent.config.gamma,
                                       target_q_model=agent.target_network.q_model,
                                       with_count=True)
  errors, consistency = both["target"], both["consistency"]
  # As select_fixed_delta chooses: the float32 grid entry of the lowest error, ties the first.
  fixed_delta = float(np.asarray(grid, np.float32).reshape(-1)[int(np.argmin(errors))])
  if s.belief_temperature is not None:
    temperature, source = float(s.belief_temperature), "given"
  elif s.belief_episode_steps is not None:
    temperature = spread_belief_temperature(consistency, s.belief_episode_steps)
    source = (f"auto: {int(s.belief_episode_steps)} steps x the spread of the held-out "
              f"MSBE over the grid / log K")
  else:
    temperature, source = auto_belief_temperature(consistency), "auto: 2 x min held-out MSBE"
  log_prior, n = informed_prior(s.belief_prior, errors, temperature, both["count"])
  adaptive = policies.ConfidenceAdaptivePolicy(
      time_step_spec, action_spec, agent.q_network, num_grid_deltas=s.num_grid_deltas,
      gamma=agent.config.gamma, temperature=temperature, seed=s.seed,
      reward_clip=s.reward_clip, resample=agent.config.belief_resample,
      initial_log_belief=log_prior)
  fixed = policies.FixedDeltaPolicy(time_step_spec, action_spec, agent.q_network,
                                    delta=fixed_delta)
  extra = dict(fixed_delta=fixed_delta, bellman_errors=[float(e) for e in errors],
               bellman_errors_consistency=[float(e) for e in consistency],
               belief_temperature=temperature, belief_temperature_source=source,
               held_out_transitions=int(both["count"]), belief_prior=s.belief_prior,
               belief_prior_transitions=n,
               initial_log_belief=[float(v) for v in adaptive.initial_log_belief])
  if primary == "adaptive":
    return {"policy": adaptive, "policy_fixed": fixed}, extra
  return {"policy": fixed, "policy_adaptive": adaptive}, extra


def _aevl_settings(s: AgentSettings) -> Dict[str, object]:
  """AEVL: the run's reward clip, and its belief temperature where it sets one."""
  more = {} if s.belief_temperature is None else {"belief_temperature": s.belief_temperature}
  return dict(reward_clip=s.reward_clip, **more)


def _aevl_td_settings(s: AgentSettings) -> Dict[str, object]:
  """AEVL whose members have no CQL term (alpha = 0: Huber TD + DR3 only), the reading under
  which the paper's AEVL scores track REM's rather than CQL's."""
  return dict(_aevl_settings(s), alpha=0.0)


def _learner(agent_class):
  """(time_step_spec, action_spec, config, settings) -> agent_class(..., config, network)."""
  return lambda time_step_spec, action_spec, config, s: agent_class(
      time_step_spec, action_spec, config, s.network_config)


def _own_policy(agent, time_step_spec, action_spec, held_out, s: AgentSettings):
  del time_step_spec, action_spec, held_out
  return {"policy": agent.evaluation_policy(seed=s.seed)}, {}


AGENT_REGISTRY: Dict[str, AgentSpec] = {
    spec.name: spec for spec in (
        AgentSpec("ccvl", "CCVL (Algorithm 1) acted with the confidence-adaptive belief policy",
                  "ccvl", ccvl_agent.CCVLConfig(), _CCVL, _build_ccvl, _ccvl_policies),
        AgentSpec("fixed_ccvl", "CCVL trained as --agent=ccvl, acted at the one delta of lowest "
                  "Bellman error on 8 batches of the training data (Fixed-CCVL)", "ccvl", ccvl_agent.CCVLConfig(), _CCVL,
                  _build_ccvl, lambda *a: _ccvl_policies(*a, primary="fixed")),
        AgentSpec("cql", "discrete CQL(H), Huber TD + alpha * CQL gap (+ DR3)", "cql",
                  cql_agent.CQLConfig(), _CQL, _learner(cql_agent.CQLAgent), _own_policy),
        AgentSpec("rem", "REM: random convex combination of H heads (batch_rl)", "rem",
                  rem_agent.REMConfig(), ("num_heads",) + _SHARED,
                  _learner(rem_agent.REMAgent), _own_policy),
        AgentSpec("aevl", "AEVL: ensemble of CQL networks, adaptive belief over members", "aevl",
                  aevl_agent.AEVLConfig(), _AEVL, _learner(aevl_agent.AEVLAgent), _own_policy,
                  from_settings=_aevl_settings),
        AgentSpec("aevl_td", "AEVL with members trained without the CQL term (alpha = 0)",
                  "aevl_td", aevl_agent.AEVLConfig(), _AEVL, _learner(aevl_agent.AEVLAgent),
                  _own_policy, from_settings=_aevl_td_settings),
        AgentSpec("dqn", "TF-Agents DqnAgent (offline DQN)", "dqn", dqn_agent.DQNConfig(), _DQN,
                  _learner(dqn_agent.DQNLearner), _own_policy, mixed_precision=False),
        AgentSpec("bc", "behaviour cloning: cross-entropy on the data's actions, same torso "
                  "(the anchor: is the data learnable at all?)", "bc", bc_agent.BCConfig(), _BC,
                  _learner(bc_agent.BCAgent), _own_policy),
        AgentSpec("ccvl_bounds", "CCVL lower and upper bounds Q_l, Q_u side by side, acted with "
                  "Eq. upper policy (online fine-tuning's --agent=ccvl)", "ccvl_bounds",
                  ccvl_agent.CCVLConfig(), _CCVL, _build_ccvl_bounds, _bounds_policies,
                  offline=False),
        AgentSpec("ccvl_lower", "CCVL's lower bound Q_l alone, explored with the "
                  "confidence-adaptive policy (online fine-tuning's --agent=ccvl_lower)",
                  "ccvl", ccvl_agent.CCVLConfig(), _CCVL, _build_ccvl_lower, _lower_policies,
                  offline=False),
    )
}
AGENTS = tuple(name for name, spec in AGENT_REGISTRY.items() if spec.offline)
# The offline agents acted with a belief (over delta or over members) whose temperature a
# run's --belief_temperature sets.
BELIEF_AGENTS = ("ccvl", "fixed_ccvl", "aevl", "aevl_td")
# The offline agents whose adaptive policy's belief starts from a run's --belief_prior (the
# held-out errors that choose Fixed-CCVL's delta).
BELIEF_PRIOR_AGENTS = ("ccvl", "fixed_ccvl")


def check_taken(given, agents, what: str, offered) -> None:
  """A ValueError naming each setting of `given` (names of AgentSettings.agent_values, i.e.
  --flags) that none of the registered `agents` takes (AgentSpec.takes), and which agents do
  take it: a setting the learners of a run ignore is refused, not trained without and
  recorded as if used. `what` names the choice in the message (e.g. "--agent=cql");
  `offered`: the binary's agent flags (the message lists those the agents take)."""
  specs = [AGENT_REGISTRY[a] for a in agents]
  untaken = [n for n in given if not any(n in s.takes for s in specs)]
  if not untaken:
    return
  parts = []
  for n in untaken:
    by = [name for name, s in AGENT_REGISTRY.items() if n in s.takes and s.offline]
    parts.append(f"--{n} (a setting of {', '.join(by) or 'no offline agent'})")
  taken = sorted({n for s in specs for n in s.takes if n in offered})
  raise ValueError(f"{what} does not take {', '.join(parts)}; leave "
                   f"{'it' if len(untaken) == 1 else 'them'} out or choose an agent that "
                   f"takes {'it' if len(untaken) == 1 else 'them'} ({what} takes: "
                   f"{', '.join('--' + n for n in taken)})")


def get_agent_spec(name: str, flag: str = "--agent", offline: bool = True) -> AgentSpec:
  """The registered agent `name` (offline=True: one of the offline choices, `AGENTS`); a
  ValueError listing the valid names otherwise."""
  names = AGENTS if offline else tuple(AGENT_REGISTRY)
  if name not in names:
    raise ValueError(f"{flag} must be one of {', '.join(names)}, got {name!r}")
  return AGENT_REGISTRY[name]

