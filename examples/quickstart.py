"""The quick start of the README and docs/getting-started.md: run it from any directory.

    .venv/bin/python examples/quickstart.py

It creates ``app.sqlite`` in the current directory. Run it again and nothing changes: the
employee's task is done, so ``claim_task`` returns ``None`` and ``submit_task_if_waiting``
returns ``False`` — the same history is printed.
"""

import sqlalchemy as sa

from flow import FlowContext, FlowEngine, Graph
from flow.workflow import ActorStateController, TaskAction
from flow_sqla import TaskHistoryRecorder, migrations, run_in_transaction, sql_workflow

# examples/oa.yml without its titles (Graph.from_file("oa.yml") reads a graph file)
graph = Graph.from_text(
    """
    id: oa
    layout:
      - {id: start, type: start, link: apply}
      - {id: apply, meta: {actor: employee}, link: amount}
      - {id: amount, type: exclusive, link: [{nextId: director, when: amount >= 5000}, manager]}
      - {id: manager, meta: {actor: manager}, link: end}
      - {id: director, meta: {actor: director}, link: end}
      - {id: end, type: end}
    """,
    strict=True,  # a graph with errors (a dangling link, a bad condition) raises here
)
engine = sa.create_engine("sqlite:///app.sqlite")  # your application's engine
migrations.upgrade(engine)  # once, at deploy time (or: alembic upgrade head)
workflow = sql_workflow(engine, FlowEngine(), state_controller=ActorStateController())


def apply(conn: sa.Connection) -> bool:  # your transaction: your rows, the flow state, history
    ctx = FlowContext.of("expense-42", {"amount": 120}, connection=conn)
    ctx.put("actor", "employee")  # who is acting (from your authentication)
    task = workflow.claim_task(graph, ctx)  # the employee's task, now waiting
    message = "Taxi to the airport"
    return workflow.submit_task_if_waiting(task, TaskAction.FORWARD, ctx, message=message)


# engine.begin(), apply(conn), COMMIT; the whole unit again on a deadlock/serialization failure
run_in_transaction(engine, apply, idempotent=True)  # idempotent: the submit re-checks

for entry in TaskHistoryRecorder(engine, index=True).history("expense-42"):
    print(entry.source_node_id, "->", entry.target_node_id, entry.assignee, entry.message)
