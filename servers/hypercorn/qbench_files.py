"""Static files for qbench's hypercorn contestant: an ASGI 3 application.

qbench starts hypercorn (``pip install 'hypercorn[h3]'``) as the server side of a benchmark,
with QBENCH_DOCROOT naming the directory to serve:

    QBENCH_DOCROOT=/srv/files hypercorn --config cfg.toml /abs/path/qbench_files.py:app

GET and HEAD only. Every 200 is ``application/octet-stream`` with a content-length, and its
body is streamed in fixed chunks so that a large file never sits whole in the application
(over HTTP/3 hypercorn applies no backpressure, so aioquic buffers the whole body regardless).
Nothing is logged: the benchmark measures serving, not logging.

hypercorn 0.18 can fail to exit on SIGTERM while an HTTP/3 connection is open (its QUIC timer
task swallows the cancellation meant for the server), so once the app has started it ends the
process EXIT_DEADLINE seconds after SIGTERM or SIGINT if hypercorn has not by then. Run with
``workers = 0`` so that the signalled process is the one serving, and ``graceful_timeout``
below EXIT_DEADLINE so that an orderly exit gets its chance first.
"""

import asyncio
import os
import signal
import stat
import threading

CHUNK = 256 * 1024
EXIT_DEADLINE = 1.5

_docroot = os.environ.get("QBENCH_DOCROOT")
if not _docroot:
    raise RuntimeError("QBENCH_DOCROOT is not set")
# Resolved once, so that the containment check below compares resolved paths on both sides.
ROOT = os.path.realpath(_docroot)
if not os.path.isdir(ROOT):
    raise RuntimeError(f"QBENCH_DOCROOT {_docroot!r} is not a directory")


def _empty(status, extra=()):
    return {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-length", b"0"), *extra],
    }


def _resolve(path):
    """The regular file's path under ROOT that `path` names, or None."""
    try:
        # realpath follows symlinks, so a link inside the root that points out of it is refused
        # along with `..`.
        target = os.path.realpath(os.path.join(ROOT, path.lstrip("/")))
    except ValueError:  # an embedded NUL
        return None
    if os.path.commonpath((ROOT, target)) != ROOT:
        return None
    return target


def _open(target):
    """(file, size) for a regular file, or None."""
    try:
        # O_NONBLOCK so that a FIFO under the root cannot stall the event loop on open.
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb", buffering=0), st.st_size


async def _watch_disconnect(receive, gone):
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()


async def _http(scope, receive, send):
    method = scope["method"]
    if method not in ("GET", "HEAD"):
        await send(_empty(405, [(b"allow", b"GET, HEAD")]))
        await send({"type": "http.response.body"})
        return
    # ASGI servers hand over `path` already percent-decoded.
    target = _resolve(scope["path"])
    opened = _open(target) if target is not None else None
    if opened is None:
        await send(_empty(404))
        await send({"type": "http.response.body"})
        return

    file, size = opened
    with file:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-length", str(size).encode()),
                    (b"content-type", b"application/octet-stream"),
                ],
            }
        )
        if method == "HEAD" or size == 0:
            await send({"type": "http.response.body"})
            return
        # A client that goes away mid-body should not cost the rest of the file's reads; for a
        # one-chunk body the watcher would cost more than it saves.
        gone = asyncio.Event()
        watcher = asyncio.ensure_future(_watch_disconnect(receive, gone)) if size > CHUNK else None
        try:
            left = size
            while left > 0 and not gone.is_set():
                # Blocking reads on purpose: benchmark files sit in the page cache, where a read
                # is cheaper than a hop to a thread pool.
                data = file.read(min(CHUNK, left))
                if not data:  # truncated since fstat; the client sees a short body
                    break
                left -= len(data)
                await send({"type": "http.response.body", "body": data, "more_body": left > 0})
            if left > 0 and not gone.is_set():
                await send({"type": "http.response.body"})
        except OSError:
            pass  # ASGI 2.4: sending to a closed connection may raise
        finally:
            if watcher is not None:
                watcher.cancel()


def _arm_exit_deadline():
    # signal.signal only works on the main thread; hypercorn's asyncio worker runs the app there.
    if threading.current_thread() is not threading.main_thread():
        return

    def on_signal(signum, frame):
        timer = threading.Timer(EXIT_DEADLINE, os._exit, (0,))
        timer.daemon = True
        timer.start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        # hypercorn's own handler still runs: it was installed with loop.add_signal_handler,
        # which is driven by the wakeup fd that CPython writes whatever the Python-level handler.
        # An ignored signal (SIGINT in a multi-worker child) stays ignored.
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, on_signal)


async def _lifespan(receive, send):
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            _arm_exit_deadline()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def app(scope, receive, send):
    if scope["type"] == "http":
        await _http(scope, receive, send)
    elif scope["type"] == "lifespan":
        await _lifespan(receive, send)
    # Other scopes (websocket) are declined by returning, as ASGI allows.
