"""Real TCP proxies that cut connections as a network outage would: in front of the embedded
PostgreSQL's unix socket (`Proxy`), in front of a server for a browser (`TcpProxy`), and a gate
in front of a server that closes and opens again on the same port (`Gate`)."""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import parse_qs, urlparse


async def splice(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """Copy bytes both ways until either side closes."""

    async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        dst.close()

    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


class Proxy:
    """127.0.0.1:<port> -> the server of `database_url` (its unix socket, or its TCP port).
    `stop()` closes the listener and every open connection, as a network outage would."""

    def __init__(self, database_url: str) -> None:
        parsed = urlparse(database_url)
        sockets = parse_qs(parsed.query).get("host")
        # the embedded server's unix socket, or a server on TCP (`--reads-on-standby`)
        self.socket_path = f"{sockets[0]}/.s.PGSQL.5432" if sockets else None
        self.address = (parsed.hostname or "127.0.0.1", parsed.port or 5432)
        self.user = parsed.username or "postgres"
        self.database = parsed.path.lstrip("/") or "postgres"
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"postgresql://{self.user}@127.0.0.1:{port}/{self.database}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.socket_path is not None:
            up_reader, up_writer = await asyncio.open_unix_connection(self.socket_path)
        else:
            up_reader, up_writer = await asyncio.open_connection(*self.address)
        self._writers |= {writer, up_writer}

        await splice(reader, writer, up_reader, up_writer)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.close()
        self._writers.clear()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)


class TcpProxy:
    """127.0.0.1:<port> -> `target` (host, port), for cutting a browser off a server: `cut()`
    drops every open connection; while `refusing`, new connections are closed at once."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.refusing = False
        self.url = ""
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self.url

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._writers |= {writer, up_writer}

        await splice(reader, writer, up_reader, up_writer)

    def cut(self) -> None:
        for writer in self._writers:
            writer.close()
        self._writers.clear()

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)


class Gate:
    """A TCP forwarder in front of the server that can be cut (every connection dropped and
    new ones refused) and opened again on the same port, as a network outage would."""

    def __init__(self, target: str) -> None:
        parsed = urlparse(target)
        self.host, self.target_port = parsed.hostname or "127.0.0.1", parsed.port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.host, self.target_port)
        self._writers |= {writer, up_writer}

        await splice(reader, writer, up_reader, up_writer)

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        self._writers.clear()
        await self._server.wait_closed()
