"""CLI of the server: ``preflab serve`` and ``preflab user ...``.

Main's ``preflab/cli.py`` mounts :data:`user_app` as ``user`` and :func:`serve` as ``serve``,
lazily (``LAZY_COMMANDS``: this module is imported when they run). Thin: parse, call :mod:`preflab.server.auth`, print.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import NoReturn

import typer

from ..cli_common import engine_for, fail, loaded_settings
from ..settings import get_settings

# The app and database modules import FastAPI and friends: loaded inside the commands, so that
# mounting these commands keeps `preflab --help` fast.

user_app = typer.Typer(help="Accounts of the collection server.", no_args_is_help=True)


def _checked_url(db: str | None) -> str:
    """``--db`` checked and migrated by the main CLI's rule (:func:`preflab.cli.engine_for`):
    a missing SQLite file, a bad scheme or an unreachable server is one line and exit 2; only
    ``preflab init`` creates a database."""
    engine = engine_for(db)
    url = engine.url.render_as_string(hide_password=False)
    engine.dispose()
    return url


def usable_cores() -> int:
    """Cores this process may run on (its affinity; else the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def workers_warning(workers: int, cores: int) -> str | None:
    """What to say when ``--workers`` asks for more processes than there are cores: each one
    adds CPU a cycle (more processes, fewer requests per wake-up, more backends on
    PostgreSQL) and none adds a core. Measured on 2 cores (docs/server.md, "Figures"): 4 workers
    served 778-858 cycles/s where 2 served 878-928."""
    if workers <= cores:
        return None
    return (
        f"warning: {workers} workers on {cores} usable core(s): workers beyond the cores add CPU "
        f"a request and no throughput (measured on 2 cores: 4 workers ~10 % slower than 2); "
        f"consider --workers {cores}"
    )


def _db(db: str | None):
    from .database import Database

    return Database(_checked_url(db), pool_size=2, max_overflow=2)


def _auth_failed(exc: Exception, username: str | None = None) -> NoReturn:
    """An account command refused: a name taken, a user not there, a weak password are bad input
    (exit 2, as the README says); anything else is a failure (exit 1)."""
    status = getattr(exc, "status", 500)
    fix = (
        f"; create the account with `preflab user create {username}`"
        if status == 404 and username
        else ""
    )
    fail(f"{exc}{fix}", 2 if 400 <= status < 500 else 1)


def checked_base_url(base_url: str) -> str:
    """``--base-url`` as the link's prefix: an http(s) address with a host, or exit 2."""
    from urllib.parse import urlsplit

    parts = urlsplit(base_url.strip())
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        fail(
            f"--base-url {base_url!r} is not a web address; give the app's address as its "
            "users open it, e.g. https://labels.example.org or http://127.0.0.1:8000",
            2,
        )
    if parts.query or parts.fragment:
        fail(f"--base-url {base_url!r}: give the address without ?query or #fragment", 2)
    return base_url.strip().rstrip("/")


def check_port_free(host: str, port: int) -> None:
    """Refuse a port another process listens on before starting workers (exit 2, one line);
    uvicorn would log a bind error and exit 3."""
    import errno
    import socket

    if not 0 < port < 65536:
        fail(f"--port {port}: give a port number between 1 and 65535", 2)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        fail(f"--host {host!r}: cannot resolve it ({exc.strerror or exc})", 2)
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                fail(
                    f"--port {port}: another process already listens on {host}:{port}; stop it "
                    f"or choose another port (e.g. --port {port + 100})",
                    2,
                )
            fail(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})", 2)


@user_app.command("create")
def user_create(
    username: str,
    admin: bool = typer.Option(False, "--admin", help="Site administrator."),
    password_stdin: bool = typer.Option(
        False, "--password-stdin", help="Read the password from stdin."
    ),
    email: str | None = typer.Option(None, "--email"),
    db: str | None = typer.Option(
        None, "--db", help="Database URL or SQLite path (default $PREFLAB_DB)."
    ),
) -> None:
    """Create an account. There is no default password: one is generated and printed once,
    or read from stdin with --password-stdin."""
    from .. import audit
    from .auth import AuthError, create_user

    password = sys.stdin.readline().rstrip("\n") if password_stdin else None
    database = _db(db)
    try:
        with database.writing() as s:
            user, pw = create_user(s, username, password=password, is_admin=admin, email=email)
            audit.record(
                s, audit.cli_actor(), "user.created", f"user:{username}", {"is_admin": admin}
            )
    except AuthError as exc:
        _auth_failed(exc)
    typer.echo(f"created {'admin' if admin else 'user'} {user.username}")
    if password is None:
        typer.echo(f"password: {pw}")
        typer.echo("(shown once; change it after the first login)")


@user_app.command("token")
def user_token(
    username: str,
    name: str = typer.Option("cli", "--name"),
    db: str | None = typer.Option(None, "--db"),
) -> None:
    """Create an API token for a user (printed once)."""
    from .auth import AuthError, create_api_token, get_user

    database = _db(db)
    try:
        with database.writing() as s:
            token, _ = create_api_token(s, get_user(s, username), name=name)
    except AuthError as exc:
        _auth_failed(exc, username)
    typer.echo(token)


