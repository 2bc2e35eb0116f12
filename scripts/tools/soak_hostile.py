#!/usr/bin/env python3
"""Hostile peers against a running qbench-server, for scripts/measure/soak.sh (python3 stdlib only).

    python3 scripts/tools/soak_hostile.py --target 127.0.0.1:4433 [--ca cert.pem] [--seconds 600]

Runs these patterns at once, each re-opening its connections whenever the server closes them,
until --seconds pass or SIGTERM/SIGINT arrives; then prints one line of JSON with what each
pattern saw (to stdout; progress and oddities go to stderr):

  half_hello   100 TCP connections that send half a TLS ClientHello and hold (handshake timeout)
  slow_head    20 TLS h1 connections with a partial request head: half hold, half drip a byte a
               second (header timeout)
  h2_idle      20 TLS h2 connections: preface + empty SETTINGS, then nothing (idle timeout)
  telemetry    10 TLS h2 connections, each pipelining 256 GET /_qbench/telemetry without reading;
               every other round reads the answers after 3 s (counting 200s and 429s), the
               others never read and wait for the server to close
  big_header   4 workers: h1 requests with a 1 MB header line (431)
  big_body     4 workers: 1 MB POST bodies, rotating h1 content-length, h1 chunked and h2 (413)
  quic_junk    UDP datagrams of random bytes (half shaped like QUIC long-header Initials)
"""

import argparse
import asyncio
import json
import os
import random
import signal
import ssl
import struct
import sys
import time
from collections import Counter

from soak_h2 import (
    PREFACE,
    DATA,
    HEADERS,
    RST_STREAM,
    SETTINGS,
    PING,
    GOAWAY,
    WINDOW_UPDATE,
    END_STREAM,
    ACK,
    END_HEADERS,
    PADDED,
    PRIORITY,
    frame,
    settings,
    request_block,
    status_of_block,
)

HALF_HELLO = bytes.fromhex("160301020001000001fc0303")
MB = 1024 * 1024

ARGS = None
STATS = {}
STOP = None


def stat(pattern):
    return STATS.setdefault(pattern, Counter())


def note_exc(c, e, prefix="err"):
    c[f"{prefix}_{type(e).__name__}"] += 1


def tls_context(alpn):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ARGS.ca:
        ctx.load_verify_locations(ARGS.ca)
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.set_alpn_protocols([alpn])
    return ctx


CONTEXTS = {}


async def tls_open(alpn):
    ctx = CONTEXTS.setdefault(alpn, tls_context(alpn))
    return await asyncio.wait_for(
        asyncio.open_connection(ARGS.host, ARGS.port, ssl=ctx, server_hostname=ARGS.host),
        20,
    )


def abort(w):
    if w is not None:
        try:
            w.transport.abort()
        except Exception:
            pass


async def read_to_eof(r, limit=None):
    """Reads until EOF (returns the bytes, up to `limit` kept) or raises."""
    kept = bytearray()
    while True:
        chunk = await r.read(65536)
        if not chunk:
            return bytes(kept)
        if limit is None or len(kept) < limit:
            kept += chunk


def status_of_h1(data):
    if data.startswith(b"HTTP/1.1 ") and len(data) >= 12:
        return data[9:12].decode("ascii", "replace")
    return None


async def pause_on_error(c, e):
    note_exc(c, e)
    await asyncio.sleep(0.5 + random.random())


# --- HTTP/2 -------------------------------------------------------------------------------


