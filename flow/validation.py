"""Static checks of a loaded graph: :func:`validate_graph` returns every :class:`Problem` at once.

The loader is as lenient as the reference, so anything it accepted silently but that will
misbehave at run time is reported here. Errors: duplicate node ids, links to unknown nodes (or
with an empty ``nextId``), expressions that do not parse or break the sandbox's static limits
(``$path`` task scripts stored in the graph meta included), a bad loop ``$in``. Warnings: an
explicit unknown ``type``, a ``$path`` task that names no script in the meta, several default
links on one exclusive gateway, unreachable nodes, a parallel join that can never receive all
its branches, a cycle with no activity in it (no human task can stop a walk inside it, so
an evaluation that enters it repeats it until a condition leads out and a workflow walk ends
with ``StepBudgetError``) — or, in a graph whose nodes name actors, no node naming one — and a
task that calls its own graph. Expressions are compiled up to :data:`MAX_EXPRESSION_CHARS`
characters per graph; past it, an error says from which node on they were not checked.

The join check is deliberately conservative (no false alarms): it warns only when an incoming link
comes from a node that never flows out along it (an unreachable node or an END node), or when two
incoming links can only be fed by *different* outgoing links of the same exclusive gateway that
is not on a cycle (an exclusive gateway takes at most one link per pass, and without a cycle it
is passed at most once per evaluation).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from flow.errors import ExpressionError, GraphDefinitionError
from flow.node_type import NodeType

if TYPE_CHECKING:
    from flow.graph import Graph, Link, Node

Severity = Literal["error", "warning"]
#: Node and link visits :meth:`Graph.validate` may spend on finding a parallel join that waits
#: for two branches of one exclusive gateway (one walk of the graph per outgoing link of each
#: gateway): about a second. A larger graph gets a warning that the check was not made.
MAX_BRANCH_CHECK_VISITS = 2_000_000
#: Characters of distinct conditions and scripts one :meth:`Graph.validate` compiles, each text
#: counted as at least :data:`_MIN_COMPILE_CHARGE`: about a second. Past it the rest are not
#: compiled, and an error at the node where the budget ran out says so.
MAX_EXPRESSION_CHARS = 100_000
_MIN_COMPILE_CHARGE = 32
_NOT_SCRIPTS = ("@", "#", "$")  # component, sub-graph and meta-script task descriptions


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One problem of a graph; ``link`` reads ``"a -> b"`` when a link is concerned."""

    severity: Severity
    node_id: str | None
    link: str | None
    message: str

    def __str__(self) -> str:
        where = [f"node {self.node_id!r}"] if self.node_id is not None else []
        if self.link is not None:
            where.append(f"link {self.link}")
        return f"{self.severity}: {', '.join(where) or 'graph'}: {self.message}"


def validate_graph(graph: Graph) -> list[Problem]:
    """Every error and warning of ``graph``, errors first, each in layout order."""
    problems = [
        *_duplicate_ids(graph),
        *_dangling_links(graph),
        *_expressions(graph),
        *_empty_references(graph),
        *_loop_sources(graph),
        *_unknown_types(graph),
        *_exclusive_defaults(graph),
        *_unreachable(graph),
        *_starved_joins(graph),
        *_automatic_cycles(graph),
        *_actorless_cycles(graph),
        *_self_calls(graph),
    ]
    return sorted(problems, key=lambda p: p.severity != "error")


def _link_name(link: Link) -> str:
    return f"{link.prev_id} -> {link.next_id}"


def _error(node_id: str, message: str, link: Link | None = None) -> Problem:
    name = _link_name(link) if link is not None else None
    return Problem(severity="error", node_id=node_id, link=name, message=message)


def _warning(node_id: str, message: str, link: Link | None = None) -> Problem:
    name = _link_name(link) if link is not None else None
    return Problem(severity="warning", node_id=node_id, link=name, message=message)


