"""Client CPU instructions per approval, counted by valgrind: a noise-free companion to sql_bench.

Usage: ``python bench/client_instructions.py [--instances 100] [--variants "flow,b'"]``. Needs
``valgrind`` on the PATH and the MariaDB/MySQL server of ``FLOW_MYSQL_DSN`` (default as in
``sql_bench.py``); the script creates its own throwaway database and drops it afterwards.

Throughput on a small shared machine moves by ±10 % from round to round; the number of
instructions the client process executes does not (callgrind counts them, the same total for
the same work whatever else the machine does). Each variant of ``sql_bench.py`` runs twice, each
time in a process of its own under callgrind — once with warm-up only, once with
``--instances`` more OA instances driven to their end — and the difference is divided by the
approvals. What it leaves
out: the server's work, waiting, and how well the CPU caches serve the code (a walk costs
about three times more per instruction between database calls than in a hot loop).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import sql_bench  # noqa: E402

VARIANTS = sql_bench.SHORT_NAMES
BASE_HEADER = "vs (b')"
WARM_UP = 20


def child(variant: str, instances: int, dsn: str) -> None:
    """Set up ``variant``, warm it up, then drive ``instances`` instances (run under valgrind)."""
    run, close = sql_bench.VARIANTS[variant](dsn, [0])
    tag = uuid.uuid4().hex[:8]
    try:
        for n in range(WARM_UP + instances):
            run(f"{tag}-{n}")
    finally:
        close()


def instructions(variant: str, instances: int, dsn: str) -> int:
    """Instructions callgrind counted for one child process."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--child",
        variant,
        str(instances),
        dsn,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=100, help="instances counted")
    parser.add_argument("--variants", default="flow,b'", help=f"from {','.join(VARIANTS)}")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    unknown = [key for key in args.variants.split(",") if key not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    names = [VARIANTS[key] for key in args.variants.split(",")]
    dsn, drop = sql_bench.prepared_database(os.environ.get("FLOW_MYSQL_DSN", sql_bench.DEFAULT_DSN))
    try:
        counts = {}
        for name in names:
            warm_only = instructions(name, 0, dsn)
            counted = instructions(name, args.instances, dsn)
            counts[name] = (counted - warm_only) / (2 * args.instances)
        base = counts.get(VARIANTS["b'"])
        print(f"{'variant':42} {'instructions/approval':>22} {BASE_HEADER:>7}")
        for name, count in counts.items():
            ratio = f"{count / base:.0%}" if base else "-"
            print(f"{name:42} {count:>22,.0f} {ratio:>7}")
    finally:
        drop()


if __name__ == "__main__":
    main()
