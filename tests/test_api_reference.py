"""docs/api.md is tools/api_reference.py's output for ccvl_tf's public names (`_PUBLIC`) today, so
the reference is written once, in the docstrings. A public name whose module cannot be imported
fails here (the tool raises naming it) rather than dropping out of the page.

After a docstring, a signature or `_PUBLIC` changes: `python tools/api_reference.py`.
"""
import os

import pytest

import markdown_docs as md
from tools import api_reference

pytestmark = pytest.mark.slow  # imports every learner, so TensorFlow (~10 s)


def test_api_md_is_the_tools_output_for_every_public_name():
  names = api_reference.public_names()
  with open(os.path.join(md.ROOT, "docs", "api.md"), encoding="utf-8") as f:
    page = f.read()
  assert page == api_reference.render(names), (
      "docs/api.md is out of date: run python tools/api_reference.py")
  import ccvl_tf  # pylint: disable=g-import-not-at-top
  assert api_reference.names_in(page) == list(names)
  assert sorted(names) + ["__version__"] == ccvl_tf.__all__


def test_a_public_name_that_does_not_import_is_an_error_naming_it():
  with pytest.raises(api_reference.NotImportable, match=r"ccvl_tf\.gone: its module "
                     r"ccvl_tf\.not_a_module cannot be imported"):
    api_reference.render({"gone": "ccvl_tf.not_a_module"})
  with pytest.raises(api_reference.NotImportable, match=r"ccvl_tf\.nothing: ccvl_tf\.runtime"
                     r"\.paths defines no nothing"):
    api_reference.render({"nothing": "ccvl_tf.runtime.paths"})
  with pytest.raises(ValueError, match="--skip names no public name: typo"):
    api_reference.render({"exists": "ccvl_tf.runtime.paths"}, skip=["typo"])


def test_the_page_gives_each_name_its_module_signature_and_first_paragraph():
  page = api_reference.render({"exists": "ccvl_tf.runtime.paths"})
  assert "## exists\n\nfunction in `ccvl_tf.runtime.paths`; `from ccvl_tf import exists`" in page
  assert "```python\nexists(" in page
  from ccvl_tf.runtime import paths  # pylint: disable=g-import-not-at-top
  first = " ".join(paths.exists.__doc__.strip().split("\n\n")[0].split())
  assert first in page