def _duplicate_ids(graph: Graph) -> Iterator[Problem]:
    for node_id in dict.fromkeys(graph._load_notes.duplicate_ids):
        count = graph._load_notes.duplicate_ids.count(node_id) + 1
        yield _error(node_id, f"node id defined {count} times; only the last definition is used")


def _dangling_links(graph: Graph) -> Iterator[Problem]:
    for link in graph.links:
        if not link.next_id:
            yield _error(link.prev_id, "link has an empty nextId", link)
        elif link.next_id not in graph.nodes:
            yield _error(link.prev_id, f"link to unknown node {link.next_id!r}", link)


def _expressions(graph: Graph) -> Iterator[Problem]:
    budget = _CompileBudget()
    for site in _expression_sites(graph):
        if isinstance(site, Problem):
            yield site
        elif not budget.spent:
            yield from budget.problems(site)


@dataclass(frozen=True)
class _Site:
    """One condition or script of the graph, and where a problem with it is reported."""

    check: Callable[[str], object]
    text: str
    node_id: str
    what: str
    link: Link | None = None


def _expression_sites(graph: Graph) -> Iterator[_Site | Problem]:
    """Every condition and script in layout order (a ``$path`` task whose script is missing
    is a warning instead)."""
    from flow.evaluation import check_condition, check_script

    for node in graph.nodes.values():
        if _is_expression(node.when, ("@",)):
            yield _Site(check_condition, node.when, node.id, "condition")
        if _is_expression(node.task, _NOT_SCRIPTS):
            yield _Site(check_script, node.task, node.id, "task script")
        elif isinstance(node.task, str) and node.task.startswith("$"):
            yield _meta_script(node)
        for link in node._links:
            if _is_expression(link.when, ("@",)):
                yield _Site(check_condition, link.when, node.id, "link condition", link)


class _CompileBudget:
    """Compiles each distinct text once per validation, while :data:`MAX_EXPRESSION_CHARS`
    last: compiling costs microseconds a character (2-6 for ordinary text, about 40 for the
    costliest shape measured, docs/limits.md), and a graph text of 8 MiB holds 830 scripts of
    10,000 characters (over two minutes). Once spent, no more is compiled."""

    def __init__(self) -> None:
        self.left = MAX_EXPRESSION_CHARS
        self.found: dict[tuple[object, str], str | None] = {}  # -> the error, if any
        self.spent = False

    def problems(self, site: _Site) -> Iterator[Problem]:
        key = (site.check, site.text)
        if key not in self.found:
            cost = _compile_cost(site.text)
            if cost > self.left:
                self.spent = True
                yield _error(site.node_id, _budget_spent(site.what), site.link)
                return
            self.left -= cost
            self.found[key] = _compile_error(site.check, site.text)
        message = self.found[key]
        if message is not None:
            yield _error(site.node_id, f"{site.what} is invalid: {message}", site.link)


def _compile_cost(text: str) -> int:
    """What compiling ``text`` charges: its length, at least :data:`_MIN_COMPILE_CHARGE` (each
    text has a fixed cost too); a text over the sandbox's ``max_text`` is refused unread."""
    from flow.evaluation import expression_limits

    if len(text) > expression_limits().max_text:
        return _MIN_COMPILE_CHARGE
    return max(len(text), _MIN_COMPILE_CHARGE)


def _budget_spent(what: str) -> str:
    return (
        f"{what} and the conditions and scripts after it are not checked: together they exceed "
        f"{MAX_EXPRESSION_CHARS} characters (each distinct text counted once, at least "
        f"{_MIN_COMPILE_CHARGE}); limit: flow.validation.MAX_EXPRESSION_CHARS"
    )


def _compile_error(check: Callable[[str], object], text: str) -> str | None:
    try:
        check(text)
    except ExpressionError as exc:
        return str(exc)
    return None


