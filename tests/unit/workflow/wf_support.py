"""Helpers for the workflow tests: graphs from YAML text and a list recorder."""

from __future__ import annotations

import textwrap

from flow import FlowContext, FlowEngine, Graph
from flow.workflow import TaskRecord


def load(engine: FlowEngine, text: str) -> Graph:
    """Parse ``text`` (YAML), register the graph in ``engine`` and return it."""
    graph = Graph.from_text(textwrap.dedent(text))
    engine.load(graph)
    return graph


class ListRecorder:
    """A TaskRecorder keeping every record in a list."""

    def __init__(self) -> None:
        self.records: list[TaskRecord] = []

    def record(self, ctx: FlowContext, record: TaskRecord) -> None:
        self.records.append(record)


LINE = """
id: line
layout:
  - {id: start, type: start}
  - {id: A, title: Task A}
  - {id: B, title: Task B}
  - {id: C, title: Task C}
  - {id: end, type: end}
"""

PARALLEL_ACTORS = """
id: par
layout:
  - {id: start, type: start, link: split}
  - {id: split, type: parallel, link: [A, B]}
  - {id: A, meta: {actor: user1}, link: join}
  - {id: B, meta: {actor: user2}, link: join}
  - {id: join, type: parallel, link: end}
  - {id: end, type: end}
"""