class H2:
    """A minimal HTTP/2 client connection: frames in and out, send-side flow control, and the
    :status (or RST_STREAM) of each stream."""

    def __init__(self, r, w, c):
        self.r, self.w, self.c = r, w, c
        self.conn_window = 65535
        self.initial_window = 65535
        self.stream_windows = {}
        self.window_changed = asyncio.Event()
        self.status = {}
        self.done = {}  # stream -> "status" | "rst:N"
        self.all_done = asyncio.Event()
        self.want = 0
        self.goaway = False
        self.headers_buf = {}

    @classmethod
    async def open(cls, c, extra=b""):
        r, w = await tls_open("h2")
        if w.get_extra_info("ssl_object").selected_alpn_protocol() != "h2":
            abort(w)
            raise ConnectionError("no h2 ALPN")
        w.write(PREFACE + settings([(1, 0)]) + extra)  # HEADER_TABLE_SIZE = 0
        return cls(r, w, c)

    def _finish(self, stream, how):
        if stream not in self.done:
            self.done[stream] = how
            self.c[f"status_{how}"] += 1
            self.window_changed.set()  # a sender waiting for credit stops once answered
            if self.want and len(self.done) >= self.want:
                self.all_done.set()

    async def read_frames(self):
        """Reads until EOF; returns normally then, raises on a broken connection."""
        r = self.r
        while True:
            try:
                head = await r.readexactly(9)
            except asyncio.IncompleteReadError as e:
                if e.partial:
                    self.c["partial_frame_at_eof"] += 1
                return
            n = int.from_bytes(head[:3], "big")
            ftype, flags = head[3], head[4]
            stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            payload = await r.readexactly(n)
            if ftype == SETTINGS and not flags & ACK:
                for k in range(0, len(payload) - 5, 6):
                    key, val = struct.unpack(">HI", payload[k : k + 6])
                    if key == 4:
                        delta = val - self.initial_window
                        self.initial_window = val
                        for s in self.stream_windows:
                            self.stream_windows[s] += delta
                self.w.write(frame(SETTINGS, ACK, 0))
                self.window_changed.set()
            elif ftype == WINDOW_UPDATE:
                inc = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
                if stream == 0:
                    self.conn_window += inc
                else:
                    self.stream_windows[stream] = self.stream_windows.get(stream, self.initial_window) + inc
                self.window_changed.set()
            elif ftype == HEADERS:
                p = payload
                if flags & PADDED:
                    p = p[1 : len(p) - p[0]]
                if flags & PRIORITY:
                    p = p[5:]
                if stream not in self.status:
                    s = status_of_block(p) if flags & END_HEADERS else "?"
                    self.status[stream] = s
                    self.c["headers"] += 1
                    self._finish(stream, s)
            elif ftype == DATA:
                self.c["data_bytes"] += n
            elif ftype == RST_STREAM:
                code = int.from_bytes(payload[:4], "big")
                self.c[f"rst_{code}"] += 1
                self._finish(stream, f"rst{code}")
            elif ftype == GOAWAY:
                code = int.from_bytes(payload[4:8], "big")
                self.c[f"goaway_{code}"] += 1
                self.goaway = True
            elif ftype == PING and not flags & ACK:
                self.w.write(frame(PING, ACK, 0, payload))

    async def send_body(self, stream, total):
        """Sends `total` bytes of DATA on `stream` within flow control; stops early once the
        stream is answered or reset. Returns the bytes sent."""
        sent = 0
        chunk = b"x" * 16384
        while sent < total and stream not in self.done:
            win = min(self.conn_window, self.stream_windows.get(stream, self.initial_window))
            if win <= 0:
                self.window_changed.clear()
                await asyncio.wait_for(self.window_changed.wait(), 15)
                continue
            n = min(win, 16384, total - sent)
            last = sent + n == total
            self.w.write(frame(DATA, END_STREAM if last else 0, stream, chunk[:n]))
            self.conn_window -= n
            self.stream_windows[stream] = self.stream_windows.get(stream, self.initial_window) - n
            sent += n
            await self.w.drain()
        return sent


# --- the patterns ---------------------------------------------------------------------------


async def held(c, r, opened):
    """Waits for the server to close a connection we only hold; records how long that took."""
    try:
        data = await read_to_eof(r, limit=256)
        c["closed_by_server"] += 1
        if data:
            c[f"got_{status_of_h1(data) or 'bytes'}"] += 1
    except (ConnectionError, ssl.SSLError, OSError) as e:
        note_exc(c, e, "reset")
    dt = time.monotonic() - opened
    c["held_s_total"] += dt
    c["held_s_max"] = max(c["held_s_max"], dt)
    c["held_s_min"] = dt if c["held_s_min"] == 0 else min(c["held_s_min"], dt)


async def stop(task):
    """Cancels a helper task and waits until it has ended."""
    task.cancel()
    try:
        await task
    except BaseException:
        pass


async def repeat(c, once, start_within=10.0, pause=0.0):
    """Runs `once(opened, n)` (the whole life of connection n) again and again, after a random
    start. `opened` collects the writers to abort when it ends; an error is counted and paused
    on, and cancellation ends the loop."""
    await asyncio.sleep(random.random() * start_within)
    n = 0
    while True:
        n += 1
        opened = []
        try:
            await once(opened, n)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            await pause_on_error(c, e)
        finally:
            for w in opened:
                abort(w)
        await asyncio.sleep(pause)


async def half_hello(i):
    c = stat("half_hello")

    async def once(opened, _n):
        r, w = await asyncio.wait_for(asyncio.open_connection(ARGS.host, ARGS.port), 20)
        opened.append(w)
        c["opened"] += 1
        w.write(HALF_HELLO)
        await held(c, r, time.monotonic())

    await repeat(c, once)


