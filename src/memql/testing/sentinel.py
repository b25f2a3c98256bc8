"""A Redis master, its replica and a Sentinel watching them, on free loopback ports: the
broadcast across a failover (`failover`)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from memql.testing.server import RedisProcess, free_port

SERVICE = "memql"


def _cli(port: int, *args: str) -> str:
    done = subprocess.run(
        ["redis-cli", "-p", str(port), *args], capture_output=True, check=True, timeout=10
    )
    return done.stdout.decode().strip()


class SentinelGroup:
    """`url` (`redis+sentinel://127.0.0.1:<port>/memql/0`) names the master the Sentinel
    watches; `failover()` promotes the replica, as Sentinel does when a master dies."""

    def __init__(self, workdir: Path) -> None:
        for name in ("master", "replica", "sentinel"):
            (workdir / name).mkdir(parents=True, exist_ok=True)
        self.master = RedisProcess(workdir / "master")
        self.master.start()
        self.replica = RedisProcess(
            workdir / "replica", "--replicaof", "127.0.0.1", str(self.master.port)
        )
        self.replica.start()
        self.sentinel_port = free_port()
        conf = workdir / "sentinel" / "sentinel.conf"
        conf.write_text(
            f"port {self.sentinel_port}\nbind 127.0.0.1\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.master.port} 1\n"
            f"sentinel down-after-milliseconds {SERVICE} 1000\n"
            f"sentinel failover-timeout {SERVICE} 5000\n",
            encoding="utf-8",
        )
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        self._sentinel = subprocess.Popen(
            [binary, str(conf), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"redis+sentinel://127.0.0.1:{self.sentinel_port}/{SERVICE}/0"
        self._wait(lambda: self.master_port() == self.master.port, "the Sentinel to start")
        self._wait(self._replica_known, "the Sentinel to see the replica")

    def master_port(self) -> int | None:
        try:
            reply = _cli(self.sentinel_port, "sentinel", "get-master-addr-by-name", SERVICE)
        except subprocess.CalledProcessError:
            return None
        lines = reply.splitlines()
        return int(lines[1]) if len(lines) == 2 else None

    def _replica_known(self) -> bool:
        try:
            return str(self.replica.port) in _cli(
                self.sentinel_port, "sentinel", "replicas", SERVICE
            )
        except subprocess.CalledProcessError:
            return False

    def failover(self) -> int:
        """Promote the replica now (`SENTINEL FAILOVER`); returns once the Sentinel names it
        the master. The old master becomes its replica and its clients are disconnected."""
        before = self.master_port()
        _cli(self.sentinel_port, "sentinel", "failover", SERVICE)
        self._wait(lambda: self.master_port() not in (None, before), "the failover")
        port = self.master_port()
        assert port is not None
        return port

    def _wait(self, done: object, what: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if callable(done) and done():
                return
            time.sleep(0.05)
        raise RuntimeError(f"timed out waiting for {what}")

    def stop(self) -> None:
        if self._sentinel.poll() is None:
            self._sentinel.terminate()
            self._sentinel.wait(10)
        self.replica.stop()
        self.master.stop()
