"""Every field of every run config is classified once (config_flags.compared_settings):
result-affecting, compared when a run resumes or finished work is reused, or not, with the
reason. A config without that choice for a field cannot be made; a binary's config without a
classification is listed here with the reason it needs none."""
import dataclasses
import importlib
from typing import Optional

import pytest

from ccvl_tf.runtime import config_flags
from tests.test_binary_inputs import BINARY_CONFIGS

# The configs of runs that keep a record and resume or reuse finished work.
RECORDED = [
    "ccvl_tf.experiments.offline.config:OfflineConfig",
    "ccvl_tf.experiments.online.config:OnlineConfig",
    "ccvl_tf.experiments.online.config:ServerConfig",
    "ccvl_tf.experiments.online.finetune_suite:FinetuneSuiteConfig",
    "ccvl_tf.experiments.compare.config:CompareConfig",
    "ccvl_tf.experiments.compare.alpha_sweep:AlphaSweepConfig",
    "ccvl_tf.experiments.offline.demo_seeds:DemoSeedsConfig",
    "ccvl_tf.experiments.offline.headroom_eval:HeadroomConfig",
    "ccvl_tf.experiments.fit.settings:FitSettings",
]
# A binary's config left unclassified, and why it needs no classification.
UNCLASSIFIED = {
    "ccvl_tf.experiments.offline.config:DiagnoseConfig": "reads a finished run, keeps no run",
    "ccvl_tf.experiments.offline.ablation:AblationConfig": "each variant is a train_offline.py "
                                                           "run, compared by OfflineConfig",
    "ccvl_tf.experiments.offline.default_dataset:CollectConfig": "the dataset it writes is "
                                                                 "named by its settings",
    "ccvl_tf.experiments.score_export:EvaluateConfig": "scores a SavedModel once, no resume",
    "ccvl_tf.experiments.gridworld.runner:Config": "a figure run from scratch each time",
    "ccvl_tf.data.minatar_datasets:BuildConfig": "the datasets it writes are named by their "
                                                 "settings",
    "ccvl_tf.data.gym_datasets:BuildConfig": "a rebuild with other settings is refused naming "
                                             "each difference (gym_datasets.build's cache)",
    "ccvl_tf.bench:BenchmarkConfig": "a timing, no resume",
    "ccvl_tf.bench.online_scaleout:ScaleoutConfig": "a timing, no resume",
    "ccvl_tf.bench.gpu_check:GpuCheckConfig": "a check, no resume",
}


def _class(path):
  module, name = path.split(":")
  return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("path", RECORDED)
def test_every_field_of_every_run_config_is_classified_once(path):
  cls = _class(path)
  comparison = config_flags.comparison(cls)
  fields = [f.name for f in dataclasses.fields(cls)]
  assert sorted(comparison.compared + tuple(comparison.not_compared)) == sorted(fields)
  assert all(why.strip() for why in comparison.not_compared.values())


def test_every_binarys_config_is_classified_or_says_why_not():
  assert not set(RECORDED) & set(UNCLASSIFIED)
  assert set(BINARY_CONFIGS) <= set(RECORDED) | set(UNCLASSIFIED), (
      sorted(set(BINARY_CONFIGS) - set(RECORDED) - set(UNCLASSIFIED)))


def test_a_field_added_without_the_choice_is_refused_when_the_class_is_made():
  with pytest.raises(TypeError, match="unclassified b"):
    @config_flags.compared_settings(compared=("a",))
    @dataclasses.dataclass
    class _New:  # pylint: disable=unused-variable
      a: int = 0
      b: int = 0
  with pytest.raises(TypeError, match="both compared and not: a"):
    @config_flags.compared_settings(compared=("a",), not_compared={"a": "why"})
    @dataclasses.dataclass
    class _Both:  # pylint: disable=unused-variable
      a: int = 0
  with pytest.raises(TypeError, match="not compared without a reason: a"):
    @config_flags.compared_settings(not_compared={"a": " "})
    @dataclasses.dataclass
    class _Empty:  # pylint: disable=unused-variable
      a: int = 0
  with pytest.raises(TypeError, match="not fields: c"):
    @config_flags.compared_settings(compared=("a", "c"))
    @dataclasses.dataclass
    class _Unknown:  # pylint: disable=unused-variable
      a: int = 0


def test_a_subclass_classifies_the_fields_it_adds():
  @config_flags.compared_settings(compared=("a",))
  @dataclasses.dataclass
  class Base:
    a: int = 0
  with pytest.raises(TypeError, match="unclassified b"):
    @config_flags.compared_settings()
    @dataclasses.dataclass
    class _Sub(Base):  # pylint: disable=unused-variable
      b: Optional[int] = None
  @config_flags.compared_settings(not_compared={"b": "why"})
  @dataclasses.dataclass
  class Sub(Base):
    b: Optional[int] = None
  assert config_flags.comparison(Sub) == config_flags.Comparison(("a",), {"b": "why"})
  # A subclass not classified at all: its base's classification does not cover it.
  @dataclasses.dataclass
  class Bare(Base):
    c: int = 0
  with pytest.raises(TypeError, match="Bare does not classify its fields"):
    config_flags.comparison(Bare)