@user_app.command("reset-link")
def user_reset_link(
    username: str,
    base_url: str = typer.Option(
        "http://127.0.0.1:8000",
        "--base-url",
        help="Address of the web app the user opens (the link is this plus /reset/TOKEN).",
    ),
    hours: float = typer.Option(
        24.0, "--hours", min=0.1, max=24 * 14, help="Hours until the link expires."
    ),
    db: str | None = typer.Option(
        None, "--db", help="Database URL or SQLite path (default $PREFLAB_DB or ./preflab.db)."
    ),
) -> None:
    """Print a single-use password reset link for a user (the web UI's mechanism: setting a new
    password with it ends the user's sessions and revokes their API tokens). Hand it over
    yourself; it is shown once."""
    from .auth import AuthError, create_reset_link, get_user

    base_url = checked_base_url(base_url)
    database = _db(db)
    try:
        with database.writing() as s:
            token = create_reset_link(
                s, get_user(s, username), created_by=None, ttl=timedelta(hours=hours)
            )
    except AuthError as exc:
        _auth_failed(exc, username)
    finally:
        database.dispose()
    typer.echo(f"{base_url}/reset/{token}")
    typer.echo(f"(single use, expires in {hours:g} h; shown once)", err=True)


def serve(
    ctx: typer.Context,
    db: str | None = typer.Option(
        None, "--db", help="Database URL or SQLite path (default $PREFLAB_DB or ./preflab.db)."
    ),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8000, "--port"),
    workers: int = typer.Option(1, "--workers", min=1, max=64),
    exports_dir: Path = typer.Option(Path("preflab-exports"), "--exports-dir"),
    session_hours: float = typer.Option(12.0, "--session-hours"),
    secure_cookies: bool = typer.Option(
        False,
        "--secure-cookies",
        help="Secure cookies even over plain HTTP (HTTPS requests get them anyway).",
    ),
    trusted_proxy: list[str] = typer.Option(
        [],
        "--trusted-proxy",
        help="Address or network of a reverse proxy "
        "whose X-Forwarded-For/-Proto to believe (repeat; default: none).",
    ),
    header_timeout: float | None = typer.Option(
        None,
        "--header-timeout",
        min=0.1,
        help="Seconds a client has to send a request's headers "
        "(env var PREFLAB_HEADER_TIMEOUT_S; default 10).",
    ),
    max_body_mb: float = typer.Option(2.0, "--max-body-mb"),
    log_level: str | None = typer.Option(
        None,
        "--log-level",
        help="debug ... critical (env var PREFLAB_LOG_LEVEL; default warning).",
    ),
    log_format: str | None = typer.Option(
        None, "--log-format", help="text or json (env var PREFLAB_LOG_FORMAT; default text)."
    ),
    demo: bool = typer.Option(
        False, "--demo", help="Serve a fresh demo (PandaLM data, demo accounts) on SQLite."
    ),
) -> None:
    """Run the collection server (uvicorn). The schema is brought up to date once, here."""
    if demo:  # webui branch: see preflab.server.webdemo
        from .webdemo import serve_demo

        return serve_demo(host, port, Path("preflab-demo"))
    import uvicorn

    from .app import CONFIG_ENV, ServerConfig
    from .transport import HEADER_TIMEOUT_ENV, HeaderDeadlineProtocol

    level = _server_logging(ctx, log_level, log_format)
    warning = workers_warning(workers, usable_cores())
    if warning:
        typer.echo(warning, err=True)
    config = ServerConfig(
        db_url=_checked_url(db),
        exports_dir=exports_dir.resolve(),
        session_ttl=timedelta(hours=session_hours),
        secure_cookies=secure_cookies,
        max_body_bytes=int(max_body_mb * 1024 * 1024),
        trusted_proxies=list(trusted_proxy),
        header_timeout_s=header_timeout or get_settings().header_timeout_s,
    )
    check_port_free(host, port)  # after --db: a missing database is named first
    os.environ[CONFIG_ENV] = config.to_env()
    os.environ[HEADER_TIMEOUT_ENV] = str(config.header_timeout_s)
    # proxy_headers=False: uvicorn would believe X-Forwarded-For from 127.0.0.1 (any local
    # process); the app believes only --trusted-proxy addresses (ServerConfig.trusted_proxies).
    uvicorn.run(
        "preflab.server.app:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=level,
        log_config=None,  # uvicorn's records go to the handler configure_logging installed
        access_log=False,
        timeout_keep_alive=30,
        proxy_headers=False,
        http=HeaderDeadlineProtocol,
    )


def _server_logging(ctx: typer.Context, log_level: str | None, log_format: str | None) -> str:
    """Configure logging here (serve's options over the global ones over the environment) and
    hand the result to the worker processes through the environment; returns the level."""
    from ..logs import configure_logging
    from ..settings import env_var

    given = {"log_level": log_level, "log_format": log_format}
    options = {name: value or (ctx.obj or {}).get(name) for name, value in given.items()}
    settings = loaded_settings(**options)
    configure_logging(settings.log_level, json=settings.log_format == "json")
    os.environ[env_var("log_level")] = settings.log_level
    os.environ[env_var("log_format")] = settings.log_format
    return settings.log_level


serve_app = typer.Typer(add_completion=False)
serve_app.command("serve")(serve)
serve_app.add_typer(user_app, name="user")
