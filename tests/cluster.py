"""Real processes for multi-instance tests: a private redis-server and `memql serve` instances
on the tests' database. Every process started here is stopped by its owner, even on failure."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import free_port


class RedisProcess:
    """A redis-server of our own on a free port (never the shared one), restartable in place."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._workdir = workdir
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed"
        self._proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self._workdir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            ping = subprocess.run(
                ["redis-cli", "-p", str(self.port), "ping"], capture_output=True, check=False
            )
            if ping.stdout.strip() == b"PONG":
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None


class Instance:
    """One `memql serve` process."""

    def __init__(
        self,
        database_url: str,
        redis_url: str | None,
        logdir: Path,
        name: str,
        env: dict[str, str] | None = None,
    ) -> None:
        """`redis_url` None: the in-memory broadcast (one instance); `env` adds settings."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.name = name
        self.log = logdir / f"{name}.log"
        environ = {
            **os.environ,
            "DATABASE_URL": database_url,
            "MEMQL_HOST": "127.0.0.1",
            "MEMQL_PORT": str(self.port),
            "MEMQL_GRAPHIQL": "false",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            **({"REDIS_URL": redis_url} if redis_url else {}),
            **(env or {}),
        }
        if not redis_url:
            environ.pop("REDIS_URL", None)
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "memql.cli", "serve"],
                env=environ,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    async def ready(self, within: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + within
        async with httpx.AsyncClient(base_url=self.url, timeout=2) as http:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited:\n{self.log.read_text()[-3000:]}")
                try:
                    response = await http.get("/readyz")
                    body: dict[str, Any] = response.json()
                    if response.status_code == 200 and body["broadcast"]["state"] == "up":
                        return body
                except (httpx.HTTPError, ValueError, KeyError):
                    pass
                await asyncio.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready:\n{self.log.read_text()[-3000:]}")

    async def readyz(self) -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=self.url, timeout=5) as http:
            body: dict[str, Any] = (await http.get("/readyz")).json()
            return body

    def kill(self) -> None:
        """SIGKILL: the process ends without any cleanup, as in a crash."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
