"""Set-up checks of the objects a walk or an operation calls back (drivers, interceptors, the
executor's engine, controller, repository and recorder): refused when they are handed over,
not by every later call with a bare ``AttributeError``."""

from __future__ import annotations

from flow.errors import InvalidArgumentTypeError


def check_hooks(name: str, value: object, hooks: tuple[str, ...], expected: str) -> None:
    """Refuse ``value`` unless it is an instance (not a class) with every callable of
    ``hooks`` — subclassing the base class is not required."""
    if isinstance(value, type) or not all(callable(getattr(value, h, None)) for h in hooks):
        raise InvalidArgumentTypeError(
            name, value, f"{expected} (an object with {', '.join(hooks)})"
        )


__all__ = ["check_hooks"]
