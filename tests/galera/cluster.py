"""A local 3-node MariaDB Galera cluster for tests and benchmarks (loopback only).

Three ``mariadbd`` processes on free 127.0.0.1 ports, data under one directory: node 1
bootstraps the cluster (``--wsrep-new-cluster``), nodes 2 and 3 join it one after the other
(state transfer by ``rsync``), and :meth:`GaleraCluster.start` returns once
``wsrep_cluster_size`` is 3 and every node is ``Synced`` (about 20 s). The cluster's layout is
written to ``cluster.json`` in that directory, so another process (the CLI's ``stop``, a test
that kills and restarts a node) can find it again.

Command line (from the repository root)::

    python -m tests.galera.cluster start DIR      # prints export lines (FLOW_GALERA_*)
    python -m tests.galera.cluster stop DIR

Needs Debian's ``galera-4``, ``rsync`` and ``mariadb-server``; ``start`` installs the first two
with apt-get when they are missing and it runs as root.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

PROVIDERS = ("/usr/lib/galera/libgalera_smm.so", "/usr/lib/libgalera_smm.so")
CLUSTER_NAME = "flow_galera_test"
NODES = 3
START_TIMEOUT = 120.0
STOP_TIMEOUT = 60.0


class ClusterError(RuntimeError):
    """The cluster could not be started, reached or stopped; the message says which node."""


@dataclass(frozen=True, kw_only=True)
class Node:
    """One ``mariadbd``: its SQL port and the Galera ports (group, IST, SST)."""

    index: int
    port: int
    gcomm_port: int
    ist_port: int
    sst_port: int
    home: str

    @property
    def socket(self) -> str:
        return f"{self.home}/mysqld.sock"

    @property
    def dsn(self) -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/test?charset=utf8mb4"

    @property
    def pid_file(self) -> str:
        return f"{self.home}/mysqld.pid"


def provider() -> str | None:
    """The Galera library's path, or ``None`` when galera-4 is not installed."""
    return next((p for p in PROVIDERS if os.path.exists(p)), None)


