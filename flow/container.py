"""Where ``@name`` components come from, and what a component is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from flow.context import FlowContext
    from flow.graph import Node


@runtime_checkable
class TaskComponent(Protocol):
    """An object whose ``run(ctx, node)`` is a node's task (a plain callable also works)."""

    def run(self, ctx: FlowContext, node: Node) -> None: ...


@runtime_checkable
class ConditionComponent(Protocol):
    """An object whose ``test(ctx)`` is a condition (a plain callable also works)."""

    def test(self, ctx: FlowContext) -> bool: ...


class Container(Protocol):
    """Looks components up by name; ``None`` when there is none."""

    def get_component(self, name: str) -> Any: ...


class MapContainer:
    """A dict-backed :class:`Container`, the default of :class:`~flow.driver.SimpleFlowDriver`."""

    def __init__(self, components: dict[str, Any] | None = None) -> None:
        self._components: dict[str, Any] = dict(components or {})

    def put_component(self, name: str, component: Any) -> None:
        self._components[name] = component

    def remove_component(self, name: str) -> None:
        self._components.pop(name, None)

    def get_component(self, name: str) -> Any:
        return self._components.get(name)


__all__ = ["ConditionComponent", "Container", "MapContainer", "TaskComponent"]