async def slow_head(i):
    c = stat("slow_head")
    drip = i % 2 == 1

    async def once(opened, _n):
        r, w = await tls_open("http/1.1")
        opened.append(w)
        c["opened"] += 1
        w.write(f"GET /bytes/1 HTTP/1.1\r\nhost: {ARGS.target}\r\nx-slow: ".encode())
        started = time.monotonic()
        if not drip:
            await held(c, r, started)
            return

        async def dripper():
            while True:
                await asyncio.sleep(1)
                w.write(b"a")
                await w.drain()

        t = asyncio.ensure_future(dripper())
        try:
            await held(c, r, started)
        finally:
            await stop(t)

    await repeat(c, once)


async def h2_idle(i):
    c = stat("h2_idle")

    async def once(opened, _n):
        h = await H2.open(c)
        opened.append(h.w)
        c["opened"] += 1
        started = time.monotonic()
        try:
            await h.read_frames()
            c["closed_by_server"] += 1
        except (ConnectionError, ssl.SSLError, OSError) as e:
            note_exc(c, e, "reset")
        dt = time.monotonic() - started
        c["held_s_total"] += dt
        c["held_s_max"] = max(c["held_s_max"], dt)
        c["held_s_min"] = dt if c["held_s_min"] == 0 else min(c["held_s_min"], dt)

    await repeat(c, once)


async def telemetry(i):
    c = stat("telemetry")
    n = 256
    blocks = b"".join(
        frame(HEADERS, END_STREAM | END_HEADERS, 2 * k + 1, request_block(2, "/_qbench/telemetry", ARGS.target))
        for k in range(n)
    )

    async def once(opened, rnd):
        h = await H2.open(c, blocks)
        opened.append(h.w)
        c["opened"] += 1
        c["requests"] += n
        if (i + rnd) % 2 == 0:
            # Let the answers pile up unread, then read them and hang up.
            await asyncio.sleep(3)
            h.want = n
            reader = asyncio.ensure_future(h.read_frames())
            try:
                await asyncio.wait_for(h.all_done.wait(), 20)
                c["rounds_read"] += 1
            except asyncio.TimeoutError:
                c["rounds_read_incomplete"] += 1
            finally:
                await stop(reader)
        else:
            # Never read: the server must close it on its own (idle timeout).
            started = time.monotonic()
            await asyncio.sleep(45)
            try:
                await asyncio.wait_for(read_to_eof(h.r, limit=0), 10)
                c["unread_closed_by_server"] += 1
            except asyncio.TimeoutError:
                c["unread_still_open_after_55s"] += 1
            except (ConnectionError, ssl.SSLError, OSError) as e:
                note_exc(c, e, "unread_reset")
            c["unread_held_s_total"] += time.monotonic() - started

    await repeat(c, once, start_within=5.0)


async def big_header(i):
    c = stat("big_header")
    head = f"GET /bytes/1 HTTP/1.1\r\nhost: {ARGS.target}\r\nx-big: ".encode() + b"a" * MB + b"\r\n\r\n"

    async def once(opened, _n):
        r, w = await tls_open("http/1.1")
        opened.append(w)
        c["opened"] += 1
        await h1_exchange(c, r, w, head)

    await repeat(c, once, start_within=0.0, pause=0.2)


async def h1_exchange(c, r, w, request):
    """Writes `request` while reading the answer; counts the status (or how it broke)."""

    async def writer():
        try:
            w.write(request)
            await w.drain()
            c["sent_whole"] += 1
        except (ConnectionError, ssl.SSLError, OSError) as e:
            note_exc(c, e, "write")

    t = asyncio.ensure_future(writer())
    try:
        data = await asyncio.wait_for(read_to_eof(r, limit=256), 20)
        c[f"status_{status_of_h1(data) or ('none' if not data else 'junk')}"] += 1
    except asyncio.TimeoutError:
        c["read_timeout"] += 1
    except (ConnectionError, ssl.SSLError, OSError) as e:
        note_exc(c, e, "read")
    finally:
        await stop(t)