def _empty_references(graph: Graph) -> Iterator[Problem]:
    """A ``#`` or ``@`` with nothing after it names no sub-graph or component: it can only
    fail when the node runs."""
    from flow.driver import names_nothing

    for node in graph.nodes.values():
        if names_nothing(node.task):
            yield _error(node.id, f"task {node.task!r} names no sub-graph or component")
        if isinstance(node.when, str) and node.when.strip() == "@":
            yield _error(node.id, "condition '@' names no component")
        for link in node._links:
            if isinstance(link.when, str) and link.when.strip() == "@":
                yield _error(node.id, "link condition '@' names no component", link)


def _meta_script(node: Node) -> _Site | Problem:
    """A ``$path`` task: the script text stored in the graph meta must be there and compile."""
    from flow.driver import meta_script
    from flow.evaluation import check_script

    try:
        text = meta_script(node, node.task[1:])
    except GraphDefinitionError:
        return _warning(node.id, f"task {node.task!r} names no script text in the graph meta")
    return _Site(check_script, text, node.id, f"task script {node.task!r}")


def _is_expression(value: object, skipped: tuple[str, ...]) -> bool:
    return isinstance(value, str) and not value.startswith(skipped)


def _loop_sources(graph: Graph) -> Iterator[Problem]:
    from flow.stepper import parse_range

    for node in graph.nodes.values():
        if node.type != NodeType.LOOP or "$for" not in node.meta:
            continue
        source = node.meta.get("$in")
        if isinstance(source, list):
            continue
        if not isinstance(source, str):
            yield _error(
                node.id,
                f"loop '$in' must be a list, a variable name or a range text (quote ranges "
                f'such as "1:5:1" in YAML), not {type(source).__name__} {source!r}',
            )
        elif ":" in source or "..." in source:
            try:
                parse_range(source)
            except ValueError as exc:
                yield _error(node.id, f"loop '$in' is not a valid range: {exc}")


def _unknown_types(graph: Graph) -> Iterator[Problem]:
    for node_id, type_name in graph._load_notes.unknown_types.items():
        node = graph.nodes.get(node_id)
        used = node.type.name.lower() if node is not None else "activity"
        yield _warning(node_id, f"unknown type {type_name!r}, treated as {used}")


def _exclusive_defaults(graph: Graph) -> Iterator[Problem]:
    for node in graph.nodes.values():
        if node.type != NodeType.EXCLUSIVE:
            continue
        defaults = [link for link in node._links if link.when is None]
        if len(defaults) > 1:
            names = ", ".join(_link_name(link) for link in defaults)
            yield _warning(
                node.id,
                f"exclusive gateway has {len(defaults)} default links ({names}); "
                f"only the last ({_link_name(defaults[-1])}) is ever taken",
            )


def _reachable(graph: Graph, skipped: Collection[Link] = ()) -> set[str]:
    """Ids of the nodes an evaluation can reach from the start, ignoring ``skipped`` links."""
    seen = {graph.start.id}
    todo = [graph.start]
    while todo:
        node = todo.pop()
        for target in _targets(node, skipped):
            if target.id not in seen:
                seen.add(target.id)
                todo.append(target)
    return seen


def _targets(node: Node, skipped: Collection[Link] = ()) -> Iterable[Node]:
    if node.type == NodeType.END:
        return ()
    nodes = node.graph.nodes
    return [
        nodes[link.next_id]
        for link in node.next_links
        if link.next_id in nodes and not any(link is s for s in skipped)
    ]


def _unreachable(graph: Graph) -> Iterator[Problem]:
    reached = _reachable(graph)
    for node_id in graph.nodes:
        if node_id not in reached:
            yield _warning(node_id, f"node is unreachable from start {graph.start.id!r}")


