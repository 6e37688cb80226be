"""The Go plugin's side of shared tables, for the interop and adoption tests.

Everything here follows the design notes on the Go plugin (reference-solon-flow.md §7.3-7.4 and
go-plugin-rows.md): its ``ddl.sql`` (verbatim for MySQL/MariaDB; the same tables written for
PostgreSQL and SQLite as a team porting it would write them), its writes (which columns each
statement sets, ``json.Marshal`` bytes, NULL or ``''``) and its reads, emulated *strictly*:
a value Go's ``database/sql`` + ``encoding/json`` would refuse raises :class:`GoParseError`.

The Go reader's struct for a history row is not published; it is taken to scan every column
the Go writer always fills into a non-nullable Go type (``string``, ``int``, ``time.Time``) and
the columns it may leave NULL (``form_id``, ``message``, ``updater``, ``update_time``) into
``sql.Null*`` types — the only struct that reads every row the Go writer itself produces.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

MYSQL_DDL = """\
-- bpm_flow_repository: one row per flow instance (state snapshot).
CREATE TABLE `bpm_flow_repository` (
  `id` bigint NOT NULL AUTO_INCREMENT COMMENT 'ID 编号',
  `instant_id` varchar(64) NOT NULL COMMENT '流程实例id',
  `graph` json DEFAULT NULL COMMENT '实例图',
  `states` json DEFAULT NULL COMMENT '运行状态',
  `vars` json DEFAULT NULL COMMENT '运行变量',
  `creator` varchar(64) DEFAULT NULL COMMENT '创建人',
  `create_time` datetime DEFAULT NULL COMMENT '创建时间',
  `updater` varchar(64) DEFAULT NULL COMMENT '修改人',
  `update_time` datetime DEFAULT NULL COMMENT '修改时间',
  PRIMARY KEY (`id`) USING BTREE,
  UNIQUE KEY `uniq_instantId` (`instant_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci COMMENT='工作流存储';

-- bpm_flow_task: task transition history (append-only audit).
CREATE TABLE `bpm_flow_task` (
  `id` bigint NOT NULL AUTO_INCREMENT COMMENT 'ID 编号',
  `flow_ins_id` varchar(64) NOT NULL COMMENT '流程运行id',
  `proc_def_id` varchar(64) NOT NULL COMMENT '流程定义id',
  `task_id` varchar(64) NOT NULL COMMENT '任务id',
  `source_node_code` varchar(64) NOT NULL COMMENT '节点编码',
  `source_node_name` varchar(64) DEFAULT NULL COMMENT '任务名称',
  `source_node_type` varchar(64) NOT NULL COMMENT '节点类型',
  `target_node_code` varchar(64) NOT NULL COMMENT '目标节点编码',
  `target_node_name` varchar(64) NOT NULL COMMENT '目标节点名称',
  `target_node_type` varchar(64) NOT NULL COMMENT '目标节点类型',
  `assignee` varchar(64) NOT NULL COMMENT '办理人',
  `status` int DEFAULT NULL COMMENT '状态',
  `form_id` bigint DEFAULT NULL COMMENT '表单id',
  `variables` json DEFAULT NULL COMMENT '变量',
  `message` text COMMENT '处理消息',
  `creator` varchar(64) DEFAULT NULL COMMENT '创建人',
  `create_time` datetime DEFAULT NULL COMMENT '创建时间',
  `updater` varchar(64) DEFAULT NULL COMMENT '修改人',
  `update_time` datetime DEFAULT NULL COMMENT '修改时间',
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci COMMENT='工作流任务历史';
"""

POSTGRESQL_DDL = """\
CREATE TABLE bpm_flow_repository (
  id bigserial NOT NULL,
  instant_id varchar(64) NOT NULL,
  graph json DEFAULT NULL,
  states json DEFAULT NULL,
  vars json DEFAULT NULL,
  creator varchar(64) DEFAULT NULL,
  create_time timestamp DEFAULT NULL,
  updater varchar(64) DEFAULT NULL,
  update_time timestamp DEFAULT NULL,
  PRIMARY KEY (id),
  CONSTRAINT "uniq_instantId" UNIQUE (instant_id)
);
COMMENT ON TABLE bpm_flow_repository IS '工作流存储';

CREATE TABLE bpm_flow_task (
  id bigserial NOT NULL,
  flow_ins_id varchar(64) NOT NULL,
  proc_def_id varchar(64) NOT NULL,
  task_id varchar(64) NOT NULL,
  source_node_code varchar(64) NOT NULL,
  source_node_name varchar(64) DEFAULT NULL,
  source_node_type varchar(64) NOT NULL,
  target_node_code varchar(64) NOT NULL,
  target_node_name varchar(64) NOT NULL,
  target_node_type varchar(64) NOT NULL,
  assignee varchar(64) NOT NULL,
  status int DEFAULT NULL,
  form_id bigint DEFAULT NULL,
  variables json DEFAULT NULL,
  message text,
  creator varchar(64) DEFAULT NULL,
  create_time timestamp DEFAULT NULL,
  updater varchar(64) DEFAULT NULL,
  update_time timestamp DEFAULT NULL,
  PRIMARY KEY (id)
);
COMMENT ON COLUMN bpm_flow_task.message IS '处理消息';
"""

SQLITE_DDL = """\
CREATE TABLE bpm_flow_repository (
  id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  instant_id varchar(64) NOT NULL,
  graph json DEFAULT NULL,
  states json DEFAULT NULL,
  vars json DEFAULT NULL,
  creator varchar(64) DEFAULT NULL,
  create_time datetime DEFAULT NULL,
  updater varchar(64) DEFAULT NULL,
  update_time datetime DEFAULT NULL,
  CONSTRAINT uniq_instantId UNIQUE (instant_id)
);

CREATE TABLE bpm_flow_task (
  id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  flow_ins_id varchar(64) NOT NULL,
  proc_def_id varchar(64) NOT NULL,
  task_id varchar(64) NOT NULL,
  source_node_code varchar(64) NOT NULL,
  source_node_name varchar(64) DEFAULT NULL,
  source_node_type varchar(64) NOT NULL,
  target_node_code varchar(64) NOT NULL,
  target_node_name varchar(64) NOT NULL,
  target_node_type varchar(64) NOT NULL,
  assignee varchar(64) NOT NULL,
  status int DEFAULT NULL,
  form_id bigint DEFAULT NULL,
  variables json DEFAULT NULL,
  message text,
  creator varchar(64) DEFAULT NULL,
  create_time datetime DEFAULT NULL,
  updater varchar(64) DEFAULT NULL,
  update_time datetime DEFAULT NULL
);
"""

GO_DDL = {"mysql": MYSQL_DDL, "postgresql": POSTGRESQL_DDL, "sqlite": SQLITE_DDL}

#: NodeType names as the Go plugin writes them into the ``*_node_type`` columns.
NODE_TYPES = frozenset(
    {"UNKNOWN", "START", "END", "ACTIVITY", "EXCLUSIVE", "INCLUSIVE", "PARALLEL", "LOOP"}
)
#: TaskState codes (``states`` values, ``bpm_flow_task.status``).
STATE_CODES = frozenset({0, 1001, 1002, 1003})


def backend(engine: sa.Engine) -> str:
    """``mysql`` (MySQL and MariaDB), ``postgresql`` or ``sqlite``."""
    name = engine.dialect.name
    return "mysql" if name == "mariadb" else name


def statements(ddl: str) -> list[str]:
    """The statements of a DDL text (``--`` comment lines dropped, split on ``;``)."""
    body = "\n".join(line for line in ddl.splitlines() if not line.lstrip().startswith("--"))
    return [stmt.strip() for stmt in body.split(";") if stmt.strip()]


def create_go_tables(engine: sa.Engine, ddl: str | None = None) -> None:
    """Run the Go plugin's DDL for the engine's dialect (or ``ddl``); no version table."""
    with engine.begin() as conn:
        for stmt in statements(ddl if ddl is not None else GO_DDL[backend(engine)]):
            conn.exec_driver_sql(stmt)


# -- writing as the Go plugin writes ----------------------------------------------------------


def go_marshal(value: Any) -> str:
    """``json.Marshal`` of plain Go maps/slices: compact, map keys sorted, ``<``, ``>`` and
    ``&`` escaped as ``\\u003c``..., other non-ASCII text kept as UTF-8."""
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def json_param(engine: sa.Engine, name: str) -> str:
    return f"CAST(:{name} AS JSON)" if backend(engine) == "postgresql" else f":{name}"


def go_state_put(
    engine: sa.Engine,
    instance_id: str,
    states: dict[str, int],
    auditor: str,
    *,
    graph: str | dict[str, Any] | None = None,
    vars: dict[str, Any] | None = None,
) -> None:
    """One ``StatePut`` write: ``INSERT … ON DUPLICATE KEY UPDATE`` keyed on ``instant_id``.

    Every write sets ``instant_id, states, updater, update_time``; the first write also sets
    ``creator, create_time`` and, when given, ``graph`` (the graph's JSON document, or only its
    id — a JSON string) and ``vars`` (the variables as of that write, identity keys and all).
    """
    row: dict[str, Any] = {"i": instance_id, "s": go_marshal(states), "a": auditor}
    columns = ["instant_id", "states", "updater", "update_time", "creator", "create_time"]
    values = [":i", json_param(engine, "s"), ":a", "CURRENT_TIMESTAMP", ":a", "CURRENT_TIMESTAMP"]
    for column, key, value in (("graph", "g", graph), ("vars", "v", vars)):
        if value is not None:
            columns.append(column)
            values.append(json_param(engine, key))
            row[key] = go_marshal(value)
    insert = f"INSERT INTO bpm_flow_repository ({', '.join(columns)}) VALUES ({', '.join(values)})"
    update = ("states", "updater", "update_time")
    if backend(engine) == "mysql":
        sql = f"{insert} ON DUPLICATE KEY UPDATE " + ", ".join(f"{c} = VALUES({c})" for c in update)
    else:
        sql = f"{insert} ON CONFLICT (instant_id) DO UPDATE SET " + ", ".join(
            f"{c} = excluded.{c}" for c in update
        )
    with engine.begin() as conn:
        conn.execute(sa.text(sql), row)


@dataclass(frozen=True, kw_only=True)
class GoNode:
    """What the Go recorder reads of a node: id, title (``""`` when none), NodeType name."""

    id: str
    title: str
    type: str


def go_record(
    engine: sa.Engine,
    *,
    instance_id: str,
    graph_id: str,
    source: GoNode,
    target: GoNode,
    assignee: str,
    status: int,
    form_id: int | None,
    variables: dict[str, Any],
    message: str,
    auditor: str,
) -> None:
    """One ``TaskHistoryRecorder.Record``: a plain INSERT naming its columns; ``form_id`` NULL
    without a ``formId`` meta, ``message`` NULL when blank, ``updater``/``update_time`` unset."""
    row = {
        "flow_ins_id": instance_id,
        "proc_def_id": graph_id,
        "task_id": source.id,
        "source_node_code": source.id,
        "source_node_name": source.title,
        "source_node_type": source.type,
        "target_node_code": target.id,
        "target_node_name": target.title,
        "target_node_type": target.type,
        "assignee": assignee,
        "status": status,
        "form_id": form_id,
        "variables": go_marshal(variables),
        "message": message if message.strip() else None,
        "creator": auditor,
    }
    names = ", ".join([*row, "create_time"])
    values = ", ".join(
        [
            *(json_param(engine, k) if k == "variables" else f":{k}" for k in row),
            "CURRENT_TIMESTAMP",
        ]
    )
    with engine.begin() as conn:
        conn.execute(sa.text(f"INSERT INTO bpm_flow_task ({names}) VALUES ({values})"), row)


# -- reading as the Go plugin reads -------------------------------------------------------------


class GoParseError(AssertionError):
    """What Go's ``database/sql`` Scan or ``json.Unmarshal`` would return as an error."""


_INT64 = (-(2**63), 2**63 - 1)
_INTEGER_TOKEN = re.compile(r"-?(0|[1-9][0-9]*)")


def _no_float(token: str) -> Any:
    raise GoParseError(f"json: cannot unmarshal number {token} into Go value of type int")


def _reject_constant(token: str) -> Any:
    raise GoParseError(f"invalid character in JSON: {token}")


def go_unmarshal_states(raw: str | None) -> dict[str, int]:
    """``json.Unmarshal(states, &map[string]int{})``: an object of integer numbers only."""
    if raw is None:
        raise GoParseError("unexpected end of JSON input (states is NULL)")
    try:
        value = json.loads(raw, parse_float=_no_float, parse_constant=_reject_constant)
    except ValueError as exc:
        raise GoParseError(f"invalid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise GoParseError(f"json: cannot unmarshal {type(value).__name__} into map[string]int")
    for key, code in value.items():
        if isinstance(code, bool) or not isinstance(code, int):
            raise GoParseError(f"json: cannot unmarshal {code!r} into int (key {key!r})")
        if not _INT64[0] <= code <= _INT64[1]:
            raise GoParseError(f"json: number {code} overflows int (key {key!r})")
    return value


def _go_any(value: Any) -> Any:
    """``encoding/json`` into ``any``: numbers become float64."""
    if isinstance(value, dict):
        return {k: _go_any(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_any(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def go_unmarshal_object(raw: str | None, column: str, *, nullable: bool) -> dict[str, Any] | None:
    """``json.Unmarshal(raw, &map[string]any{})`` (numbers as float64); NULL only when the
    Go side scans the column into a nullable type."""
    if raw is None:
        if nullable:
            return None
        raise GoParseError(f"unexpected end of JSON input ({column} is NULL)")
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except ValueError as exc:
        raise GoParseError(f"{column}: invalid JSON: {exc}") from exc
    if value is None and nullable:
        return None
    if not isinstance(value, dict):
        raise GoParseError(f"{column}: cannot unmarshal {type(value).__name__} into map")
    return dict(_go_any(value))


def go_string(value: Any, column: str) -> str:
    """Scan into a Go ``string``: NULL is an error."""
    if value is None:
        raise GoParseError(f"sql: Scan error on column {column!r}: converting NULL to string")
    if not isinstance(value, str):
        raise GoParseError(f"{column}: expected text, got {value!r}")
    return value


def go_null_string(value: Any, column: str) -> str | None:
    return None if value is None else go_string(value, column)


def go_int(value: Any, column: str) -> int:
    """Scan into a Go ``int``/``int64``: NULL is an error."""
    if value is None:
        raise GoParseError(f"sql: Scan error on column {column!r}: converting NULL to int")
    if isinstance(value, bool) or not isinstance(value, int):
        raise GoParseError(f"{column}: expected an integer, got {value!r}")
    return value


def go_null_int(value: Any, column: str) -> int | None:
    return None if value is None else go_int(value, column)


def go_time(value: Any, column: str) -> datetime:
    if value is None:
        raise GoParseError(f"sql: Scan error on column {column!r}: converting NULL to time.Time")
    if isinstance(value, str):  # SQLite keeps DATETIME as text
        return datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        raise GoParseError(f"{column}: expected a DATETIME, got {value!r}")
    return value


def _text_columns(engine: sa.Engine, columns: list[str], json_columns: set[str]) -> str:
    """Select list reading JSON columns as the text the server stores (what Go receives)."""
    if backend(engine) != "postgresql":
        return ", ".join(columns)
    return ", ".join(f"{c}::text AS {c}" if c in json_columns else c for c in columns)


@dataclass(frozen=True, kw_only=True)
class GoRepositoryRow:
    states: dict[str, int]
    vars: dict[str, Any] | None
    graph: Any


def go_read_instance(engine: sa.Engine, instance_id: str) -> GoRepositoryRow:
    """The Go plugin's read of an instance row: ``states`` into ``map[string]int`` (strict),
    ``vars`` into ``map[string]any``; the ``graph`` value as JSON (a document or an id)."""
    select = _text_columns(engine, ["states", "vars", "graph"], {"states", "vars", "graph"})
    with engine.connect() as conn:
        row = conn.execute(
            sa.text(f"SELECT {select} FROM bpm_flow_repository WHERE instant_id = :i"),
            {"i": instance_id},
        ).one()
    graph = None if row.graph is None else json.loads(row.graph)
    return GoRepositoryRow(
        states=go_unmarshal_states(row.states),
        vars=go_unmarshal_object(row.vars, "vars", nullable=True),
        graph=graph,
    )


@dataclass(frozen=True, kw_only=True)
class GoTaskRow:
    """A ``bpm_flow_task`` row scanned into the Go struct described in the module docstring."""

    id: int
    flow_ins_id: str
    proc_def_id: str
    task_id: str
    source_node_code: str
    source_node_name: str
    source_node_type: str
    target_node_code: str
    target_node_name: str
    target_node_type: str
    assignee: str
    status: int
    form_id: int | None
    variables: dict[str, Any]
    message: str | None
    creator: str
    create_time: datetime
    updater: str | None
    update_time: datetime | None


_TASK_COLUMNS = [
    "id",
    "flow_ins_id",
    "proc_def_id",
    "task_id",
    "source_node_code",
    "source_node_name",
    "source_node_type",
    "target_node_code",
    "target_node_name",
    "target_node_type",
    "assignee",
    "status",
    "form_id",
    "variables",
    "message",
    "creator",
    "create_time",
    "updater",
    "update_time",
]


def go_read_tasks(engine: sa.Engine, instance_id: str) -> list[GoTaskRow]:
    """Every history row of an instance, oldest first, scanned strictly."""
    select = _text_columns(engine, _TASK_COLUMNS, {"variables"})
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(f"SELECT {select} FROM bpm_flow_task WHERE flow_ins_id = :i ORDER BY id"),
            {"i": instance_id},
        ).all()
    return [_scan_task(row._mapping) for row in rows]


def _node_type(value: Any, column: str) -> str:
    text = go_string(value, column)
    if text not in NODE_TYPES:
        raise GoParseError(f"{column}: {text!r} is not a NodeType name")
    return text


def _scan_task(row: Any) -> GoTaskRow:
    status = go_int(row["status"], "status")
    if status not in STATE_CODES:
        raise GoParseError(f"status: {status} is not a TaskState code")
    updater = go_null_string(row["updater"], "updater")
    update_time = row["update_time"]
    return GoTaskRow(
        id=go_int(row["id"], "id"),
        flow_ins_id=go_string(row["flow_ins_id"], "flow_ins_id"),
        proc_def_id=go_string(row["proc_def_id"], "proc_def_id"),
        task_id=go_string(row["task_id"], "task_id"),
        source_node_code=go_string(row["source_node_code"], "source_node_code"),
        source_node_name=go_string(row["source_node_name"], "source_node_name"),
        source_node_type=_node_type(row["source_node_type"], "source_node_type"),
        target_node_code=go_string(row["target_node_code"], "target_node_code"),
        target_node_name=go_string(row["target_node_name"], "target_node_name"),
        target_node_type=_node_type(row["target_node_type"], "target_node_type"),
        assignee=go_string(row["assignee"], "assignee"),
        status=status,
        form_id=go_null_int(row["form_id"], "form_id"),
        variables=go_unmarshal_object(row["variables"], "variables", nullable=False) or {},
        message=go_null_string(row["message"], "message"),
        creator=go_string(row["creator"], "creator"),
        create_time=go_time(row["create_time"], "create_time"),
        updater=updater,
        update_time=None if update_time is None else go_time(update_time, "update_time"),
    )
