"""Exclusive, inclusive and parallel gateways (semantics.md §2 "Outflow by type")."""

from __future__ import annotations

from collections.abc import Callable

from flow import FlowContext, FlowEngine, GraphSpec, Node

Cond = Callable[[FlowContext], bool]
TRUE: Cond = lambda ctx: True  # noqa: E731
FALSE: Cond = lambda ctx: False  # noqa: E731


def _log(ctx: FlowContext, node: Node) -> None:
    ctx.data.setdefault("log", []).append(node.id)


def _run(spec: GraphSpec, ctx: FlowContext | None = None) -> list[str]:
    result = FlowEngine().eval(spec.create(), ctx)
    log: list[str] = result.get("log", [])
    return log


# -- exclusive -------------------------------------------------------------------------
def _exclusive(*links: tuple[str, Cond | None, int]) -> GraphSpec:
    spec = GraphSpec("ex")
    spec.add_start("s").link_add("gw")
    gw = spec.add_exclusive("gw")
    for target, when, priority in links:
        gw.link_add(target, when=when, priority=priority)
        spec.add_activity(target, task=_log)
    return spec


def test_exclusive_takes_only_the_first_true_link() -> None:
    assert _run(_exclusive(("a", FALSE, 0), ("b", TRUE, 0), ("c", TRUE, 0))) == ["b"]


def test_exclusive_tests_links_in_priority_order() -> None:
    assert _run(_exclusive(("a", TRUE, 0), ("b", TRUE, 9))) == ["b"]


def test_exclusive_takes_the_default_link_when_no_condition_holds() -> None:
    assert _run(_exclusive(("a", FALSE, 0), ("d", None, 0))) == ["d"]


def test_exclusive_prefers_a_true_condition_over_an_earlier_default() -> None:
    assert _run(_exclusive(("d", None, 0), ("a", TRUE, 0))) == ["a"]


def test_exclusive_with_several_default_links_takes_the_last() -> None:
    assert _run(_exclusive(("d1", None, 0), ("d2", None, 0), ("a", FALSE, 0))) == ["d2"]


def test_exclusive_without_match_or_default_ends_the_branch_silently() -> None:
    spec = _exclusive(("a", FALSE, 0), ("b", FALSE, 0))
    ctx = FlowEngine().eval(spec.create())
    assert ctx.get("log") is None
    assert ctx.last_node_id == "gw"
    assert ctx.is_stopped is False


def test_exclusive_gateway_may_carry_a_task() -> None:
    spec = GraphSpec("ex-task")
    spec.add_start("s").link_add("gw")
    spec.add_exclusive("gw", task=_log).link_add("a")
    spec.add_activity("a", task=_log)
    assert _run(spec) == ["gw", "a"]


# -- inclusive -------------------------------------------------------------------------
def _inclusive(conditions: dict[str, Cond | None]) -> GraphSpec:
    spec = GraphSpec("inc")
    spec.add_start("s").link_add("split")
    split = spec.add_inclusive("split")
    for target, when in conditions.items():
        split.link_add(target, when=when)
        spec.add_activity(target, task=_log).link_add("join")
    spec.add_inclusive("join", task=_log).link_add("after")
    spec.add_activity("after", task=_log).link_add("e")
    spec.add_end("e")
    return spec


def test_inclusive_split_takes_every_true_or_empty_link() -> None:
    assert _run(_inclusive({"a": TRUE, "b": FALSE, "c": None})) == ["a", "c", "join", "after"]


def test_inclusive_join_waits_for_the_branches_the_split_took() -> None:
    log = _run(_inclusive({"a": TRUE, "b": TRUE, "c": TRUE}))
    assert log == ["a", "b", "c", "join", "after"]


def test_inclusive_join_fires_after_a_single_taken_branch() -> None:
    assert _run(_inclusive({"a": FALSE, "b": TRUE, "c": FALSE})) == ["b", "join", "after"]


def test_inclusive_split_with_no_true_link_ends_the_branch() -> None:
    ctx = FlowEngine().eval(_inclusive({"a": FALSE, "b": FALSE}).create())
    assert ctx.get("log") is None
    assert ctx.last_node_id == "split"


