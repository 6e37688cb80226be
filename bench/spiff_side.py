"""The SpiffWorkflow side of ``sql_bench.py``: the same OA approvals, persisted its way.

SpiffWorkflow 3.2 (``pip install SpiffWorkflow``) runs the OA process as BPMN: a user task
``apply``, an exclusive gateway on ``amount``, the manager's or the director's user task. Each
approval, in one ``engine.begin()`` transaction like the baselines: lock and read the
instance's state row, deserialize the workflow with Spiff's JSON serializer, complete the
ready user task and run the engine steps, serialize it again, write the state row and insert
one ``bpm_flow_task`` history row. That is how an application persists Spiff (its serializer
writes the whole workflow, spec included, at every step).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

OA_BPMN = b"""<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" id="oa-defs"
    targetNamespace="http://bpmn.io/schema/bpmn">
  <bpmn:process id="oa" isExecutable="true">
    <bpmn:startEvent id="start"><bpmn:outgoing>f1</bpmn:outgoing></bpmn:startEvent>
    <bpmn:userTask id="apply" name="Apply">
      <bpmn:incoming>f1</bpmn:incoming><bpmn:outgoing>f2</bpmn:outgoing></bpmn:userTask>
    <bpmn:exclusiveGateway id="amount" name="Amount?" default="low">
      <bpmn:incoming>f2</bpmn:incoming>
      <bpmn:outgoing>high</bpmn:outgoing><bpmn:outgoing>low</bpmn:outgoing>
    </bpmn:exclusiveGateway>
    <bpmn:userTask id="manager" name="Manager approval">
      <bpmn:incoming>low</bpmn:incoming><bpmn:outgoing>f3</bpmn:outgoing></bpmn:userTask>
    <bpmn:userTask id="director" name="Director approval">
      <bpmn:incoming>high</bpmn:incoming><bpmn:outgoing>f4</bpmn:outgoing></bpmn:userTask>
    <bpmn:endEvent id="end"><bpmn:incoming>f3</bpmn:incoming><bpmn:incoming>f4</bpmn:incoming>
    </bpmn:endEvent>
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="apply"/>
    <bpmn:sequenceFlow id="f2" sourceRef="apply" targetRef="amount"/>
    <bpmn:sequenceFlow id="high" sourceRef="amount" targetRef="director">
      <bpmn:conditionExpression>amount &gt;= 5000</bpmn:conditionExpression>
    </bpmn:sequenceFlow>
    <bpmn:sequenceFlow id="low" sourceRef="amount" targetRef="manager"/>
    <bpmn:sequenceFlow id="f3" sourceRef="manager" targetRef="end"/>
    <bpmn:sequenceFlow id="f4" sourceRef="director" targetRef="end"/>
  </bpmn:process>
</bpmn:definitions>"""

STATE_TABLE = "spiff_workflow_state"
CREATE_STATE_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {STATE_TABLE} "
    "(instance_id VARCHAR(64) NOT NULL PRIMARY KEY, state LONGTEXT NOT NULL)"
)
INSERT_STATE = f"INSERT INTO {STATE_TABLE} (instance_id, state) VALUES (%s, %s)"
LOCK_STATE = f"SELECT state FROM {STATE_TABLE} WHERE instance_id = %s FOR UPDATE"
WRITE_STATE = f"UPDATE {STATE_TABLE} SET state = %s WHERE instance_id = %s"


def setup_spiff(
    dsn: str,
    counter: list[int],
    *,
    engine_for: Callable[[str], sa.Engine],
    history_sql: str,
    now: Callable[[], Any],
) -> tuple[Callable[[str], None], Callable[[], None]]:
    """A runner driving one OA instance to its end through SpiffWorkflow (two approvals, one
    transaction each), and the function that releases its engine."""
    from SpiffWorkflow.bpmn.parser.BpmnParser import BpmnParser
    from SpiffWorkflow.bpmn.serializer.workflow import BpmnWorkflowSerializer
    from SpiffWorkflow.bpmn.workflow import BpmnWorkflow
    from SpiffWorkflow.util.task import TaskState

    parser = BpmnParser()
    parser.add_bpmn_str(OA_BPMN)
    spec = parser.get_spec("oa")
    serializer = BpmnWorkflowSerializer()
    engine = engine_for(dsn)
    with engine.begin() as conn:
        conn.exec_driver_sql(CREATE_STATE_TABLE)

    def execute(conn: sa.Connection, sql: str, params: tuple[Any, ...]) -> Any:
        counter[0] += 1
        return conn.exec_driver_sql(sql, params)

    def approve(instance_id: str, actor: str, first: bool) -> None:
        with engine.begin() as conn:
            if first:
                workflow = BpmnWorkflow(spec)
                workflow.do_engine_steps()
                execute(conn, INSERT_STATE, (instance_id, serializer.serialize_json(workflow)))
            else:
                (state,) = execute(conn, LOCK_STATE, (instance_id,)).one()
                workflow = serializer.deserialize_json(state)
            (task,) = workflow.get_tasks(state=TaskState.READY, manual=True)
            task.data.update({"amount": 100, "actor": actor})
            task.run()
            workflow.do_engine_steps()
            execute(conn, WRITE_STATE, (serializer.serialize_json(workflow), instance_id))
            (nxt,) = workflow.get_tasks(state=TaskState.READY, manual=True) or (None,)
            stamp = now()
            execute(
                conn,
                history_sql,
                (instance_id, "oa", task.task_spec.name, task.task_spec.name,
                 task.task_spec.bpmn_name, "ACTIVITY",
                 nxt.task_spec.name if nxt else "end", nxt.task_spec.bpmn_name if nxt else "End",
                 "ACTIVITY" if nxt else "END", actor, 1002, None,
                 json.dumps(task.data), None, actor, stamp),
            )  # fmt: skip

    def run(instance_id: str) -> None:
        approve(instance_id, "employee", first=True)
        approve(instance_id, "manager", first=False)

    return run, engine.dispose
