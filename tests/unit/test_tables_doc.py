"""docs/tables.md: its catalogue part is what ``streaming.contract.tables`` renders, followed by the query guide."""

from __future__ import annotations

from pathlib import Path

from streaming.contract.tables import QUERY_GUIDE_HEADING, TABLES, render_markdown, rewrite_doc

DOC = Path(__file__).parents[2] / "docs" / "tables.md"


def test_the_doc_is_the_catalogue_then_the_query_guide():
    text = DOC.read_text()
    catalogue, guide = text.split(QUERY_GUIDE_HEADING)
    assert catalogue.rstrip("\n") == render_markdown().rstrip("\n")
    assert all(f"## `{name}`" in catalogue for name in TABLES) and "```python" in guide


def test_regenerating_keeps_the_guide(tmp_path):
    doc = tmp_path / "tables.md"
    doc.write_text("# stale catalogue\n\n" + QUERY_GUIDE_HEADING + "\n\nhand-written\n")
    rewrite_doc(str(doc))
    assert doc.read_text() == render_markdown() + "\n" + QUERY_GUIDE_HEADING + "\n\nhand-written\n"
