"""The per-node-type algorithms of one evaluation (the reference's ``node_run`` family).

Traversal is depth-first in link-priority order, like the reference, but never on the Python
stack: each algorithm returns the node its branch continues with, and where a node has more
than one branch it pushes the rest of its work (the remaining links to test, the remaining
targets, the next loop item) as a *continuation* on the walk's own stack. :meth:`Walk.run` runs
a branch until it ends, then resumes the most recent continuation. Conditions and branches run in
exactly the reference's order (a branch's condition is tested after the previous branch
finished), and a graph of any depth or width runs in constant Python stack depth.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from flow.errors import ConditionError, FlowError, GraphDefinitionError, ResumeError, TaskError
from flow.exchanger import UNLIMITED
from flow.node_type import NodeType
from flow.stepper import parse_range

if TYPE_CHECKING:
    from flow.exchanger import FlowExchanger
    from flow.graph import Link, Node
    from flow.interceptor import FlowInterceptor

_INCLUSIVE = "inclusive_run"
_LOOP = "loop_run"
_MISSING: Any = object()


def call_task(
    handler: Callable[[FlowExchanger, Node], None], exchanger: FlowExchanger, node: Node
) -> None:
    """Run a node's task through ``handler``: a failure that is not a ``FlowError`` becomes
    ``TaskError("<graphId> / <nodeId>")`` with the cause chained (``FlowError``s pass)."""
    try:
        handler(exchanger, node)
    except FlowError:
        raise
    except Exception as exc:
        raise TaskError(node.graph.id, node.id, instance_id=exchanger.instance_to_name) from exc


class _Cursor:
    """An iterator with ``has_next`` (a loop end waits while its loop has items left)."""

    __slots__ = ("_items", "_pending")

    def __init__(self, items: Iterator[Any]) -> None:
        self._items = items
        self._pending: Any = _MISSING

    def has_next(self) -> bool:
        if self._pending is _MISSING:
            self._pending = next(self._items, _MISSING)
        return self._pending is not _MISSING

    def next(self) -> Any:
        self.has_next()
        item, self._pending = self._pending, _MISSING
        return item


Continuation = Callable[[], "Node | None"]


#: How many nodes a resume walk (from the start to the last recorded node, running nothing)
#: may pass before it is taken for one that cannot arrive: a floor, plus per node of the
#: graph; each loop item it takes on the way adds :data:`RESUME_PER_LOOP_ITEM` per node.
RESUME_FLOOR = 100_000
RESUME_PER_NODE = 64
RESUME_PER_LOOP_ITEM = 4


class Walk:
    """One walk of one graph for one exchanger, resuming at ``start_node``."""

    __slots__ = ("ex", "interceptors", "pending", "resume_left", "resume_passed", "start_node")

    def __init__(
        self, exchanger: FlowExchanger, interceptors: Sequence[FlowInterceptor], start_node: Node
    ) -> None:
        self.ex = exchanger
        self.interceptors = interceptors
        self.start_node = start_node
        #: Work left behind by nodes with several branches, most recent last.
        self.pending: list[Continuation] = []
        #: Nodes the resume walk may still pass (it runs nothing, so a cycle that only a
        #: task's change would leave — or a snapshot naming a node the graph does not lead
        #: to — would keep it from ever arriving; no ``steps=`` counts it).
        self.resume_left = RESUME_FLOOR + RESUME_PER_NODE * len(start_node.graph.nodes)
        self.resume_passed = 0

    def run(self, node: Node | None) -> None:
        """Run ``node`` and everything it flows into (the reference's ``node_run``)."""
        ex = self.ex
        pending = self.pending
        counter = ex._step_counter
        limited = counter.limit < UNLIMITED  # a plain eval has no raising budget
        while True:
            while node is not None:
                if ex.branch_ends():
                    break
                if ex.reverting:
                    start = self.start_node
                    if node.id == start.id and node.graph.id == start.graph.id:
                        ex.reverting = False
                    else:
                        self._pass_resuming(node)
                else:
                    ex.context.trace.record_node(node.graph, node)
                if not ex.reverting:
                    if limited:
                        counter.left -= 1
                        if counter.left < 0:
                            ex.over_budget(node)
                    if ex.steps >= 0 and not ex.next_step():
                        ex.stop()
                        break
                node = _BY_TYPE.get(node.type, _unknown_run)(self, node)
            if not pending:
                return
            node = pending.pop()()

    def _pass_resuming(self, node: Node) -> None:
        """Count a node the resume walk passes; :class:`ResumeError` once it passed more
        than any path to the recorded node needs."""
        self.resume_left -= 1
        self.resume_passed += 1
        if self.resume_left < 0:
            start = self.start_node
            raise ResumeError(
                graph_id=start.graph.id,
                node_id=start.id,
                instance_id=self.ex.context.instance_id,
                passed=self.resume_passed,
            )

    # -- shared pieces -----------------------------------------------------------------
    def condition(self, node: Node, when: Any, default: bool, link: Link | None = None) -> bool:
        """Test a ``when`` of ``node`` (or of its ``link``); empty gives ``default``.

        Non-flow errors become ``ConditionError`` naming the node or link and the cause.
        """
        if when is None:
            return default
        try:
            return self.ex.driver.handle_condition(self.ex, when)
        except FlowError:
            raise
        except Exception as exc:
            raise ConditionError(
                node.graph.id,
                when if isinstance(when, str) else repr(when),
                node_id=node.id,
                link_to=link.next_id if link is not None else None,
                cause=exc,
                instance_id=self.ex.instance_to_name,
            ) from exc

    def node_start(self, node: Node) -> bool:
        ex = self.ex
        if ex.reverting:
            return True
        for interceptor in self.interceptors:
            interceptor.on_node_start(ex.context, node)
        ex.driver.on_node_start(ex, node)
        return not ex.branch_ends()

    def node_end(self, node: Node) -> bool:
        ex = self.ex
        if ex.reverting:
            return True
        for interceptor in self.interceptors:
            interceptor.on_node_end(ex.context, node)
        ex.driver.on_node_end(ex, node)
        return not ex.branch_ends()

    def task_exec(self, node: Node) -> bool:
        """Callbacks around the node's task; false when the branch must not flow out."""
        ex = self.ex
        if ex.reverting:
            return True
        if not self.node_start(node):
            return False
        if node.when is None or self.condition(node, node.when, True):
            call_task(ex.driver.handle_task, ex, node)
        if ex.branch_ends():
            return False
        return self.node_end(node)

    def flow_out(self, node: Node) -> Node | None:
        """Every link whose condition is empty or true, in order: the first one found is
        returned to run now and, unless it is the last link, the test of the following links
        is pushed to resume after its branch."""
        links = node.next_link_list
        last = len(links) - 1
        for index, link in enumerate(links):
            if link.when is None or self.condition(node, link.when, True, link):
                if index < last:
                    self.pending.append(partial(self.flow_out_from, node, index + 1, None))
                return link.next_node
        return None

    def flow_out_from(
        self, node: Node, start: int, after: Callable[[Node | None], Node | None] | None
    ) -> Node | None:
        """:meth:`flow_out` from link ``start`` on; ``after`` (if given) receives the branch
        that ends the outflow (the last link's target, or ``None``) and returns what to run."""
        links = node.next_link_list
        last = len(links) - 1
        for index in range(start, last + 1):
            link = links[index]
            if link.when is None or self.condition(node, link.when, True, link):
                if index < last:
                    self.pending.append(partial(self.flow_out_from, node, index + 1, after))
                    return link.next_node
                return after(link.next_node) if after is not None else link.next_node
        return after(None) if after is not None else None

    def fan_out(self, targets: Sequence[Node | None]) -> Node | None:
        """Run every target in order: the first now, the others pushed to resume in turn."""
        if not targets:
            return None
        pending = self.pending
        for target in reversed(targets[1:]):
            pending.append(partial(_same, target))
        return targets[0]


def _same(node: Node | None) -> Node | None:
    return node


# -- per-type algorithms (each returns the node its branch continues with, or None) ----------
def _start_run(walk: Walk, node: Node) -> Node | None:
    if not walk.node_start(node) or not walk.node_end(node):
        return None
    return walk.flow_out(node)


def _end_run(walk: Walk, node: Node) -> Node | None:
    if walk.node_start(node):
        walk.node_end(node)
    return None


def _activity_run(walk: Walk, node: Node) -> Node | None:
    return walk.flow_out(node) if walk.task_exec(node) else None


def _exclusive_run(walk: Walk, node: Node) -> Node | None:
    if not walk.task_exec(node):
        return None
    default: Link | None = None
    for link in node.next_link_list:
        if link.when is None:
            default = link
        elif walk.condition(node, link.when, False, link):
            return link.next_node
    return default.next_node if default is not None else None


def _inclusive_run(walk: Walk, node: Node) -> Node | None:
    ex = walk.ex
    stack = ex.stack(node.graph, _INCLUSIVE)
    if len(node.prev_link_list) > 1 and stack:
        if stack[-1] > ex.counter_incr(node.graph, node.id):
            return None
        stack.pop()
    if not walk.task_exec(node):
        return None
    matched = [link for link in node.next_link_list if walk.condition(node, link.when, True, link)]
    if not matched:
        return None
    stack.append(len(matched))
    return walk.fan_out([link.next_node for link in matched])


def _parallel_run(walk: Walk, node: Node) -> Node | None:
    ex = walk.ex
    if len(node.prev_link_list) > ex.counter_incr(node.graph, node.id):
        return None
    if not walk.task_exec(node):
        return None
    ex.counter_set(node.graph, node.id, 0)
    return walk.fan_out(node.next_node_list)


def _loop_run(walk: Walk, node: Node) -> Node | None:
    for_key = node.meta_as_str("$for")
    stack = walk.ex.stack(node.graph, _LOOP)
    if not for_key:
        if stack:
            if stack[-1].has_next():
                return None
            stack.pop()
        return walk.flow_out(node) if walk.task_exec(node) else None
    if not walk.task_exec(node):
        return None
    cursor = _Cursor(_items_or_task_error(_loop_items(walk, node), walk.ex, node))
    stack.append(cursor)
    return _LoopStart(walk, node, for_key, cursor).next_item()


class _LoopStart:
    """The iterations of one loop start: each puts the next item in the context and flows out;
    the walk's ``stop()`` (also the ``steps=`` budget running out) ends the loop, and each
    iteration counts against the raising step budget like a node visit."""

    __slots__ = ("cursor", "for_key", "node", "walk")

    def __init__(self, walk: Walk, node: Node, for_key: str, cursor: _Cursor) -> None:
        self.walk = walk
        self.node = node
        self.for_key = for_key
        self.cursor = cursor

    def next_item(self) -> Node | None:
        ex = self.walk.ex
        if ex.is_stopped or not self.cursor.has_next():
            return None
        counter = ex._step_counter
        counter.left -= 1
        if counter.left < 0:
            ex.over_budget(self.node)
        if ex.reverting:  # each item is a way round the loop's body the resume walk may need
            self.walk.resume_left += RESUME_PER_LOOP_ITEM * len(self.node.graph.nodes)
        ex.context.put(self.for_key, self.cursor.next())
        return self.walk.flow_out_from(self.node, 0, self.last_branch)

    def last_branch(self, tail: Node | None) -> Node | None:
        """Run the iteration's last branch; the next item follows it, if there is one."""
        if not self.walk.ex.is_stopped and self.cursor.has_next():
            self.walk.pending.append(self.next_item)
        return tail


def _items_or_task_error(items: Iterator[Any], ex: FlowExchanger, node: Node) -> Iterator[Any]:
    """``items``, with a failure of the iterator itself (a generator in the context that
    raises) as ``TaskError`` naming the loop node — as a failing task or condition is."""
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        except FlowError:
            raise
        except Exception as exc:
            raise TaskError(node.graph.id, node.id, instance_id=ex.instance_to_name) from exc
        yield item


def _loop_items(walk: Walk, node: Node) -> Iterator[Any]:
    """The items of a loop start's ``$in``: a list, a context variable, or a range text."""
    source = node.meta_get("$in")
    where = f"loop node {node.id!r} of graph {node.graph.id!r}"
    if isinstance(source, list | tuple):
        return iter(source)
    if not isinstance(source, str):
        raise GraphDefinitionError(
            f"The '$in' of {where} must be a list or a string", graph_id=node.graph.id
        )
    if ":" in source or "..." in source:
        try:
            return iter(parse_range(source))
        except ValueError as exc:
            raise GraphDefinitionError(
                f"Bad '$in' of {where}: {exc}", graph_id=node.graph.id
            ) from exc
    value = walk.ex.context.get(source)
    if isinstance(value, Iterator):
        return value
    if isinstance(value, Iterable) and not isinstance(value, str | bytes | Mapping):
        return iter(value)
    raise FlowError(f"{source!r} is not a collection ('$in' of {where})")


def _unknown_run(walk: Walk, node: Node) -> Node | None:
    return None


_BY_TYPE: dict[NodeType, Callable[[Walk, Node], Node | None]] = {
    NodeType.START: _start_run,
    NodeType.END: _end_run,
    NodeType.ACTIVITY: _activity_run,
    NodeType.EXCLUSIVE: _exclusive_run,
    NodeType.INCLUSIVE: _inclusive_run,
    NodeType.PARALLEL: _parallel_run,
    NodeType.LOOP: _loop_run,
}
