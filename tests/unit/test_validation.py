"""Graph.validate(): every problem at once, errors and warnings, each naming its node/link."""

from __future__ import annotations

import pytest

from flow import validation
from flow.errors import GraphDefinitionError
from flow.graph import Graph
from flow.spec import GraphSpec
from flow.validation import Problem


def problems(text: str) -> list[tuple[str, str | None, str | None]]:
    return [(p.severity, p.node_id, p.link) for p in Graph.from_text(text).validate()]


def messages(text: str) -> list[str]:
    return [str(p) for p in Graph.from_text(text).validate()]


def linear(*nodes: str) -> str:
    return "id: g\nlayout:\n" + "".join(f"  - {n}\n" for n in nodes)


def test_a_clean_graph_has_no_problems() -> None:
    text = linear(
        "{id: s, type: start}",
        "{id: a, task: 'x = 1', when: 'y > 0'}",
        "{id: gw, type: exclusive, link: [{nextId: b, when: 'x == 1'}, e]}",
        "{id: b, task: '@component'}",
        "{id: e, type: end}",
    )
    assert problems(text) == []


def test_problem_str_is_one_line_with_node_and_link() -> None:
    p = Problem(severity="error", node_id="a", link="a -> b", message="link to unknown node 'b'")
    assert str(p) == "error: node 'a', link a -> b: link to unknown node 'b'"


def test_problem_without_node_or_link_says_graph() -> None:
    assert (
        str(Problem(severity="warning", node_id=None, link=None, message="m"))
        == "warning: graph: m"
    )


def test_problem_is_frozen() -> None:
    p = Problem(severity="error", node_id="a", link=None, message="m")
    with pytest.raises(AttributeError):
        p.message = "other"  # type: ignore[misc]


# -- errors ---------------------------------------------------------------------------------


def test_duplicate_node_id_is_an_error_naming_the_node() -> None:
    text = linear("{id: s, type: start}", "{id: a}", "{id: a, type: end}")
    assert messages(text) == [
        "error: node 'a': node id defined 2 times; only the last definition is used"
    ]


def test_link_to_unknown_node_is_an_error_naming_the_link() -> None:
    text = linear("{id: s, type: start, link: [e, ghost]}", "{id: e, type: end}")
    assert problems(text) == [("error", "s", "s -> ghost")]


def test_link_with_empty_next_id_is_an_error() -> None:
    text = linear("{id: s, type: start, link: [e, {title: t}]}", "{id: e, type: end}")
    assert messages(text) == ["error: node 's', link s -> : link has an empty nextId"]


def test_unparsable_node_condition_is_an_error() -> None:
    text = linear("{id: s, type: start}", "{id: a, when: 'x &&'}", "{id: e, type: end}")
    assert problems(text) == [("error", "a", None)]


def test_unparsable_link_condition_is_an_error_naming_the_link() -> None:
    text = linear(
        "{id: s, type: start}",
        "{id: gw, type: exclusive, link: [{nextId: e, when: 'a ==='}, e]}",
        "{id: e, type: end}",
    )
    assert problems(text) == [("error", "gw", "gw -> e")]


def test_forbidden_expression_is_an_error() -> None:
    text = linear("{id: s, type: start}", "{id: a, when: 'x.__class__'}", "{id: e, type: end}")
    assert "condition is invalid" in messages(text)[0]


def test_unparsable_task_script_is_an_error() -> None:
    text = linear("{id: s, type: start}", "{id: a, task: 'y = '}", "{id: e, type: end}")
    assert problems(text) == [("error", "a", None)]


@pytest.mark.parametrize("task", ["'@my component'", "'#other graph'"])
def test_component_subgraph_and_meta_tasks_are_not_parsed(task: str) -> None:
    text = linear("{id: s, type: start}", f"{{id: a, task: {task}}}", "{id: e, type: end}")
    assert problems(text) == []


def test_meta_task_path_is_not_parsed_as_a_script() -> None:
    text = linear("{id: s, type: start}", "{id: a, task: '$scripts.a b'}", "{id: e, type: end}")
    assert problems(text) == [("warning", "a", None)]  # no such meta script; not a syntax error


def test_condition_components_are_not_parsed() -> None:
    text = linear("{id: s, type: start}", "{id: a, when: '@is ok?'}", "{id: e, type: end}")
    assert problems(text) == []


def test_python_object_components_are_not_parsed() -> None:
    spec = GraphSpec("g")
    spec.add_start("s").link_add("a", when=lambda ctx: True)
    spec.add_activity("a", task=lambda ctx, node: None).link_add("e")
    spec.add_end("e")
    assert spec.create().validate() == []


def loop(source: str) -> str:
    return linear(
        "{id: s, type: start}",
        f"{{id: l, type: loop, meta: {{$for: i, $in: {source}}}}}",
        "{id: a}",
        "{id: c, type: loop}",
        "{id: e, type: end}",
    )


@pytest.mark.parametrize("source", ["[1, 2]", "items", "'1...5'", "'0:10:2'", "'5...1'"])
def test_valid_loop_sources_are_accepted(source: str) -> None:
    assert problems(loop(source)) == []


