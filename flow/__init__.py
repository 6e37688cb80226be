"""flow — a Python port of the solon-flow graph engine (no database dependencies)."""

from __future__ import annotations

from flow.codec import CodecLimits, decode, encode, is_representable
from flow.container import ConditionComponent, Container, MapContainer, TaskComponent
from flow.context import FlowContext, NonSerializable
from flow.driver import FlowDriver, SimpleFlowDriver
from flow.engine import FlowEngine
from flow.errors import (
    ComponentNotFoundError,
    ConditionError,
    ContextValueError,
    ExpressionError,
    FlowError,
    GraphDefinitionError,
    GraphNotFoundError,
    InvalidArgumentTypeError,
    NodeNotFoundError,
    ReadOnlyGraphError,
    ResumeError,
    SnapshotError,
    StepBudgetError,
    TaskError,
)
from flow.evaluation import Evaluation, SafeEvaluation
from flow.exchanger import FlowExchanger
from flow.graph import Graph, Link, Node
from flow.interceptor import FlowInterceptor, FlowInvocation
from flow.node_type import NodeType
from flow.spec import GraphSpec, LinkSpec, NodeSpec
from flow.stepper import parse_range
from flow.trace import FlowTrace, NodeRecord
from flow.validation import Problem  # what Graph.validate() returns (api.md lists it here)

# NOT exported here, on purpose: the workflow names (TaskState, WorkflowExecutor, ...) live in
# the `flow.workflow` package.

__all__ = [
    "CodecLimits",
    "ComponentNotFoundError",
    "ConditionComponent",
    "ConditionError",
    "Container",
    "ContextValueError",
    "Evaluation",
    "ExpressionError",
    "FlowContext",
    "FlowDriver",
    "FlowEngine",
    "FlowError",
    "FlowExchanger",
    "FlowInterceptor",
    "FlowInvocation",
    "FlowTrace",
    "Graph",
    "GraphDefinitionError",
    "GraphNotFoundError",
    "GraphSpec",
    "InvalidArgumentTypeError",
    "Link",
    "LinkSpec",
    "MapContainer",
    "Node",
    "NodeNotFoundError",
    "NodeRecord",
    "NodeSpec",
    "NodeType",
    "NonSerializable",
    "Problem",
    "ReadOnlyGraphError",
    "ResumeError",
    "SafeEvaluation",
    "SimpleFlowDriver",
    "SnapshotError",
    "StepBudgetError",
    "TaskComponent",
    "TaskError",
    "decode",
    "encode",
    "is_representable",
    "parse_range",
]
