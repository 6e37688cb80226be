"""The workflow state machine, as a driver wrapping the graph's own driver.

Every executor call evaluates the graph through a :class:`WorkflowDriver`. The engine still
decides which nodes are reached; this driver decides, for each activity or gateway reached,
whether it runs (automatic nodes), becomes *the* task (human nodes) or is passed or stops the
walk, reading and writing node states in the repository (reference ``WorkflowDriver``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flow.driver import FlowDriver, SimpleFlowDriver
from flow.evaluation import SafeEvaluation
from flow.node_type import NodeType
from flow.workflow._intent import IntentType, WorkflowIntent, current_intent
from flow.workflow.states import TaskState
from flow.workflow.task import Task

if TYPE_CHECKING:
    from flow.exchanger import FlowExchanger
    from flow.graph import Node
    from flow.workflow.controllers import StateController
    from flow.workflow.repository import StateRepository


class WorkflowDriver(FlowDriver):
    """Wraps ``driver``; conditions and task code are delegated to it.

    With ``dry_run`` the driver never runs task code: an automatic node that has not run yet is
    passed as if it completed, one left WAITING (its task stopped the flow) is where the walk
    ends. The executor uses it, over a throwaway overlay repository, to find the target of a
    task record without side effects.
    """

    def __init__(
        self,
        driver: FlowDriver,
        controller: StateController,
        repository: StateRepository,
        *,
        dry_run: bool = False,
    ) -> None:
        self.driver = driver
        self.controller = controller
        self.repository = repository
        self.dry_run = dry_run
        #: False once a node handled since it was last set True was not COMPLETED (the executor
        #: uses it to tell a walk that only passed completed nodes, so ran no task code).
        self.only_completed = True
        #: Whether a walk of this driver ran code that may change the context's variables
        #: (or decide differently when asked again): an automatic node's task, a condition
        #: that calls anything, a condition component, or a condition under a driver or
        #: evaluation of the application's own. A gateway the walk passed may then decide
        #: otherwise on a second walk (see ``_frontier.walked_frontier``).
        self.ran_code = False
        # The wrapped driver's node callbacks run for every node of every walk; most drivers
        # keep FlowDriver's no-ops, which are then not called at all.
        self._inner_on_start, self._inner_on_end = _callbacks_overridden(type(driver))
        #: Conditions tested the standard way (checked once: every condition asks).
        self._standard_conditions = (
            type(driver).handle_condition is SimpleFlowDriver.handle_condition
            and type(getattr(driver, "evaluation", None)) is SafeEvaluation
        )

    @property
    def repeatable(self) -> bool:
        """Whether a dry walk over the states this driver's walks left would take their
        path again: they ran no code that may have changed a variable (:attr:`ran_code`) and
        the graph driver has no node callbacks (a dry walk skips them)."""
        return not (self.ran_code or self._inner_on_start or self._inner_on_end)

    # -- callbacks ---------------------------------------------------------------------
    def on_node_start(self, exchanger: FlowExchanger, node: Node) -> None:
        """Merge the repository's variables for this node into the context, then delegate."""
        variables = self.repository.vars_get(exchanger.context, node)
        if variables:
            exchanger.context.put_all(variables)
        if self._inner_on_start:
            self.driver.on_node_start(exchanger, node)

    def on_node_end(self, exchanger: FlowExchanger, node: Node) -> None:
        """Delegate; reaching END means a claim found nothing to do."""
        if self._inner_on_end:
            self.driver.on_node_end(exchanger, node)
        if node.type == NodeType.END:
            intent = current_intent(exchanger.context)
            if intent is not None and intent.type == IntentType.CLAIM_TASK:
                intent.task = None

    def handle_condition(self, exchanger: FlowExchanger, condition: Any) -> bool:
        if not self.ran_code and not self._reads_only(condition):
            self.ran_code = True
        return self.driver.handle_condition(exchanger, condition)

    def _reads_only(self, condition: Any) -> bool:
        """Whether testing ``condition`` only reads: an expression without a call (the
        sandbox lets one call ``context.put``) under the standard driver and evaluation."""
        return (
            self._standard_conditions
            and isinstance(condition, str)
            and "(" not in condition
            and not condition.startswith("@")
        )

    def post_handle_task(self, exchanger: FlowExchanger, node: Node) -> None:
        self.driver.post_handle_task(exchanger, node)

    # -- the state machine -------------------------------------------------------------
    def handle_task(self, exchanger: FlowExchanger, node: Node) -> None:
        """Apply the state table to an activity or gateway whose ``when`` holds."""
        ctx = exchanger.context
        intent = current_intent(ctx) or WorkflowIntent(exchanger.graph, IntentType.UNKNOWN)
        state = self.repository.state_get(ctx, node)
        if state != TaskState.COMPLETED:
            self.only_completed = False
        if state == TaskState.COMPLETED or state == TaskState.TERMINATED:
            # Automatic or human alike (the state table's answer is the same): the controller
            # is not asked about a node the walk only passes or stops at.
            self._settled(exchanger, intent, node, state)
            return
        if self.controller.is_auto_forward(ctx, node):
            self._auto(exchanger, intent, node, state)
        else:
            self._human(exchanger, intent, node, state)

    @staticmethod
    def _task(
        exchanger: FlowExchanger, intent: WorkflowIntent, node: Node, state: TaskState
    ) -> Task:
        return Task(root_graph=intent.root_graph, node=node, state=state, context=exchanger.context)

    def _auto(
        self, exchanger: FlowExchanger, intent: WorkflowIntent, node: Node, state: TaskState
    ) -> None:
        """An automatic node not run yet (UNKNOWN) or left WAITING: run its task code."""
        if self.dry_run:
            self._dry_auto(exchanger, intent, node, state)
        else:
            self._run_task(exchanger, intent, node, state)

    def _run_task(
        self, exchanger: FlowExchanger, intent: WorkflowIntent, node: Node, state: TaskState
    ) -> None:
        """Run an automatic node's task code: it completes, or stays WAITING when its task
        stopped the walk (or a sub-graph it ran did not reach its END)."""
        ctx = exchanger.context
        if not self._runs_nothing(node):
            self.ran_code = True
        self.post_handle_task(exchanger, node)
        if exchanger.is_stopped or exchanger.is_interrupted:
            intent.found(node, TaskState.WAITING, ctx)
            if state == TaskState.UNKNOWN:
                self.repository.state_put(ctx, node, TaskState.WAITING)
        else:
            intent.found(node, TaskState.COMPLETED, ctx)
            self.repository.state_put(ctx, node, TaskState.COMPLETED)

    def _settled(
        self, exchanger: FlowExchanger, intent: WorkflowIntent, node: Node, state: TaskState
    ) -> None:
        """A COMPLETED or TERMINATED node, automatic or human alike: a find reports it; the
        walk passes a completed node and stops at a terminated one."""
        if state == TaskState.TERMINATED:
            if intent.type == IntentType.FIND_TASK:
                intent.found(node, TaskState.TERMINATED, exchanger.context)
            exchanger.stop()
        elif state == TaskState.COMPLETED and intent.type == IntentType.FIND_TASK:
            intent.found(node, TaskState.COMPLETED, exchanger.context)

    def _dry_auto(
        self, exchanger: FlowExchanger, intent: WorkflowIntent, node: Node, state: TaskState
    ) -> None:
        """An automatic node in a walk that runs no task code: as a real walk would end.

        A node its task code left WAITING (the task stopped the walk, e.g. to wait for an
        outside event) is taken to stop it again. One with no task code under the standard
        driver completes whatever its state: a real walk runs nothing there and passes on (a
        FORWARD_JUMP onto a gateway leaves the gateway WAITING; the instance is not parked at
        it). A driver of the application's own may act on any node: its nodes stay parked."""
        if state == TaskState.WAITING and not self._runs_nothing(node):
            intent.found(node, TaskState.WAITING, exchanger.context)
            exchanger.stop()
        else:
            intent.found(node, TaskState.COMPLETED, exchanger.context)
            self.repository.state_put(exchanger.context, node, TaskState.COMPLETED)

    def _runs_nothing(self, node: Node) -> bool:
        """Whether a real walk runs nothing at automatic ``node``: it has no task, and the
        graph driver runs tasks the standard way (a subclass may act on any node)."""
        post = type(self.driver).post_handle_task
        return node.task is None and post is SimpleFlowDriver.post_handle_task

    def _human(
        self, exchanger: FlowExchanger, intent: WorkflowIntent, node: Node, state: TaskState
    ) -> None:
        """A human task not done yet (UNKNOWN or WAITING): the walk stops at it (or, finding
        next tasks, ends this branch); it is WAITING when this context may operate it."""
        ctx = exchanger.context
        if self.controller.is_operatable(ctx, node):
            task = self._task(exchanger, intent, node, TaskState.WAITING)
            intent.task = task
            intent.next_tasks.append(task)
            if state == TaskState.UNKNOWN:
                self.repository.state_put(ctx, node, TaskState.WAITING)
            if intent.type == IntentType.FIND_NEXT_TASKS:
                exchanger.interrupt()
            else:
                exchanger.stop()
        else:
            task = self._task(exchanger, intent, node, TaskState.UNKNOWN)
            intent.next_tasks.append(task)
            if intent.type == IntentType.FIND_TASK:
                intent.task = task
                exchanger.stop()
            else:
                exchanger.interrupt()


_OVERRIDDEN: dict[type[FlowDriver], tuple[bool, bool]] = {}


def _callbacks_overridden(driver_class: type[FlowDriver]) -> tuple[bool, bool]:
    """Whether ``driver_class`` replaces :class:`FlowDriver`'s no-op ``on_node_start`` and
    ``on_node_end`` (worked out once per class: a driver is made for every operation)."""
    found = _OVERRIDDEN.get(driver_class)
    if found is None:
        found = _OVERRIDDEN[driver_class] = (
            driver_class.on_node_start is not FlowDriver.on_node_start,
            driver_class.on_node_end is not FlowDriver.on_node_end,
        )
    return found


__all__ = ["WorkflowDriver"]