@pytest.mark.parametrize("source", ["'1...x'", "'0:10:0'", "'1:2'", "5", "{a: 1}"])
def test_bad_loop_source_is_an_error(source: str) -> None:
    assert problems(loop(source)) == [("error", "l", None)]


def test_unquoted_yaml_range_hints_at_quoting() -> None:
    assert "quote ranges" in messages(loop("1:5"))[0]


def test_missing_loop_source_is_an_error() -> None:
    text = linear("{id: s, type: start}", "{id: l, type: loop, meta: {$for: i}}", "{id: e}")
    assert problems(text) == [("error", "l", None)]


def test_sub_graph_task_for_a_graph_not_loaded_yet_is_fine() -> None:
    text = linear("{id: s, type: start}", "{id: a, task: '#not_loaded'}", "{id: e, type: end}")
    assert problems(text) == []


# -- warnings -------------------------------------------------------------------------------


def test_explicit_unknown_type_is_a_warning() -> None:
    text = linear("{id: s, type: start}", "{id: a, type: human}", "{id: e, type: end}")
    assert messages(text) == ["warning: node 'a': unknown type 'human', treated as activity"]


def test_several_default_links_on_an_exclusive_gateway_is_a_warning() -> None:
    text = linear(
        "{id: s, type: start}",
        "{id: gw, type: exclusive, link: [{nextId: a, when: 'x'}, a, e]}",
        "{id: a}",
        "{id: e, type: end}",
    )
    assert messages(text) == [
        "warning: node 'gw': exclusive gateway has 2 default links (gw -> a, gw -> e); "
        "only the last (gw -> e) is ever taken"
    ]


def test_several_default_links_on_an_inclusive_gateway_are_fine() -> None:
    text = linear(
        "{id: s, type: start}",
        "{id: gw, type: inclusive, link: [a, e]}",
        "{id: a}",
        "{id: e, type: end}",
    )
    assert problems(text) == []


def test_unreachable_node_is_a_warning() -> None:
    text = linear("{id: s, type: start, link: e}", "{id: lost}", "{id: e, type: end}")
    assert problems(text) == [("warning", "lost", None)]


def test_nodes_after_an_end_node_are_unreachable() -> None:
    text = linear("{id: s, type: start}", "{id: e, type: end, link: a}", "{id: a}")
    assert problems(text) == [("warning", "a", None)]


def test_parallel_join_fed_by_an_unreachable_node_is_a_warning() -> None:
    text = linear(
        "{id: s, type: start, link: a}",
        "{id: a, link: j}",
        "{id: orphan, link: j}",
        "{id: j, type: parallel}",
        "{id: e, type: end}",
    )
    assert problems(text) == [("warning", "orphan", None), ("warning", "j", "orphan -> j")]


def test_parallel_join_fed_by_exclusive_branches_is_a_warning() -> None:
    text = linear(
        "{id: s, type: start}",
        "{id: gw, type: exclusive, link: [{nextId: a, when: 'x > 1'}, b]}",
        "{id: a, link: j}",
        "{id: b, link: j}",
        "{id: j, type: parallel}",
        "{id: e, type: end}",
    )
    assert messages(text) == [
        "warning: node 'j': parallel join waits for 2 branches but 'a', 'b' lie on different "
        "branches of exclusive gateway 'gw', which takes only one"
    ]


def _gateway_chain_into_a_join(gateways: int) -> Graph:
    """A parallel split whose one branch is a chain of exclusive gateways, each of which may
    leave for the join: the join waits for branches of one gateway."""
    layout: list[dict[str, object]] = [
        {"id": "s", "type": "start", "link": "p"},
        {"id": "p", "type": "parallel", "link": ["g0", "j"]},
    ]
    layout += [
        {"id": f"g{i}", "type": "exclusive", "link": [{"nextId": f"g{i + 1}", "when": "a"}, "j"]}
        for i in range(gateways)
    ]
    layout += [
        {"id": f"g{gateways}", "type": "exclusive", "link": "j"},
        {"id": "j", "type": "parallel", "link": "e"},
        {"id": "e", "type": "end"},
    ]
    return Graph.from_dict({"id": "v", "layout": layout})


def test_a_join_fed_by_a_chain_of_exclusive_gateways_is_found_on_a_small_graph() -> None:
    found = [str(p) for p in _gateway_chain_into_a_join(3).validate()]
    assert found == [
        "warning: node 'j': parallel join waits for 5 branches but 'g0', 'g1', 'g2', 'g3' lie on "
        "different branches of exclusive gateway 'g0', which takes only one"
    ]


