"""Every relative link and image in README.md, BUILD.md and docs/ resolves: the file exists
inside the repository and, for a markdown target, its #anchor is one of the target's headings
(GitHub's ids). Outside links (http, mailto) are not followed."""
import os

import markdown_docs as md


def _broken(path):
  out = []
  here = os.path.dirname(path)
  own_anchors = None
  for target in md.links(path):
    if target.startswith(("http://", "https://", "mailto:")):
      continue
    file_part, _, anchor = target.partition("#")
    dest = os.path.normpath(os.path.join(here, file_part)) if file_part else path
    if not dest.startswith(md.ROOT + os.sep) or not os.path.exists(dest):
      out.append(f"{target}: no such file")
      continue
    if anchor and dest.endswith(".md"):
      if dest == path:
        own_anchors = own_anchors or md.anchors(path)
        known = own_anchors
      else:
        known = md.anchors(dest)
      if anchor not in known:
        out.append(f"{target}: no heading #{anchor} in {os.path.relpath(dest, md.ROOT)}")
  return out


def test_every_relative_link_and_anchor_resolves():
  broken = {os.path.relpath(p, md.ROOT): _broken(p) for p in md.doc_files()}
  broken = {p: b for p, b in broken.items() if b}
  assert not broken, broken


def test_the_link_reader_sees_links_images_and_anchors(tmp_path, monkeypatch):
  monkeypatch.setattr(md, "ROOT", str(tmp_path))
  (tmp_path / "fig.png").write_bytes(b"")
  (tmp_path / "other.md").write_text("# A title: `code`, 5%\n\n## Twice\n\n## Twice\n")
  (tmp_path / "README.md").write_text(
      "![f](fig.png) [o](other.md#a-title-code-5) [t](other.md#twice-1) [self](#top)\n"
      "[gone](missing.md) [bad](other.md#nope) `[in code](missing2.md)` [web](https://x.org)\n"
      "```bash\n[in a block](missing3.md)\n```\n# Top\n")
  assert _broken(str(tmp_path / "README.md")) == [
      "missing.md: no such file", "other.md#nope: no heading #nope in other.md"]
