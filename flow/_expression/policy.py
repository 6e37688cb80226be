"""Which attributes and methods of which types an expression may reach: an allow-list per type.

Every value an expression can hold is one of

* a value of a *listed* type — Python's scalars, strings and containers, ``Decimal``, dates and
  times, ``UUID``, enums, and the library's own objects (``context``, ``node``, graphs, links,
  records, tasks): exactly the attributes and methods named below, nothing else; in particular
  no constructor, classmethod, staticmethod or anything that reads files, the clock or the
  network (``Graph.from_file``, ``str.maketrans``, ``int.from_bytes``, ``datetime.now``...);
* a *data object* the application put into the context (its class comes from neither the
  standard library nor this library): its public attributes, and the public methods its own
  classes define in Python (the reference calls ``demo.incrementAndGet()``) — but no
  classmethod, staticmethod, class, or method inherited from the standard library or this
  library;
* anything else (modules, classes, functions, other standard-library or library objects): no
  attribute and no method at all.

The method tables say nothing about sizes; :mod:`.sizes` bounds each listed method's result.
"""

from __future__ import annotations

import datetime as dt
import inspect
import sys
import types
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Any

import simpleeval as se

_FORBIDDEN_NAMES = frozenset(
    {
        *se.DISALLOW_METHODS,
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_back",
        "f_code",
        "gi_code",
        "cr_code",
        "ag_code",
    }
)
_FORBIDDEN_PREFIXES = tuple(se.DISALLOW_PREFIXES)


def forbidden_name(name: str) -> bool:
    """Names no value ever exposes: private/dunder names and simpleeval's forbidden methods."""
    return name.startswith(_FORBIDDEN_PREFIXES) or name in _FORBIDDEN_NAMES


@dataclass(frozen=True, kw_only=True)
class Rule:
    """What an expression may do with a value of one type.

    ``data_object`` marks the application's own classes: public, non-callable attributes only.
    """

    attributes: frozenset[str] = frozenset()
    methods: frozenset[str] = frozenset()
    data_object: bool = False


def _rule(attributes: str = "", methods: str = "") -> Rule:
    return Rule(attributes=frozenset(attributes.split()), methods=frozenset(methods.split()))


NOTHING = Rule()
DATA_OBJECT = Rule(data_object=True)

_TEXT = (
    "capitalize casefold center count endswith expandtabs find index isalnum isalpha isascii "
    "isdecimal isdigit isidentifier islower isnumeric isprintable isspace istitle isupper join "
    "ljust lower lstrip partition removeprefix removesuffix replace rfind rindex rjust rpartition "
    "rsplit rstrip split splitlines startswith strip swapcase title translate upper zfill"
)
_BYTES = (
    "center count endswith expandtabs find hex index isalnum isalpha isascii isdigit islower "
    "isspace istitle isupper join ljust lower lstrip partition removeprefix removesuffix "
    "replace rfind rindex rjust rpartition rsplit rstrip split splitlines startswith strip "
    "swapcase title upper zfill"
)
_NUMBER = "real imag"
_INT = _rule(
    f"{_NUMBER} numerator denominator",
    "bit_length bit_count conjugate as_integer_ratio is_integer to_bytes",
)
_READ_MAPPING = "get keys values items copy"
_SET_READ = "copy difference intersection isdisjoint issubset issuperset symmetric_difference union"
_DATE = "year month day"
_TIME = "hour minute second microsecond fold"
_DATE_METHODS = "isoformat isoweekday weekday isocalendar strftime replace"

RULES: dict[type, Rule] = {
    str: _rule(methods=_TEXT),
    bytes: _rule(methods=_BYTES),
    int: _INT,
    bool: _INT,
    float: _rule(_NUMBER, "as_integer_ratio conjugate hex is_integer"),
    complex: _rule(_NUMBER, "conjugate"),
    type(None): NOTHING,
    list: _rule(
        methods="append clear copy count extend index insert pop remove reverse sort",
    ),
    tuple: _rule(methods="count index"),
    range: _rule("start stop step", "count index"),
    dict: _rule(methods=f"{_READ_MAPPING} clear pop popitem setdefault update"),
    types.MappingProxyType: _rule(methods=_READ_MAPPING),
    set: _rule(
        methods=f"{_SET_READ} add clear discard pop remove update difference_update "
        "intersection_update symmetric_difference_update",
    ),
    frozenset: _rule(methods=_SET_READ),
    type({}.keys()): _rule(methods="isdisjoint"),
    type({}.items()): _rule(methods="isdisjoint"),
    type({}.values()): NOTHING,
    Decimal: _rule(
        _NUMBER,
        "adjusted copy_abs copy_negate is_finite is_infinite is_nan is_signed is_zero "
        "normalize to_eng_string",
    ),
    dt.date: _rule(_DATE, f"{_DATE_METHODS} toordinal"),
    dt.datetime: _rule(f"{_DATE} {_TIME}", f"{_DATE_METHODS} date time toordinal"),
    dt.time: _rule(_TIME, "isoformat strftime replace"),
    dt.timedelta: _rule("days seconds microseconds", "total_seconds"),
    uuid.UUID: _rule("hex int urn version variant"),
    types.SimpleNamespace: DATA_OBJECT,
}