async def big_body(i):
    c = stat("big_body")

    async def once(opened, rnd):
        kind = ("h1_length", "h1_chunked", "h2")[(i + rnd) % 3]
        if kind == "h2":
            h = await H2.open(c)
            opened.append(h.w)
            c["opened_h2"] += 1
            h.want = 1
            h.w.write(frame(HEADERS, END_HEADERS, 1, request_block(3, "/bytes/1", ARGS.target)))
            reader = asyncio.ensure_future(h.read_frames())
            try:
                sent = await asyncio.wait_for(h.send_body(1, MB), 30)
                c["h2_body_bytes_sent"] += sent
                await asyncio.wait_for(h.all_done.wait(), 20)
            finally:
                await stop(reader)
            return
        r, w = await tls_open("http/1.1")
        opened.append(w)
        c[f"opened_{kind}"] += 1
        if kind == "h1_length":
            req = f"POST /bytes/1 HTTP/1.1\r\nhost: {ARGS.target}\r\ncontent-length: {MB}\r\n\r\n".encode() + b"x" * MB
        else:
            chunk = b"4000\r\n" + b"x" * 0x4000 + b"\r\n"
            req = (
                f"POST /bytes/1 HTTP/1.1\r\nhost: {ARGS.target}\r\ntransfer-encoding: chunked\r\n\r\n".encode()
                + chunk * (MB // 0x4000)
                + b"0\r\n\r\n"
            )
        sub = Counter()
        await h1_exchange(sub, r, w, req)
        for k, v in sub.items():
            c[f"{kind}_{k}"] += v

    await repeat(c, once, start_within=0.0, pause=0.2)


class Junk(asyncio.DatagramProtocol):
    def __init__(self, c):
        self.c = c

    def datagram_received(self, data, addr):
        self.c["replies"] += 1
        # A version negotiation packet has a long header with version 0.
        if len(data) >= 5 and data[0] & 0x80 and data[1:5] == b"\0\0\0\0":
            self.c["version_negotiation"] += 1

    def error_received(self, exc):
        note_exc(self.c, exc)


async def quic_junk(i, rate=100):
    c = stat("quic_junk")
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(lambda: Junk(c), remote_addr=(ARGS.host, ARGS.port))
    try:
        k = 0
        while True:
            k += 1
            size = random.choice((40, 600, 1200, 1350))
            if k % 2:
                # Looks like an Initial: long header, QUIC v1, random connection ids and junk.
                dcid = os.urandom(8)
                d = bytes([0xC3]) + b"\0\0\0\x01" + bytes([8]) + dcid + bytes([8]) + os.urandom(8)
                d += os.urandom(max(0, size - len(d)))
                c["sent_initial_like"] += 1
            else:
                d = os.urandom(size)
                c["sent_random"] += 1
            transport.sendto(d)
            await asyncio.sleep(1 / rate)
    finally:
        transport.close()


PATTERNS = [
    (half_hello, 100),
    (slow_head, 20),
    (h2_idle, 20),
    (telemetry, 10),
    (big_header, 4),
    (big_body, 4),
    (quic_junk, 1),
]


async def main():
    global STOP
    STOP = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, STOP.set)
    started = time.monotonic()
    only = set(ARGS.only.split(",")) if ARGS.only else None
    tasks = []
    for fn, n in PATTERNS:
        if only and fn.__name__ not in only:
            continue
        stat(fn.__name__)
        tasks += [asyncio.ensure_future(fn(i)) for i in range(n)]
    try:
        await asyncio.wait_for(STOP.wait(), ARGS.seconds)
    except asyncio.TimeoutError:
        pass
    for t in tasks:
        t.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    crashed = [r for r in results if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)]
    for r in crashed:
        print(f"soak_hostile: a task died: {r!r}", file=sys.stderr)
    out = {"seconds": round(time.monotonic() - started, 1), "tasks_died": len(crashed), "patterns": {}}
    for name, c in STATS.items():
        d = {}
        for k, v in sorted(c.items()):
            d[k] = round(v, 1) if isinstance(v, float) else v
        if c.get("held_s_total") and (c.get("closed_by_server", 0) + sum(v for k, v in c.items() if k.startswith("reset_"))):
            closes = c.get("closed_by_server", 0) + sum(v for k, v in c.items() if k.startswith("reset_"))
            d["held_s_mean"] = round(c["held_s_total"] / closes, 1)
        out["patterns"][name] = d
    print(json.dumps(out, sort_keys=True), flush=True)


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", required=True, help="HOST:PORT of the qbench-server")
    p.add_argument("--ca", help="the server's certificate (PEM); without it, no verification")
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--only", help="comma-separated pattern names to run (default: all)")
    a = p.parse_args()
    host, _, port = a.target.rpartition(":")
    a.host, a.port = host.strip("[]"), int(port)
    return a


if __name__ == "__main__":
    ARGS = parse()
    asyncio.run(main())