def _starved_joins(graph: Graph) -> Iterator[Problem]:
    joins = [
        n for n in graph.nodes.values() if n.type == NodeType.PARALLEL and len(n.prev_links) > 1
    ]
    if not joins:
        return
    reached = _reachable(graph)
    # Each join's incoming links in the graph's link order (the order warnings name them).
    incoming: dict[str, list[Link]] = {join.id: [] for join in joins}
    for link in graph.links:
        if link.next_id in incoming:
            incoming[link.next_id].append(link)
    sources = {link.prev_id for links in incoming.values() for link in links}
    only_via = _exclusive_dependencies(graph, reached & sources)
    if only_via is None:
        yield _warning(
            joins[0].id,
            f"not checked whether a parallel join waits for branches of one exclusive gateway: "
            f"the graph is too large for that check (more than {MAX_BRANCH_CHECK_VISITS} node and "
            "link visits; limit: flow.validation.MAX_BRANCH_CHECK_VISITS)",
        )
        only_via = {}
    for join in joins:
        yield from _starved_join(join, incoming[join.id], reached, only_via)


def _starved_join(
    join: Node, incoming: list[Link], reached: set[str], only_via: dict[str, dict[str, Link]]
) -> Iterator[Problem]:
    branches = len(incoming)
    for link in incoming:
        source = link.prev_node
        if source.id not in reached or source.type == NodeType.END:
            why = "unreachable" if source.id not in reached else "an end node"
            yield _warning(
                join.id,
                f"parallel join waits for {branches} branches but {source.id!r} is {why}, "
                "so it never fires",
                link,
            )
            return
    for gateway_id, via in only_via.items():
        needed: dict[str, Link] = {}
        for link in incoming:
            branch = link if link.prev_id == gateway_id else via.get(link.prev_id)
            if branch is not None:
                needed[link.prev_id] = branch
        if len({id(branch) for branch in needed.values()}) > 1:
            names = ", ".join(repr(s) for s in needed)
            yield _warning(
                join.id,
                f"parallel join waits for {branches} branches but {names} lie on different "
                f"branches of exclusive gateway {gateway_id!r}, which takes only one",
            )
            return


def _exclusive_dependencies(graph: Graph, wanted: set[str]) -> dict[str, dict[str, Link]] | None:
    """For each exclusive gateway not on a cycle: id of a ``wanted`` node (reached from the
    start) -> the one outgoing link it needs — or None when finding out would take more than
    :data:`MAX_BRANCH_CHECK_VISITS` node visits (one walk of the graph per outgoing link).

    A node depends on link ``k`` when it is unreachable once ``k`` is removed.
    """
    on_cycles: set[str] = set().union(*_cycles(dict(graph.nodes)))
    gateways = [
        node
        for node in graph.nodes.values()
        if node.type == NodeType.EXCLUSIVE and node.id not in on_cycles
    ]
    walk = len(graph.nodes) + len(graph.links)
    if sum(len(node.next_links) for node in gateways) * walk > MAX_BRANCH_CHECK_VISITS:
        return None
    result: dict[str, dict[str, Link]] = {}
    for node in gateways:
        needs: dict[str, Link] = {}
        for link in node.next_links:
            for lost in wanted - _reachable(graph, (link,)):
                needs[lost] = link
        result[node.id] = needs
    return result


def _automatic_cycles(graph: Graph) -> Iterator[Problem]:
    """One warning per cycle of nodes none of which is an activity (the nodes a
    ``BlockStateController`` — the default — makes human tasks), at its first node in layout
    order. Gateways, loops and start nodes run without waiting, so nothing breaks such a cycle
    but a condition."""
    candidates = {
        node_id: node
        for node_id, node in graph.nodes.items()
        if node.type not in (NodeType.ACTIVITY, NodeType.END)
    }
    for members, shown in _cycles_in_layout(graph, candidates):
        yield _warning(
            members[0],
            f"cycle {shown} has no activity node, so no human task stops a walk inside it: an "
            "evaluation that enters it repeats it until a condition leads out, and a workflow "
            "walk ends with StepBudgetError",
        )


