"""Running the web app under Hypercorn until SIGINT/SIGTERM/SIGHUP, then shutting down in
order: stop accepting, finish in-flight requests, stop the core (sessions revoked,
owner files closed)."""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import os
import resource
import signal
import socket
import ssl
from contextlib import ExitStack
from typing import Any, Iterable

from hypercorn.asyncio import serve
from hypercorn.config import Config
from hypercorn.utils import LifespanFailureError

from skald_host.core.host import StartupError
from skald_host.core.storage import secure_dir
from skald_host.core.storage.data_dir_lock import DataDirLock
from skald_host.logs import configure_logging
from skald_host.settings import Settings
from skald_host.web.app import create_app

log = logging.getLogger(__name__)


def hypercorn_config(settings: Settings) -> Config:
    config = Config()
    host = settings.server.host
    config.bind = [f"[{host}]:{settings.server.port}" if ":" in host else f"{host}:{settings.server.port}"]
    config.websocket_max_message_size = settings.server.websocket_max_message_bytes
    config.h11_max_incomplete_size = 64 * 1024
    # Hypercorn's idle timer runs from the connection's start (or its last response)
    # until a request's headers are complete: it also cuts a client that dribbles them.
    config.keep_alive_timeout = settings.server.header_timeout_seconds
    config.graceful_timeout = 5.0
    # No overall limit on the boot: Hypercorn's (60 s by default) counted every plugin's
    # registration and ``startup`` together, and ended the process with a bare
    # LifespanTimeoutError when they added up to it, although each is contained on its
    # own: bounded by the hook timeout, or failed once it returns when it blocked the
    # loop (docs/plugins.md "What the host checks"). One plugin that slept 60 s in a
    # hook killed the server at every start (robustness probe). The boot's own steps
    # end by themselves, so the only limit left was one contained failures could reach.
    config.startup_timeout = None  # type: ignore[assignment]  # asyncio.wait_for(None): no limit
    config.accesslog = None  # paths can name conversations; keep them out of files by default
    config.errorlog = logging.getLogger("hypercorn.error")
    if settings.server.tls_cert:
        config.certfile = str(settings.resolve(settings.server.tls_cert))
        config.keyfile = str(settings.resolve(settings.server.tls_key))
    return config


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address as a hop of X-Forwarded-For may write it: bare, ``[v6]:port`` or
    ``v4:port``; an IPv4-mapped IPv6 address as the IPv4 one."""
    text = text.strip().strip('"')
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def forwarded_client(peer: str, forwarded_for: Iterable[str], trusted: tuple[Network, ...]) -> str:
    """The client's address: the peer's, unless the peer is a trusted proxy; then the
    rightmost X-Forwarded-For hop that is not itself a trusted proxy. Hops left of it
    were written by the client and prove nothing; a hop that is no address ends the
    walk at the last trusted one."""
    current = _ip(peer)
    if current is None or not any(current in network for network in trusted):
        return peer
    hops = [hop for value in forwarded_for for hop in value.split(",")]
    for hop in reversed(hops):
        address = _ip(hop)
        if address is None:
            break
        current = address
        if not any(address in network for network in trusted):
            break
    return str(current)


class TrustedProxies:
    """ASGI middleware that puts the client's address (``forwarded_client``) into the
    scope, so every reader of ``request.remote_addr`` — the login limits, the first
    run's sign-in, plugins — gets the same one. Hypercorn's ``ProxyFixMiddleware`` does
    not fit: it trusts the headers of any peer (a count of hops, not addresses) and also
    rewrites the scheme and Host from X-Forwarded-Proto/-Host, which would let a client
    choose the Host that first-run setup checks."""

    def __init__(self, app: Any, trusted: tuple[Network, ...]) -> None:
        self.app = app
        self.trusted = trusted

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        peer = scope.get("client")
        if scope["type"] in ("http", "websocket") and peer:
            forwarded = [v.decode("latin-1") for k, v in scope.get("headers", ()) if k.lower() == b"x-forwarded-for"]
            client = forwarded_client(peer[0], forwarded, self.trusted)
            if client != peer[0]:
                scope = {**scope, "client": (client, 0)}
        await self.app(scope, receive, send)


def behind_trusted_proxies(app: Any, settings: Settings) -> Any:
    """``app`` with the client's address resolved when ``server.trusted_proxies`` lists
    any (nothing changes without them). Every server of the app — ``skald serve``, the
    test host — passes it through here."""
    trusted = settings.server.trusted_proxy_networks
    if trusted:
        app.asgi_app = TrustedProxies(app.asgi_app, trusted)
    return app


def disable_core_dumps() -> None:
    """A core file would hold decrypted pages and keys in the clear (check B1)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _quiet_cancelled_connections(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Python 3.11's ``asyncio.start_server`` asks a cancelled connection task for its
    exception (fixed in 3.12) and logs the CancelledError as an error with a traceback:
    that is Hypercorn ending a connection still open at shutdown, not a fault."""
    if isinstance(context.get("exception"), asyncio.CancelledError) and "connection_made" in repr(context.get("handle")):
        log.debug("a connection still open at shutdown was closed")
        return
    loop.default_exception_handler(context)


#: Each stops the server gracefully (README "Running").
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def listening_address(scheme: str, host: str, port: int) -> str:
    """The URL the server listens on, an IPv6 host in brackets (``http://[::1]:8080``)."""
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


async def announce_first_admin(app: Any, address: str) -> None:
    """On a fresh data dir the console said only where it listens: one line more says
    what to do next (a newcomer did not know the first admin is made in the browser)."""
    from skald_host.core.identity.setup import needs_setup

    core = app.config.get("SKALD_CORE")
    if core is not None and await needs_setup(core.users):
        log.info("no admin yet: open %s in a browser to create the first admin (or run 'skald setup')", address)


async def serve_forever(settings: Settings) -> None:
    app = create_app(settings, control_socket=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # SIGHUP (the terminal closed, ``kill -HUP``) stops as gracefully as SIGTERM: its
    # default ended the process on the spot, a running answer never marked interrupted.
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    scheme = "https" if settings.server.tls_cert else "http"

    @app.before_serving
    async def announce() -> None:
        """Registered after ``create_app``'s core start, so it runs only once that succeeded:
        a refused start says ``cannot start``, never ``listening`` first."""
        address = listening_address(scheme, settings.server.host, settings.server.port)
        log.info("skald listening on %s (data in %s)", address, settings.data_dir)
        await announce_first_admin(app, address)

    async def shutdown_trigger() -> None:
        await stop.wait()
        core = app.config.get("SKALD_CORE")
        if core is not None:  # open sockets close now, not when the graceful timeout cuts them
            core.announce_stop()
            await core.interrupt_turns()  # and no turn goes on acting through the graceful wait

    loop.set_exception_handler(_quiet_cancelled_connections)
    try:
        await serve(behind_trusted_proxies(app, settings), hypercorn_config(settings), shutdown_trigger=shutdown_trigger)  # type: ignore[arg-type]
    except LifespanFailureError:
        refused = app.config.get("SKALD_STARTUP_ERROR")
        if refused is None:
            raise
        if isinstance(refused, StartupError):
            raise StartupError(str(refused)) from None
        raise StartupError(f"{refused} (SKALD_STRICT_PLUGINS=1 stops the host when a plugin fails)") from None
    log.info("skald stopped")


def check_address(config: Config) -> None:
    """Bind the addresses once before anything starts: a port in use is a one-line
    ``StartupError``, not a traceback after the core and its plugins came up. (The
    sockets are closed again for Hypercorn to bind; it sets SO_REUSEADDR.) The TLS
    certificate and key are loaded here too, as Hypercorn will: a missing file or a key
    that does not belong to the certificate once failed only after everything started."""
    if config.ssl_enabled:
        advice = "check server.tls_cert and server.tls_key: both files readable, the key the certificate's own"
        for what, path in (("certificate", config.certfile), ("key", config.keyfile)):
            if not os.path.isfile(path):
                raise StartupError(f"cannot use the TLS {what} {path}: there is no such file ({advice})")
        try:
            config.create_ssl_context()
        except (OSError, ssl.SSLError) as exc:
            reason = str(exc) if isinstance(exc, ssl.SSLError) else exc.strerror or str(exc)
            raise StartupError(f"cannot use the TLS certificate {config.certfile} with the key {config.keyfile}: {reason} ({advice})") from None
    try:
        sockets = config.create_sockets()
    except OSError as exc:
        where = f"cannot listen on {', '.join(config.bind)}: {exc.strerror or exc}"
        if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
            raise StartupError(
                f"{where} (the host is not an address this machine has: use 127.0.0.1 for this machine only,"
                " 0.0.0.0 or :: for every interface, or one of its own addresses, with --host or SKALD_HOST)"
            ) from None
        if exc.errno == errno.EADDRINUSE:
            raise StartupError(f"{where} (is another server there? choose another port with --port or SKALD_PORT)") from None
        raise StartupError(f"{where} (choose another address or port with --host and --port)") from None
    for sock in (*sockets.secure_sockets, *sockets.insecure_sockets):
        sock.close()


def run(settings: Settings) -> None:
    """Serve until stopped, holding the data dir for this process alone (raises
    DataDirBusy when another process has it, StartupError when this user cannot write it
    or the log file), logging as ``log`` says once the data dir is held."""
    disable_core_dumps()
    with ExitStack() as held:
        try:
            secure_dir(settings.data_dir)
            held.enter_context(DataDirLock(settings.data_dir))
        except OSError as exc:  # a read-only or foreign data dir: one line, not a traceback
            which = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(settings.data_dir) else ""
            raise StartupError(
                f"cannot use the data dir {settings.data_dir}: {exc.strerror or exc}{which}"
                " (it must be a folder this user can write; choose another with --data-dir or SKALD_DATA_DIR)"
            ) from None
        # Logging after the data dir: the log file lies in it by default, and a data dir
        # this user cannot write was reported as a log file to fix (newcomer report 7).
        configure_logging(settings)
        check_address(hypercorn_config(settings))
        asyncio.run(serve_forever(settings))
