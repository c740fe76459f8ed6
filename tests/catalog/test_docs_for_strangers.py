"""What a stranger who wrote a plugin from ``docs/plugins.md`` alone got wrong, because
the guide showed or said it so: a counter kept with ``kv_get`` then ``kv_set`` (lost
concurrent updates), per-member data in the key-value store (``member_secret_*`` is the
per-member store, its name notwithstanding), a raw ``fetch`` for a file upload (the page
kit had no upload), and ``skald plugins`` run beside a running server (it refuses)."""

from __future__ import annotations

import re

from .test_docs import EXAMPLE, code_blocks, doc_text, prose, walk_through


def test_the_walk_through_counts_with_kv_update_as_the_example_does_and_says_why():
    [lifecycle] = [b for b in code_blocks(walk_through(), "python") if "async def startup(" in b]
    assert "kv_update(" in lifecycle and "kv_get(" not in lifecycle and "kv_set(" not in lifecycle
    source = (EXAMPLE / "skald_hello" / "__init__.py").read_text(encoding="utf-8")
    assert "kv_get(" not in source and "kv_set(" not in source
    shown = [line.strip() for line in lifecycle.splitlines() if line.strip()]
    assert all(line in {l.strip() for l in source.splitlines()} for line in shown), "the walk-through's lifecycle is not the example's"
    assert "a read then a write loses whatever another call wrote in between" in prose()
    assert 'spec=">=1.11,<2"' in source  # what it uses: kv_update came with 1.11


def test_the_guide_says_where_per_member_data_goes():
    text = prose()
    section = text[text.index("## Where a plugin keeps its data") :][:2500]
    for name in ("member_secret_get", "member_secret_set", "seal_for_member", "MemberLocked", "kv_update"):
        assert f"`{name}" in section, name
    assert "Despite the name, they are the per-member store for any value of yours, not only secrets" in section
    assert "](#where-a-plugin-keeps-its-data)" in doc_text()  # reached from the kv paragraph


def test_the_guide_shows_a_page_uploading_a_file_with_the_kit():
    text = doc_text()
    kit = (EXAMPLE.parents[1] / "web" / "lib" / "plugin-kit.js").read_text(encoding="utf-8")
    assert "export async function upload(path, file," in kit
    assert "| `upload(path, file, {method, type, filename})` |" in text
    [page] = [b for b in code_blocks(text, "js") if "await upload(" in b]
    assert 'import { upload, KitError } from "/ui/lib/plugin-kit.js";' in page
    [route] = [b for b in code_blocks(text, "python") if "X-Filename" in b]
    assert '@accepts({"type": "string", "format": "binary"}' in route
    assert "fetch(" not in page and "csrf" not in page.lower()


def test_the_shipping_steps_say_skald_plugins_needs_the_server_stopped():
    from skald_host.cli import _busy_message

    text = prose()
    step = text[text.index("## Shipping") :][:1200]
    assert "`skald plugins` lists it too, but only with the server stopped" in step
    assert "with the server running, look at the Plugins page instead" in step
    quoted = re.search(r"\(`('skald plugins' needs the server stopped)`\)", step)
    assert quoted and quoted[1] in _busy_message("plugins", RuntimeError("busy"))
    assert "Then restart the host. `skald plugins` lists the plugin as `disabled`" not in text
