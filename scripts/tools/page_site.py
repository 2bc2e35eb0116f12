#!/usr/bin/env python3
"""The static test page for scripts/tools/record_har.py, generated deterministically.

    python3 scripts/tools/page_site.py DIR     # writes the site into DIR, prints the manifest

Every file has an exact, distinct size; the padding is a repeated pattern, so the
repository holds no binaries and two builds are byte-identical. Dependency levels:

  0  /index.html
  1  two stylesheets, two scripts, two <img> (found by the HTML parser)
  2  the font (main.css @font-face), the background image (layout.css),
     the JSON (app.js fetch()), analytics.js (app.js inserts a <script>)
  3  the thumbnail (analytics.js fetch())

Each object's Chrome initiator (CDP, or `_initiator` in a DevTools HAR) names
the object one level up, so initiators and start/finish times give the same
levels.

The page references exactly these 12 URLs once each, and sets
<link rel="icon" href="data:,"> so the browser does not ask for /favicon.ico.
"""

import json
import os
import struct
import sys
import zlib

# path -> (size in bytes, dependency level, content type caddy sends)
MANIFEST = {
    "/index.html":       (6_000, 0, "text/html"),
    "/css/main.css":     (24_000, 1, "text/css"),
    "/css/layout.css":   (9_000, 1, "text/css"),
    "/js/vendor.js":     (120_000, 1, "text/javascript"),
    "/js/app.js":        (40_000, 1, "text/javascript"),
    "/js/analytics.js":  (3_000, 2, "text/javascript"),
    "/img/logo.png":     (12_000, 1, "image/png"),
    "/img/hero.png":     (180_000, 1, "image/png"),
    "/fonts/body.woff2": (48_000, 2, "font/woff2"),
    "/img/bg.png":       (30_000, 2, "image/png"),
    "/data/items.json":  (5_000, 2, "application/json"),
    "/img/thumb.png":    (7_000, 3, "image/png"),
}

PATTERN = b"qbench test page padding 0123456789 abcdefghijklmnopqrstuvwxyz\n"


def pad(n):
    if n < 0:
        raise ValueError("content longer than its size")
    return (PATTERN * (n // len(PATTERN) + 1))[:n]


def text(size, head, tail, open_c, close_c):
    """head + comment(padding) + tail, exactly size bytes."""
    head, tail = head.encode(), tail.encode()
    fixed = len(head) + len(open_c) + len(close_c) + len(tail)
    return head + open_c + pad(size - fixed) + close_c + tail


def png(size):
    """A valid 1x1 grey PNG, padded with a private ancillary chunk ('qbPd')."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    sig = b"\x89PNG\r\n\x1a\n"
    ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    # zlib stream with one stored block: filter byte 0, grey 0x80 (fixed bytes,
    # independent of the zlib version)
    raw = b"\x00\x80"
    idat_data = (b"\x78\x01\x01" + struct.pack("<HH", len(raw), len(raw) ^ 0xFFFF)
                 + raw + struct.pack(">I", zlib.adler32(raw)))
    idat = chunk(b"IDAT", idat_data)
    iend = chunk(b"IEND", b"")
    fixed = len(sig) + len(ihdr) + len(idat) + len(iend) + 12
    return sig + ihdr + chunk(b"qbPd", pad(size - fixed)) + idat + iend


def font(size):
    # Not a usable font (the browser logs "Failed to decode downloaded font" and
    # falls back), but it is requested and downloaded whole like a real one.
    head = b"wOF2\x00\x01\x00\x00"
    return head + pad(size - len(head))


def build(root):
    """Write the site into root; return {path: size}."""
    s = {p: v[0] for p, v in MANIFEST.items()}
    files = {}
    files["/index.html"] = text(s["/index.html"], """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>qbench test page</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/css/main.css">
<link rel="stylesheet" href="/css/layout.css">
<script src="/js/vendor.js"></script>
<script src="/js/app.js" defer></script>
</head>
<body>
<header class="banner"><img src="/img/logo.png" width="32" height="32" alt="logo"></header>
<main>
<h1>qbench test page</h1>
<p class="body-text">Text set in the web font, so the browser fetches it.</p>
<img src="/img/hero.png" width="64" height="32" alt="hero">
<ul id="items"></ul>
</main>
""", "</body>\n</html>\n", b"<!--\n", b"-->\n")
    files["/css/main.css"] = text(s["/css/main.css"], """@font-face {
  font-family: "QbenchBody";
  src: url("/fonts/body.woff2") format("woff2");
  font-display: swap;
}
body { font-family: "QbenchBody", sans-serif; margin: 0; }
h1 { font-size: 20px; }
""", "", b"/*\n", b"*/\n")
    files["/css/layout.css"] = text(s["/css/layout.css"], """.banner {
  height: 40px;
  background-image: url("/img/bg.png");
}
#items { list-style: none; }
""", "", b"/*\n", b"*/\n")
    files["/js/vendor.js"] = text(s["/js/vendor.js"], """window.qbenchVendor = { loaded: Date.now() };
""", "", b"/*\n", b"*/\n")
    # Scripts reveal objects with fetch() and by inserting a <script>: Chromium
    # gives those requests the CDP initiator "script" with the calling script on
    # the stack. An <img> inserted by a script would not do: its request starts
    # outside the script (initiator "other", or "parser" with the document's URL).
    # Bodies are read with arrayBuffer(): after blob(), Playwright's HAR says
    # content.size 0, and showing a blob: URL adds a blob: entry to the HAR.
    files["/js/app.js"] = text(s["/js/app.js"], """// level 2: insert analytics.js, fetch() the JSON
var thumb = new Promise(function (resolve) { window.qbenchThumb = resolve; });
var s = document.createElement("script");
s.src = "/js/analytics.js";
document.head.appendChild(s);
var list = fetch("/data/items.json")
  .then(function (r) { return r.json(); })
  .then(function (data) {
    var ul = document.getElementById("items");
    data.items.forEach(function (name) {
      var li = document.createElement("li");
      li.textContent = name;
      ul.appendChild(li);
    });
    return data.thumbBytes;
  });
window.qbenchDone = Promise.all([list, thumb]).then(function (v) {
  return v[0] === v[1] ? "done" : "thumbnail has " + v[1] + " bytes, want " + v[0];
});
""", "", b"/*\n", b"*/\n")
    files["/js/analytics.js"] = text(s["/js/analytics.js"], """// level 3: fetch() the thumbnail
fetch("/img/thumb.png")
  .then(function (r) { return r.arrayBuffer(); })
  .then(function (b) { window.qbenchThumb(b.byteLength); });
""", "", b"/*\n", b"*/\n")
    head = ('{"items": ["one", "two", "three"], "thumbBytes": %d, "pad": "'
            % s["/img/thumb.png"])
    body = pad(s["/data/items.json"] - len(head) - 3).replace(b"\n", b" ")
    files["/data/items.json"] = head.encode() + body + b'"}\n'
    for p in ("/img/logo.png", "/img/hero.png", "/img/bg.png", "/img/thumb.png"):
        files[p] = png(s[p])
    files["/fonts/body.woff2"] = font(s["/fonts/body.woff2"])

    assert set(files) == set(MANIFEST)
    for p, data in files.items():
        if len(data) != s[p]:
            raise AssertionError(f"{p}: {len(data)} bytes, want {s[p]}")
        dest = os.path.join(root, p.lstrip("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            f.write(data)
    return s


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: page_site.py DIR")
    build(sys.argv[1])
    print(json.dumps({p: {"size": v[0], "level": v[1]} for p, v in MANIFEST.items()},
                     indent=2))
