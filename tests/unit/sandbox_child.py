"""Runs sandbox payloads in a child process with a memory limit; prints one JSON result each.

Not a test module: ``tests/unit/test_sandbox_resources.py`` starts it with a timeout, so a
payload that escapes the limits fails the test instead of hanging or swapping the machine.
Input (stdin): a JSON list of ``[mode, text]`` with mode ``condition``, ``script`` or ``check``.
Output (stdout): a JSON list of ``[error type or "ok", seconds, message]``.
"""

from __future__ import annotations

import array
import collections
import datetime as dt
import json
import resource
import sys
import time
import types
from decimal import Decimal
from typing import Any

MEMORY_LIMIT = 1_000_000_000


def _data() -> dict[str, Any]:
    from flow.context import FlowContext

    deep: list[Any] = []
    for _ in range(5000):
        deep = [deep]
    return {
        "s": "ab",
        "n": 10**9,
        "big": "x" * 60_000,
        "tabs": "\t" * 9_000,
        "many": ["a"] * 60_000,
        "many2": ["a"] * 60_000,
        "table": {97: "x" * 50_000},
        "d": Decimal("1e9999999"),
        "day": dt.date(2026, 1, 2),
        "fmt": "%c" * 4_000,
        "deep": deep,
        "m": {},
        "bigdict": {str(i): i for i in range(60_000)},
        "rows": [[i] * 300 for i in range(300)],
        "numbers": range(10**12),
        # sequences of types the sandbox does not list
        "ba": bytearray(b"x"),
        "bfmt": bytearray(b"%0999999999d"),
        "ar": array.array("b", [0]),
        "dq": collections.deque([0]),
        "ul": collections.UserList([0]),
        "us": collections.UserString("x"),
        "usfmt": collections.UserString("%0999999999d"),
        "ns": types.SimpleNamespace(s="x" * 100_000),
        "fc": FlowContext.of("i-2", {"k" * 99_900: 1}),
    }


def _run(mode: str, text: str) -> list[Any]:
    from flow.context import FlowContext
    from flow.evaluation import SafeEvaluation, check_condition, check_script

    check_condition("warm_up == 1")  # imports done before the clock starts
    evaluation = SafeEvaluation()
    ctx = FlowContext.of("i-1", _data())
    started = time.perf_counter()
    try:
        if mode == "check":
            check_condition(text)
            check_script(text) if "\n" in text else None
        elif mode == "condition":
            evaluation.run_condition(ctx, text)
        else:
            evaluation.run_task(ctx, text)
        outcome, message = "ok", ""
    except BaseException as exc:  # the parent judges every outcome
        outcome, message = type(exc).__name__, str(exc)[:300]
    return [outcome, round(time.perf_counter() - started, 3), message]


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    if "--no-int-digit-limit" in sys.argv:
        sys.set_int_max_str_digits(0)  # a host that lifted Python's own guard
    payloads = json.load(sys.stdin)
    json.dump([_run(mode, text) for mode, text in payloads], sys.stdout)


if __name__ == "__main__":
    main()