def _nested_inclusive(*, plain_branch_first: bool) -> GraphSpec:
    spec = GraphSpec("nested-inc")
    spec.add_start("s").link_add("outer")
    outer = spec.add_inclusive("outer")
    for target in ("x", "inner") if plain_branch_first else ("inner", "x"):
        outer.link_add(target)
    spec.add_inclusive("inner").link_add("i1").link_add("i2")
    spec.add_activity("i1", task=_log).link_add("inner_join")
    spec.add_activity("i2", task=_log).link_add("inner_join")
    spec.add_inclusive("inner_join", task=_log).link_add("outer_join")
    spec.add_activity("x", task=_log).link_add("outer_join")
    spec.add_inclusive("outer_join", task=_log).link_add("e")
    spec.add_end("e")
    return spec


def test_nested_inclusive_gateways_join_innermost_first() -> None:
    ctx = FlowEngine().eval(_nested_inclusive(plain_branch_first=True).create())
    assert ctx.get("log") == ["x", "i1", "i2", "inner_join", "outer_join"]
    assert ctx.last_node_id == "e"


def test_inclusive_join_pushes_its_own_outflow_count_like_the_reference() -> None:
    """Reference quirk: a join is also a split (it pushes 1), so when the nested branch
    arrives first the outer join sees that 1 and fires for each of its two arrivals."""
    ctx = FlowEngine().eval(_nested_inclusive(plain_branch_first=False).create())
    assert ctx.get("log") == ["i1", "i2", "inner_join", "outer_join", "x", "outer_join"]


def test_inclusive_join_without_an_open_split_passes_every_arrival() -> None:
    spec = GraphSpec("no-split")
    spec.add_start("s").link_add("a").link_add("b")
    spec.add_activity("a").link_add("join")
    spec.add_activity("b").link_add("join")
    spec.add_inclusive("join", task=_log)
    assert _run(spec) == ["join", "join"]


# -- parallel --------------------------------------------------------------------------
def _parallel(branches: int) -> GraphSpec:
    spec = GraphSpec("par")
    spec.add_start("s").link_add("split")
    split = spec.add_parallel("split")
    for i in range(branches):
        split.link_add(f"b{i}", when=FALSE)
        spec.add_activity(f"b{i}", task=_log).link_add("join")
    spec.add_parallel("join", task=_log).link_add("e")
    spec.add_end("e")
    return spec


def test_parallel_split_runs_every_branch_in_link_order_ignoring_conditions() -> None:
    assert _run(_parallel(3))[:3] == ["b0", "b1", "b2"]


def test_parallel_join_waits_for_all_branches_and_runs_its_task_once() -> None:
    ctx = FlowEngine().eval(_parallel(3).create())
    assert ctx.get("log") == ["b0", "b1", "b2", "join"]
    assert ctx.last_node_id == "e"


def test_parallel_join_that_can_never_receive_all_branches_never_fires() -> None:
    spec = GraphSpec("never")
    spec.add_start("s").link_add("gw")
    spec.add_exclusive("gw").link_add("a", when=TRUE).link_add("b", when=FALSE)
    spec.add_activity("a", task=_log).link_add("join")
    spec.add_activity("b", task=_log).link_add("join")
    spec.add_parallel("join", task=_log).link_add("e")
    spec.add_end("e")
    ctx = FlowEngine().eval(spec.create())
    assert ctx.get("log") == ["a"]
    assert ctx.last_node_id == "join"


def test_parallel_join_counter_resets_so_a_second_round_joins_again() -> None:
    rounds = {"n": 0}

    def again(ctx: FlowContext) -> bool:
        rounds["n"] += 1
        return rounds["n"] < 2

    spec = GraphSpec("rounds")
    spec.add_start("s").link_add("split")
    spec.add_parallel("split").link_add("a").link_add("b")
    spec.add_activity("a").link_add("join")
    spec.add_activity("b").link_add("join")
    spec.add_parallel("join", task=_log).link_add("loop")
    spec.add_exclusive("loop").link_add("split2", when=again).link_add("e")
    spec.add_parallel("split2").link_add("a2").link_add("b2")
    spec.add_activity("a2").link_add("join2")
    spec.add_activity("b2").link_add("join2")
    spec.add_parallel("join2", task=_log).link_add("e")
    spec.add_end("e")
    assert _run(spec) == ["join", "join2"]