def _actorless_cycles(graph: Graph) -> Iterator[Problem]:
    """In a graph whose nodes name actors (written for ``ActorStateController``, under which
    an activity carrying none of its keys runs automatically), one warning per cycle whose
    nodes' meta names nobody (no key but ``$`` scripts and ``formId``: the controller's keys
    are not known here, so any other key may be one) — the cycles :func:`_automatic_cycles`
    leaves to the default controller, where every activity is a human task."""
    if not any("actor" in node.meta for node in graph.nodes.values()):
        return
    candidates = {
        node_id: node
        for node_id, node in graph.nodes.items()
        if node.type != NodeType.END and not _names_someone(node)
    }
    for members, shown in _cycles_in_layout(graph, candidates):
        if all(graph.nodes[m].type != NodeType.ACTIVITY for m in members):
            continue  # reported by _automatic_cycles
        yield _warning(
            members[0],
            f"cycle {shown} has no node whose meta names who operates it, so under "
            "ActorStateController no human task stops a walk inside it: a workflow walk that "
            "enters it repeats it until a condition leads out, or ends with StepBudgetError",
        )


def _cycles_in_layout(graph: Graph, nodes: dict[str, Node]) -> Iterator[tuple[list[str], str]]:
    """Each cycle among ``nodes``: its node ids in layout order, and how a warning shows them."""
    order = {node_id: index for index, node_id in enumerate(graph.nodes)}
    for component in _cycles(nodes):
        members = sorted(component, key=order.__getitem__)
        shown = " -> ".join(repr(m) for m in members[:8]) + (" ..." if len(members) > 8 else "")
        yield members, shown


def _names_someone(node: Node) -> bool:
    """Whether ``node``'s meta may name who operates it: any key but a ``$`` script and
    ``formId`` (``ActorStateController`` takes any keys — ``actor``, ``role``...)."""
    return any(not key.startswith("$") and key != "formId" for key in node.meta)


def _self_calls(graph: Graph) -> Iterator[Problem]:
    """One warning per node whose task calls its own graph (``#<graph id>``): each call nests
    one level deeper, so a walk reaching it ends with ``GraphDefinitionError`` once the calls
    are ``FlowEngine(max_depth=...)`` deep — an instance would stop there for good."""
    for node in graph.nodes.values():
        task = node.task
        if isinstance(task, str) and task.strip() == f"#{graph.id}":
            yield _warning(
                node.id,
                f"task {task.strip()!r} calls the node's own graph: every call nests one level "
                "deeper, until FlowEngine.max_depth ends the walk with GraphDefinitionError",
            )


def _cycles(nodes: dict[str, Node]) -> list[set[str]]:
    """The strongly connected components of ``nodes`` (links to other nodes ignored) that
    contain a cycle, found with an iterative Tarjan so any graph size is fine."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[set[str]] = []
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = []
        _visit(root, nodes, index, low, stack, on_stack, work)
        while work:
            node_id, successors = work[-1]
            target = next(successors, None)
            if target is not None:
                if target not in index:
                    _visit(target, nodes, index, low, stack, on_stack, work)
                elif target in on_stack:
                    low[node_id] = min(low[node_id], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node_id])
            if low[node_id] == index[node_id]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node_id:
                        break
                if len(component) > 1 or node_id in _successors(nodes[node_id], nodes):
                    found.append(component)
    return found


def _visit(
    node_id: str,
    nodes: dict[str, Node],
    index: dict[str, int],
    low: dict[str, int],
    stack: list[str],
    on_stack: set[str],
    work: list[tuple[str, Iterator[str]]],
) -> None:
    index[node_id] = low[node_id] = len(index)
    stack.append(node_id)
    on_stack.add(node_id)
    work.append((node_id, iter(_successors(nodes[node_id], nodes))))


def _successors(node: Node, nodes: dict[str, Node]) -> list[str]:
    return [target.id for target in _targets(node) if target.id in nodes]
