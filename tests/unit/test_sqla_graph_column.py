"""What a stored ``graph`` value (read as its text) means: a document, a document encoded twice,
or only an id, quoted or bare."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flow_sqla.repository import _graph_text

DOC = {"id": "leave", "layout": [{"id": "s", "type": "start"}]}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, (None, None)),
        (DOC, (json.dumps(DOC, separators=(",", ":")), "leave")),  # a driver that decoded it
        (json.dumps(DOC), (json.dumps(DOC), "leave")),
        (json.dumps(json.dumps(DOC)), (json.dumps(DOC), "leave")),  # encoded twice
        ('"leave"', (None, "leave")),  # only the id, as the Go plugin may store it
        ("leave", (None, "leave")),  # the id stored bare (SQLite keeps any text)
        ("1001", (None, "1001")),  # a numeric id stored bare: valid JSON, still the id
        (b'"leave"', (None, "leave")),
        ("  ", (None, None)),
        ("{not json", (None, None)),
        ('"{not json"', (None, None)),
        ("[1, 2]", (None, None)),
        ("null", (None, None)),
        ({"layout": []}, ('{"layout":[]}', None)),
    ],
)
def test_stored_graph_values_split_into_document_and_id(raw: Any, expected: Any) -> None:
    assert _graph_text(raw) == expected