_ENUM = _rule("name value")
_LIBRARY_RULES: dict[str, Rule] = {
    "flow.context.FlowContext": _rule(
        "data instance_id is_stopped last_node_id last_record",
        "get interrupt put put_all put_if_absent remove stop",
    ),
    "flow.graph.Node": _rule(
        "id title type meta graph next_links prev_links next_nodes prev_nodes next_node",
        "meta_get meta_as_str meta_as_bool meta_as_number",
    ),
    "flow.graph.Link": _rule("prev_id next_id title meta priority next_node prev_node"),
    "flow.graph.Graph": _rule(
        "id title driver meta nodes links start", "get_node get_node_or_throw"
    ),
    "flow.trace.NodeRecord": _rule("graph_id id title type timestamp is_end"),
    "flow.node_type.NodeType": _rule("name value is_gateway"),
    "flow.workflow.states.TaskState": _ENUM,
    "flow.workflow.states.TaskAction": _rule("name value target_state"),
    "flow.workflow._intent.IntentType": _ENUM,
    "flow.workflow._intent.WorkflowIntent": _rule("type task next_tasks root_graph"),
    "flow.workflow.task.Task": _rule("root_graph node node_id state context last_record is_end"),
}
_LIBRARIES = ("flow", "flow_sqla")
_CACHE: dict[type, Rule] = {}


def rule_for(value: Any) -> Rule:
    """The :class:`Rule` of ``value``'s type (computed once per type)."""
    cls = type(value)
    rule = _CACHE.get(cls)
    if rule is None:
        if len(_CACHE) > 4096:
            _CACHE.clear()
        rule = _CACHE[cls] = _classify(cls)
    return rule


def _classify(cls: type) -> Rule:
    listed = RULES.get(cls)
    if listed is not None:
        return listed
    module = getattr(cls, "__module__", None) or "builtins"
    top = module.partition(".")[0]
    library = _LIBRARY_RULES.get(f"{module}.{cls.__qualname__}")
    if library is not None:
        return library
    if issubclass(cls, type | types.ModuleType) or callable(getattr(cls, "__get__", None)):
        return NOTHING  # classes, modules, functions, methods, descriptors
    if top in _LIBRARIES or top in sys.stdlib_module_names:
        return _inherited(cls)
    if issubclass(cls, Enum):
        return DATA_OBJECT
    return _builtin_base(cls) or DATA_OBJECT


def _inherited(cls: type) -> Rule:
    """A library or standard-library type not listed: its listed base's rule, or nothing."""
    if issubclass(cls, Enum):
        return _ENUM
    return _builtin_base(cls) or NOTHING


def _builtin_base(cls: type) -> Rule | None:
    """The rule of the first listed base of ``cls`` (an ``OrderedDict`` is used as a dict), a
    read-only mapping's for other mappings (such as frozen graph meta), else ``None``."""
    for base in cls.__mro__[1:]:
        if base in RULES and base is not object:
            return RULES[base]
    if issubclass(cls, Mapping):
        return RULES[types.MappingProxyType]
    return None


def is_own_method(obj: Any, name: str) -> bool:
    """A data object's ``name`` is a plain method defined by the application's own code."""
    try:
        static = inspect.getattr_static(obj, name)  # an instance attribute shadows the class
    except AttributeError:
        return False
    if not isinstance(static, types.FunctionType):
        return False
    top = (static.__module__ or "builtins").partition(".")[0]
    return top not in _LIBRARIES and top not in sys.stdlib_module_names


def is_data_attribute(obj: Any, name: str) -> bool:
    """A data object's ``name`` is readable: public, and not a method/classmethod/class."""
    try:
        static = inspect.getattr_static(obj, name)
    except AttributeError:
        return False
    return not isinstance(
        static, classmethod | staticmethod | type | types.FunctionType | types.BuiltinFunctionType
    )
