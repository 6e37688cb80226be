"""Engine throughput benchmark (a script, not a test): ``python bench/engine_bench.py``.

Prints evaluations/second for a 100-node scripted chain, the OA approval graph, 32-branch
parallel and inclusive graphs, the cost of one condition through SafeEvaluation, and the time
per node of 100 / 1,000 / 10,000-node chains (to show the walk is linear).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from flow import FlowContext, FlowEngine, Graph, GraphSpec, Node


def _per_second(run: Callable[[], object], *, min_seconds: float = 0.5) -> float:
    run()
    count, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < min_seconds:
        run()
        count += 1
    return count / elapsed


def _chain(length: int, task: object) -> Graph:
    spec = GraphSpec(f"chain-{length}")
    spec.add_start("s").link_add("n0")
    for i in range(length):
        spec.add_activity(f"n{i}", task=task).link_add(f"n{i + 1}" if i < length - 1 else "e")
    spec.add_end("e")
    return spec.create()


def _oa() -> Graph:
    spec = GraphSpec("oa")
    spec.add_start("start").link_add("apply")
    spec.add_activity("apply", task="applied = true").link_add("check")
    spec.add_exclusive("check").link_add("director", when="amount >= 100000").link_add("manager")
    spec.add_activity("manager", task='approver = "manager"').link_add("end")
    spec.add_activity("director", task='approver = "director"').link_add("end")
    spec.add_end("end")
    return spec.create()


def _fan(kind: str, branches: int) -> Graph:
    spec = GraphSpec(f"{kind}-{branches}")
    spec.add_start("s").link_add("split")
    split = spec.add_parallel("split") if kind == "parallel" else spec.add_inclusive("split")
    for i in range(branches):
        split.link_add(f"b{i}", when=None if kind == "parallel" else "go")
        spec.add_activity(f"b{i}", task=_noop).link_add("join")
    join = spec.add_parallel("join") if kind == "parallel" else spec.add_inclusive("join")
    join.link_add("e")
    spec.add_end("e")
    return spec.create()


def _noop(ctx: FlowContext, node: Node) -> None:
    return None


def _runner(engine: FlowEngine, graph: Graph, data: dict[str, object]) -> Callable[[], object]:
    return lambda: engine.eval(graph, FlowContext.of(data=data))


def main() -> None:
    engine = FlowEngine()
    rows: list[tuple[str, str]] = []

    chain = _chain(100, "x = x + 1")
    rate = _per_second(lambda: engine.eval(chain, FlowContext.of(data={"x": 0})))
    rows.append(("100-node chain, script task per node", f"{rate:,.0f} evals/s"))

    oa = _oa()
    rate = _per_second(lambda: engine.eval(oa, FlowContext.of(data={"amount": 150000})))
    rows.append(("OA approval graph (apply/exclusive/director)", f"{rate:,.0f} evals/s"))

    for kind in ("parallel", "inclusive"):
        graph = _fan(kind, 32)
        rate = _per_second(_runner(engine, graph, {"go": True}))
        rows.append((f"32-branch {kind} split/join", f"{rate:,.0f} evals/s"))

    try:
        from flow.evaluation import SafeEvaluation
    except ImportError:
        rows.append(("condition via SafeEvaluation", "skipped: flow/evaluation.py missing"))
    else:
        evaluation = SafeEvaluation()
        ctx = FlowContext.of(data={"amount": 150000, "kind": "travel"})
        expression = 'amount >= 100000 && kind == "travel"'
        evaluation.run_condition(ctx, expression)
        loops = 50_000
        started = time.perf_counter_ns()
        for _ in range(loops):
            evaluation.run_condition(ctx, expression)
        per = (time.perf_counter_ns() - started) / loops
        rows.append(("condition via SafeEvaluation (compiled, cached)", f"{per:,.0f} ns/eval"))

    for length in (100, 1_000, 10_000):
        graph = _chain(length, _noop)
        rate = _per_second(_runner(engine, graph, {}))
        per_node = 1e9 / rate / length
        rows.append((f"{length:,}-node chain, component task", f"{per_node:,.0f} ns/node"))

    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value:>22}")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__).parse_args()  # --help, and no stray arguments
    main()
