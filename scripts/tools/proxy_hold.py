#!/usr/bin/env python3
"""An HTTP/2 client that makes a server buffer as much as it will (python3 stdlib only).

    python3 scripts/tools/proxy_hold.py --target 127.0.0.1:4434 [--streams 256] [--seconds 5]

Opens one TLS h2 connection, advertises the largest windows HTTP/2 allows (2^31-1 per stream
and for the connection), opens --streams requests of /bytes/10000000000 and never reads: the
server may send whatever its own limits let it buffer. Holds the connection --seconds, then
prints one line of JSON: how many streams it opened and the bytes it received before it
stopped reading (its socket buffers'), and exits. Used by the proxy's memory test.
"""

import argparse
import json
import socket
import ssl
import time

from soak_h2 import PREFACE, HEADERS, END_STREAM, END_HEADERS, WINDOW_UPDATE, frame, settings, request_block

MAX_WINDOW = 2**31 - 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--path", default="/bytes/10000000000")
    a = ap.parse_args()
    host, port = a.target.rsplit(":", 1)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    raw = socket.create_connection((host, int(port)), timeout=10)
    # A small receive buffer: the server's data waits on its side, not in this socket.
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    tls = ctx.wrap_socket(raw, server_hostname="localhost")
    assert tls.selected_alpn_protocol() == "h2", tls.selected_alpn_protocol()
    out = PREFACE + settings([(4, MAX_WINDOW), (3, 1000)])
    out += frame(WINDOW_UPDATE, 0, 0, (MAX_WINDOW - 65535).to_bytes(4, "big"))
    for i in range(a.streams):
        block = request_block(2, a.path, "localhost")
        out += frame(HEADERS, END_STREAM | END_HEADERS, 1 + 2 * i, block)
    tls.sendall(out)
    # Read what arrives for a moment (the server's SETTINGS, the first heads), then stop.
    got = 0
    tls.settimeout(0.5)
    try:
        while got < 256 * 1024:
            d = tls.recv(65536)
            if not d:
                break
            got += len(d)
    except (socket.timeout, ssl.SSLError):
        pass
    time.sleep(a.seconds)
    print(json.dumps({"streams": a.streams, "received": got}), flush=True)
    tls.close()


if __name__ == "__main__":
    main()
