"""What a stored ``graph`` value means: a document, a document encoded twice, or only an id."""

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
        (DOC, (json.dumps(DOC, separators=(",", ":")), "leave")),
        (json.dumps(DOC), (json.dumps(DOC), "leave")),  # the document as a JSON string
        ("leave", (None, "leave")),  # only the id, as the Go plugin may store it
        ("  ", (None, None)),
        ("{not json", (None, "{not json")),
        ({"layout": []}, ('{"layout":[]}', None)),
    ],
)
def test_stored_graph_values_split_into_document_and_id(raw: Any, expected: Any) -> None:
    assert _graph_text(raw) == expected