def test_a_graph_too_large_for_the_join_check_gets_a_warning_instead_of_minutes_of_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One walk of the graph per gateway link: 2,000 gateways took 20 s and 75 MiB (the
    loader admits ~30,000). Past MAX_BRANCH_CHECK_VISITS the check is not made, and said so."""
    big = _gateway_chain_into_a_join(2_000)
    assert [p.message for p in big.validate()] == [
        "not checked whether a parallel join waits for branches of one exclusive gateway: the "
        "graph is too large for that check (more than 2000000 node and link visits; limit: "
        "flow.validation.MAX_BRANCH_CHECK_VISITS)"
    ]
    monkeypatch.setattr(validation, "MAX_BRANCH_CHECK_VISITS", 10**12)
    assert "lie on different branches" in str(_gateway_chain_into_a_join(200).validate())


def test_parallel_join_fed_directly_by_an_exclusive_gateway_is_a_warning() -> None:
    text = linear(
        "{id: s, type: start}",
        "{id: gw, type: exclusive, link: [{nextId: a, when: 'x > 1'}, j]}",
        "{id: a, link: j}",
        "{id: j, type: parallel}",
        "{id: e, type: end}",
    )
    assert problems(text) == [("warning", "j", None)]


def test_parallel_split_and_join_is_fine() -> None:
    text = linear(
        "{id: s, type: start}",
        "{id: p, type: parallel, link: [a, b]}",
        "{id: a, link: j}",
        "{id: b, link: j}",
        "{id: j, type: parallel}",
        "{id: e, type: end}",
    )
    assert problems(text) == []


def test_join_after_an_exclusive_gateway_on_a_cycle_is_not_flagged() -> None:
    text = linear(
        "{id: s, type: start}",
        "{id: gw, type: exclusive, link: [{nextId: a, when: 'x > 1'}, b]}",
        "{id: a, link: j}",
        "{id: b, link: [j, gw]}",
        "{id: j, type: parallel}",
        "{id: e, type: end}",
    )
    assert problems(text) == []


def test_errors_come_before_warnings() -> None:
    text = linear(
        "{id: s, type: start, link: [e, ghost]}", "{id: lost, type: x}", "{id: e, type: end}"
    )
    assert [p.severity for p in Graph.from_text(text).validate()] == ["error", "warning", "warning"]


def test_every_problem_names_a_node() -> None:
    text = linear(
        "{id: s, type: start, link: [a, ghost]}",
        "{id: a, type: weird, when: 'x &&'}",
        "{id: a, link: e}",
        "{id: lost}",
        "{id: e, type: end}",
    )
    found = Graph.from_text(text).validate()
    assert len(found) >= 4 and all(p.node_id for p in found)


def test_deeply_nested_condition_is_an_error_not_a_crash() -> None:
    spec = GraphSpec("g")
    spec.add_start("s", when="(" * 5000 + "x" + ")" * 5000).link_add("e")
    spec.add_end("e")
    assert [(p.severity, p.node_id) for p in spec.create().validate()] == [("error", "s")]


def test_meta_script_task_is_checked_like_an_inline_script() -> None:
    graph = Graph.from_dict(
        {
            "id": "g",
            "meta": {"scripts": {"bad": "x = __import__('os')", "ok": "y = 1"}},
            "layout": [
                {"id": "s", "type": "start", "link": [{"nextId": "a"}]},
                {"id": "a", "task": "$scripts.ok", "link": [{"nextId": "b"}]},
                {"id": "b", "task": "$scripts.bad", "link": [{"nextId": "c"}]},
                {"id": "c", "task": "$scripts.missing", "link": [{"nextId": "e"}]},
                {"id": "e", "type": "end"},
            ],
        }
    )
    found = [(p.severity, p.node_id) for p in graph.validate()]
    assert found == [("error", "b"), ("warning", "c")]
    assert "'$scripts.bad' is invalid" in graph.validate()[0].message


def test_validation_compiles_bounded_expression_text_and_says_where_it_stopped() -> None:
    """Compiling costs microseconds a character: an 8 MiB graph of 830 legal 10,000-character
    scripts took over two minutes to validate. Distinct texts are compiled until
    MAX_EXPRESSION_CHARS run out (a text several nodes share counts once, its error is still
    reported at each); an error names the node where it ran out, and strict loading raises
    naming the graph. The checks that compile nothing still cover the whole graph."""
    script = "a=b<c<d;" * 1_248  # 9,984 characters
    layout: list[dict[str, object]] = [{"id": "s", "type": "start"}]
    layout += [{"id": f"same{i}", "task": script + "a0=1"} for i in range(20)]
    layout += [{"id": f"bad{i}", "when": "x >"} for i in range(2)]
    layout += [{"id": f"n{i}", "task": script + f"a{i}=1"} for i in range(15)]
    layout += [{"id": "last", "when": "x >", "link": "nowhere"}]
    document = {"id": "g", "layout": layout}
    found = [(p.severity, p.node_id) for p in Graph.from_dict(document).validate()]
    assert found == [("error", "last"), ("error", "bad0"), ("error", "bad1"), ("error", "n10")]
    with pytest.raises(GraphDefinitionError, match="'g' has 4 error") as caught:
        Graph.from_dict(document, strict=True)
    assert caught.value.problems[-1] == (
        "error: node 'n10': task script and the conditions and scripts after it are not "
        "checked: together they exceed 100000 characters (each distinct text counted once, at "
        "least 32); limit: flow.validation.MAX_EXPRESSION_CHARS"
    )
