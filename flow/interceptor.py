"""Interceptors: around a whole evaluation and around every node."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flow.context import FlowContext
    from flow.exchanger import FlowExchanger
    from flow.graph import Graph, Node


class FlowInterceptor:
    """Base class; override what you need. ``on_node_*`` are not called during a resume walk."""

    def intercept_flow(self, invocation: FlowInvocation) -> None:
        """Wrap one evaluation (sub-graph evaluations too); must call ``invocation.invoke()``."""
        invocation.invoke()

    def on_node_start(self, ctx: FlowContext, node: Node) -> None:
        """Before the node's task (``ctx.interrupt()`` here skips the task and the outflow)."""

    def on_node_end(self, ctx: FlowContext, node: Node) -> None:
        """After the node's task, before its outflow."""


class FlowInvocation:
    """One evaluation seen by the interceptor chain; ``invoke()`` calls the next link."""

    __slots__ = ("_body", "_index", "_interceptors", "exchanger", "start_node")

    def __init__(
        self,
        exchanger: FlowExchanger,
        start_node: Node,
        interceptors: Sequence[FlowInterceptor],
        body: Callable[[FlowInvocation], None],
    ) -> None:
        self.exchanger = exchanger
        #: The node this evaluation resumes from (the graph's start node on a fresh context).
        self.start_node = start_node
        self._interceptors = interceptors
        self._body = body
        self._index = 0

    @property
    def context(self) -> FlowContext:
        return self.exchanger.context

    @property
    def graph(self) -> Graph:
        return self.start_node.graph

    def invoke(self) -> None:
        """Run the next interceptor, or the evaluation itself after the last one."""
        if self._index < len(self._interceptors):
            interceptor = self._interceptors[self._index]
            self._index += 1
            interceptor.intercept_flow(self)
        else:
            self._body(self)


__all__ = ["FlowInterceptor", "FlowInvocation"]
