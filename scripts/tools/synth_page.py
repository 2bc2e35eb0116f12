#!/usr/bin/env python3
"""Writes scenarios/pages/median-page.har: a synthetic page shaped after the HTTP Archive's
published medians for a desktop page (its "State of the Web" reports and the Web Almanac's
Page Weight chapter, 2022-2024: about 2 MB and 70-80 requests, JavaScript about 0.5 MB,
images about 1 MB, a few web fonts, a third of requests to third parties). The per-type
counts and sizes below are round figures chosen to match those totals, not a recorded page.

Run: python3 scripts/tools/synth_page.py > scenarios/pages/median-page.har
The output is deterministic (sizes come from a fixed seed).
"""
import json
import random
import sys
from datetime import datetime, timedelta, timezone

rnd = random.Random(2024)
T0 = datetime(2024, 6, 1, 12, 0, 0, tzinfo=timezone.utc)
entries = []


def split(total, n):
    """n sizes summing to total, uneven as real pages are."""
    w = [rnd.lognormvariate(0, 0.8) for _ in range(n)]
    s = sum(w)
    sizes = [max(200, int(total * x / s)) for x in w]
    sizes[0] += total - sum(sizes)
    return sizes


def add(url, size, start_ms, time_ms, initiator, mime):
    e = {
        "startedDateTime": (T0 + timedelta(milliseconds=start_ms)).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "time": time_ms,
        "request": {"method": "GET", "url": url, "httpVersion": "HTTP/2.0", "headers": [], "queryString": [], "cookies": [], "headersSize": -1, "bodySize": 0},
        "response": {"status": 200, "statusText": "", "httpVersion": "HTTP/2.0", "headers": [], "cookies": [], "content": {"size": size, "mimeType": mime}, "redirectURL": "", "headersSize": -1, "bodySize": size},
        "cache": {},
        "timings": {"send": 0, "wait": time_ms / 2, "receive": time_ms / 2},
    }
    if initiator:
        e["_initiator"] = {"type": "parser", "url": initiator}
    entries.append(e)
    return url


site, cdn, fonts, tp1, tp2 = ("https://www.example.test", "https://cdn.example.test",
                              "https://fonts.example.test", "https://analytics.example.net",
                              "https://ads.example.net")
doc = add(f"{site}/", 30_000, 0, 120, None, "text/html")
# Level 1: what the HTML names.
css = [add(f"{site}/css/{i}.css", s, 130, 60, doc, "text/css") for i, s in enumerate(split(70_000, 6))]
js = [add(f"{cdn}/js/{i}.js", s, 130, 90, doc, "application/javascript") for i, s in enumerate(split(380_000, 16))]
imgs = [add(f"{site}/img/{i}.jpg", s, 135, 110, doc, "image/jpeg") for i, s in enumerate(split(820_000, 24))]
tag = add(f"{tp1}/tag.js", 60_000, 135, 80, doc, "application/javascript")
# Level 2: what style sheets and scripts reveal.
for i, s in enumerate(split(120_000, 4)):
    add(f"{fonts}/f/{i}.woff2", s, 260, 70, css[i % len(css)], "font/woff2")
for i, s in enumerate(split(180_000, 8)):
    add(f"{site}/img/bg{i}.png", s, 260, 60, css[i % len(css)], "image/png")
for i, s in enumerate(split(30_000, 5)):
    add(f"{site}/api/{i}.json", s, 280, 50, js[i], "application/json")
third = [add(f"{tp1}/collect/{i}.js", s, 260, 60, tag, "application/javascript") for i, s in enumerate(split(60_000, 3))]
# Level 3: third-party scripts pull in their own.
for i, s in enumerate(split(120_000, 6)):
    add(f"{tp2}/ad/{i}.js", s, 400, 90, third[i % len(third)], "application/javascript")

har = {"log": {"version": "1.2", "creator": {"name": "qbench scripts/tools/synth_page.py", "version": "1"},
               "pages": [], "entries": entries}}
json.dump(har, sys.stdout, indent=1)
sys.stdout.write("\n")