def install_missing() -> None:
    """``apt-get install galera-4 rsync`` when either is missing (needs root)."""
    need = []
    if provider() is None:
        need.append("galera-4")
    if shutil.which("rsync") is None:
        need.append("rsync")
    if not need:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", *need], check=True, env=env)


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class GaleraCluster:
    """Start, stop, kill and restart the nodes of a cluster living under ``root``."""

    def __init__(self, root: str | Path, nodes: list[Node] | None = None) -> None:
        self.root = Path(root).resolve()
        self.nodes: list[Node] = nodes or []
        self._spawned: dict[int, int] = {}  # node index -> pid of the mariadbd we started

    # -- layout ---------------------------------------------------------------------------
    @classmethod
    def load(cls, root: str | Path) -> GaleraCluster:
        """The cluster described by ``root/cluster.json``."""
        path = Path(root) / "cluster.json"
        try:
            data = json.loads(path.read_text())
        except OSError as exc:
            raise ClusterError(f"No cluster under {root}: {exc}") from exc
        return cls(root, [Node(**node) for node in data["nodes"]])

    @property
    def dsns(self) -> list[str]:
        return [node.dsn for node in self.nodes]

    def _plan(self) -> None:
        ports = _free_ports(4 * NODES)
        self.nodes = [
            Node(
                index=i + 1,
                port=ports[4 * i],
                gcomm_port=ports[4 * i + 1],
                ist_port=ports[4 * i + 2],
                sst_port=ports[4 * i + 3],
                home=str(self.root / f"node{i + 1}"),
            )
            for i in range(NODES)
        ]
        (self.root / "cluster.json").write_text(
            json.dumps({"nodes": [asdict(n) for n in self.nodes]}, indent=2)
        )

    def _config(self, node: Node) -> Path:
        lib = provider()
        if lib is None:
            raise ClusterError("galera-4 is not installed (apt-get install galera-4 rsync)")
        members = ",".join(f"127.0.0.1:{n.gcomm_port}" for n in self.nodes)
        options = ";".join(
            [
                f"base_port={node.gcomm_port}",
                f"gmcast.listen_addr=tcp://127.0.0.1:{node.gcomm_port}",
                f"ist.recv_addr=127.0.0.1:{node.ist_port}",
                "gcache.size=64M",
                # Loopback: notice a killed peer in a few seconds, not the WAN defaults.
                "evs.suspect_timeout=PT3S",
                "evs.inactive_timeout=PT6S",
                "evs.install_timeout=PT6S",
                "evs.keepalive_period=PT0.5S",
                "gmcast.peer_timeout=PT3S",
                "pc.wait_prim_timeout=PT30S",
            ]
        )
        text = f"""[mariadbd]
user=mysql
datadir={node.home}/data
socket={node.socket}
pid-file={node.pid_file}
log-error={node.home}/error.log
port={node.port}
bind-address=127.0.0.1
skip-name-resolve
skip-log-bin
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
innodb_buffer_pool_size=64M
innodb_log_file_size=32M
innodb_flush_log_at_trx_commit=2
max_connections=300
wsrep_on=ON
wsrep_provider={lib}
wsrep_cluster_name={CLUSTER_NAME}
wsrep_cluster_address=gcomm://{members}
wsrep_node_name=node{node.index}
wsrep_node_address=127.0.0.1:{node.gcomm_port}
wsrep_node_incoming_address=127.0.0.1:{node.port}
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:{node.sst_port}
wsrep_provider_options="{options}"
wsrep_slave_threads=2
"""
        path = Path(node.home) / "my.cnf"
        path.write_text(text)
        return path

    # -- processes ------------------------------------------------------------------------
    def start(self) -> GaleraCluster:
        """Create the data directories, bootstrap node 1, join nodes 2 and 3; returns once
        the cluster has 3 synced members. Raises :class:`ClusterError` (with the node's error
        log tail) when a node does not come up in time."""
        if shutil.which("mariadbd") is None or provider() is None:
            raise ClusterError("mariadb-server and galera-4 are needed")
        self.root.mkdir(parents=True, exist_ok=True)
        self._plan()
        first = self.nodes[0]
        self.root.chmod(0o755)  # the server runs as mysql (rsync SST drops root's rights)
        for node in self.nodes:
            Path(node.home, "data").mkdir(parents=True)
            self._config(node)
            shutil.chown(node.home, "mysql", "mysql")
            shutil.chown(Path(node.home, "data"), "mysql", "mysql")
        subprocess.run(
            [
                "mariadb-install-db",
                f"--defaults-file={first.home}/my.cnf",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--user=mysql",
            ],
            check=True,
            capture_output=True,
        )
        self._spawn(first, bootstrap=True)
        self._wait_synced(first, size=1)
        self.sql(first, "CREATE DATABASE IF NOT EXISTS test")
        for size, node in enumerate(self.nodes[1:], start=2):
            self._spawn(node)
            self._wait_synced(node, size=size)
        return self

    def _spawn(self, node: Node, *, bootstrap: bool = False) -> None:
        """Start ``mariadbd`` detached (through ``sh ... &``): it outlives this process and
        leaves no child behind to reap."""
        args = ["mariadbd", f"--defaults-file={node.home}/my.cnf"]
        if bootstrap:
            args.append("--wsrep-new-cluster")
        log = str(Path(node.home) / "stdout.log")
        started = subprocess.run(
            [
                "sh",
                "-c",
                'cd "$1" && shift && "$@" >>"$LOG" 2>&1 </dev/null & echo $!',
                "sh",
                node.home,
                *args,
            ],
            env={**os.environ, "LOG": log},
            capture_output=True,
            text=True,
            check=True,
        )
        self._spawned[node.index] = int(started.stdout.strip())

    def pid(self, node: Node) -> int | None:
        try:
            return int(Path(node.pid_file).read_text().strip())
        except (OSError, ValueError):
            return None

    def kill(self, node: Node) -> None:
        """SIGKILL ``node`` (a crash: no clean shutdown, its clients' connections drop)."""
        pid = self.pid(node)
        if pid is None:
            raise ClusterError(f"node{node.index} is not running")
        os.kill(pid, signal.SIGKILL)
        _wait_gone(pid, STOP_TIMEOUT)
        Path(node.pid_file).unlink(missing_ok=True)

    def restart(self, node: Node) -> None:
        """Start a stopped or killed ``node`` again; returns once it rejoined and is synced."""
        self._spawn(node)
        self._wait_synced(node, size=NODES)

    def stop(self) -> None:
        """SIGTERM every node, wait for each to exit (SIGKILL after a timeout), keep the data."""
        pids = [pid for pid in (self.pid(n) for n in reversed(self.nodes)) if pid is not None]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for pid in pids:
            if not _wait_gone(pid, STOP_TIMEOUT):
                os.kill(pid, signal.SIGKILL)
                _wait_gone(pid, 10)

    def destroy(self) -> None:
        """:meth:`stop`, then remove the directory."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- status ---------------------------------------------------------------------------
    def sql(self, node: Node, statement: str) -> list[list[str]]:
        """Run ``statement`` on ``node`` as root over its Unix socket (the ``mariadb`` client:
        no Python socket is left to the garbage collector while a node is still starting).
        Raises :class:`ClusterError` when the node does not answer."""
        done = subprocess.run(
            ["mariadb", f"--socket={node.socket}", "-uroot", "-N", "-B", "-e", statement],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if done.returncode != 0:
            raise ClusterError(f"node{node.index}: {done.stderr.strip()}")
        return [line.split("\t") for line in done.stdout.splitlines()]

    def status(self, node: Node) -> dict[str, str]:
        rows = self.sql(node, "SHOW GLOBAL STATUS LIKE 'wsrep_%'")
        return {row[0]: row[1] if len(row) > 1 else "" for row in rows}

    def _wait_synced(self, node: Node, *, size: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        last = "not started"
        while time.monotonic() < deadline:
            pid = self._spawned.get(node.index)
            if pid is not None and not _alive(pid):
                last = "mariadbd exited"
                break
            try:
                status = self.status(node)
                last = (
                    f"size {status.get('wsrep_cluster_size')}, "
                    f"state {status.get('wsrep_local_state_comment')}"
                )
                if (
                    int(status.get("wsrep_cluster_size", "0")) >= size
                    and status.get("wsrep_local_state_comment") == "Synced"
                    and status.get("wsrep_ready") == "ON"
                ):
                    return
            except (ClusterError, subprocess.TimeoutExpired) as exc:  # not up yet
                last = str(exc)
            time.sleep(0.25)
        raise ClusterError(
            f"node{node.index} not synced in a cluster of {size} "
            f"({last}); error log:\n{_tail(Path(node.home) / 'error.log')}"
        )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.galera.cluster")
    parser.add_argument("command", choices=["start", "stop"])
    parser.add_argument("dir", help="directory for the nodes' data (created by start)")
    args = parser.parse_args(argv)
    if args.command == "stop":
        GaleraCluster.load(args.dir).destroy()
        return 0
    install_missing()
    started = time.monotonic()
    cluster = GaleraCluster(args.dir).start()
    print(f"export FLOW_GALERA_DIR={cluster.root}")
    print(f"export FLOW_GALERA_DSNS={','.join(cluster.dsns)}")
    print(f"# 3-node cluster synced in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
