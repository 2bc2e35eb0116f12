#!/usr/bin/env python3
"""Record a real HAR: headless chromium loads the test page (scripts/tools/page_site.py)
from caddy on 127.0.0.1.

    python3 scripts/tools/record_har.py OUT.har [--https]

Needs: apt chromium caddy (openssl for --https); pip playwright (no browser
download: it drives /usr/bin/chromium, or $CHROMIUM). See scripts/tools/record_har.md.

The HAR is Playwright's (record_har_content='omit': no bodies), pretty-printed,
with one field added per entry: `_initiator`, what Chrome's DevTools HAR export
holds, taken from the CDP Network.requestWillBeSent event of the same URL
(Playwright's HAR has no initiator). OUT is written only if the recording has
exactly the site's 12 URLs, each once, each 200, each content.size equal to the
file's size, the initiators giving each object its level in the site, and
caddy's access log showing each object requested once and nothing else. Prints
one line: entries, requests served, body bytes, initiators, objects per level,
HTTP versions.
"""

import argparse
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from urllib.parse import urlsplit

sys.dont_write_bytecode = True  # no scripts/__pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import page_site  # noqa: E402

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CADDY = os.environ.get("CADDY", "caddy")
SETTLE_MS = 500       # after the last expected object: time for any extra request
WAIT_S = 30           # for the page and all its levels


class Fail(Exception):
    pass


class Interrupted(BaseException):
    pass


def on_signal(signum, _frame):
    raise Interrupted(signal.Signals(signum).name)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_caddy(tmp, site, https):
    port = free_port()
    scheme = "https" if https else "http"
    glob = ["admin off", "default_bind 127.0.0.1",
            f"storage file_system {tmp}/caddy-data"]
    tls = ""
    if https:
        cert, key = f"{tmp}/cert.pem", f"{tmp}/key.pem"
        r = subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
             "-keyout", key, "-out", cert],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode:
            raise Fail("openssl: " + (r.stderr.strip().splitlines() or ["failed"])[-1])
        # no :80 redirect listener; no HTTP/3 (keep one TCP+TLS path, h2 via ALPN)
        glob += ["auto_https disable_redirects", "servers {\n\t\tprotocols h1 h2\n\t}"]
        tls = f"\ttls {cert} {key}\n"
    else:
        glob.append("auto_https off")
    caddyfile = f"{tmp}/Caddyfile"
    with open(caddyfile, "w") as f:
        f.write("{\n" + "".join(f"\t{g}\n" for g in glob) + "}\n"
                f"{scheme}://127.0.0.1:{port} {{\n"
                "\tbind 127.0.0.1\n" + tls +
                f"\troot * {site}\n"
                "\tfile_server\n"
                # what reached the server: the browser's own requests (such as
                # /favicon.ico) are in neither the HAR nor Playwright's events
                f"\tlog {{\n\t\toutput file {tmp}/access.log\n\t}}\n"
                "}\n")
    # caddy's autosave.json, certificate storage and the like stay in tmp
    env = dict(os.environ, HOME=tmp, XDG_CONFIG_HOME=f"{tmp}/xdg-config",
               XDG_DATA_HOME=f"{tmp}/xdg-data")
    log = open(f"{tmp}/caddy.log", "wb")
    try:
        proc = subprocess.Popen(
            [CADDY, "run", "--config", caddyfile, "--adapter", "caddyfile"],
            cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True)  # Ctrl-C reaches us, and we stop caddy
    except OSError as e:
        raise Fail(f"cannot start caddy: {e}")
    finally:
        log.close()
    deadline = time.monotonic() + 10
    while True:
        if proc.poll() is not None:
            raise Fail(f"caddy exited ({proc.returncode}): " + last_error(f"{tmp}/caddy.log"))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                stop(proc)
                raise Fail(f"caddy is not listening on 127.0.0.1:{port} after 10 s")
            time.sleep(0.05)
    return proc, f"{scheme}://127.0.0.1:{port}"


def last_error(path):
    try:
        lines = open(path, errors="replace").read().strip().splitlines()
    except OSError:
        return "no log"
    for line in reversed(lines):
        try:
            rec = json.loads(line)
            if rec.get("level") in ("error", "fatal"):
                return rec.get("error") or rec.get("msg", line)
        except ValueError:
            if line.strip():
                return line.strip()
    return lines[-1] if lines else "no log"


def stop(proc):
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def strays(tag):
    """Live processes whose command line holds tag (our unique temp dir)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{d}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if tag.encode() in cmd and state not in "ZX":
            pids.append(int(d))
    return pids


def become_subreaper():
    """Chromium's orphans (zygotes, crashpad handlers) get reparented to us
    instead of PID 1, so reap_strays() can collect them: no zombies left."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def reap_zombies():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def reap_strays(tag):
    """Chromium's helpers (zygotes, crashpad handlers) outlive browser.close()
    for a moment; wait for them, then kill what is left. They are ours: every
    one has our temp dir in its command line (profile, HOME for crashpad).
    Called once caddy and Playwright's driver are gone."""
    deadline = time.monotonic() + 5
    while strays(tag) and time.monotonic() < deadline:
        reap_zombies()
        time.sleep(0.05)
    for pid in strays(tag):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + 2
    while strays(tag) and time.monotonic() < deadline:
        reap_zombies()
        time.sleep(0.05)
    reap_zombies()


def record(base, expected, har_path, https, tmp):
    """Load the page; return {url: CDP initiator}. The HAR is at har_path after."""
    try:
        from playwright.sync_api import sync_playwright, Error as PwError
    except ImportError:
        raise Fail("python module playwright is missing: pip install playwright")
    want = {base + p for p in expected}
    initiators, finished, failed, seen = {}, set(), [], []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM, headless=True,
                # crashpad's database is $HOME/.config/chromium/Crash Reports
                env=dict(os.environ, HOME=tmp, XDG_CONFIG_HOME=f"{tmp}/xdg-config",
                         XDG_CACHE_HOME=f"{tmp}/xdg-cache", TMPDIR=tmp),
                args=["--no-proxy-server", "--disable-background-networking",
                      "--disable-component-update", "--no-first-run"])
            try:
                ctx = browser.new_context(
                    record_har_path=har_path, record_har_content="omit",
                    record_har_mode="full", ignore_https_errors=https,
                    service_workers="block")
                page = ctx.new_page()
                cdp = ctx.new_cdp_session(page)
                cdp.on("Network.requestWillBeSent", lambda e: initiators.setdefault(
                    e["request"]["url"], e.get("initiator")))
                cdp.send("Network.enable")
                page.on("request", lambda r: seen.append(r.url))
                page.on("requestfinished", lambda r: finished.add(r.url))
                page.on("requestfailed", lambda r: failed.append(
                    f"{r.url}: {r.failure}"))
                resp = page.goto(base + "/index.html", wait_until="load",
                                 timeout=WAIT_S * 1000)
                if resp is None or resp.status != 200:
                    raise Fail(f"/index.html: status {resp and resp.status}")
                if page.evaluate("window.qbenchDone") != "done":
                    raise Fail("the page's script did not finish")
                page.wait_for_load_state("networkidle", timeout=WAIT_S * 1000)
                deadline = time.monotonic() + WAIT_S
                while not want <= finished and not failed:
                    if time.monotonic() > deadline:
                        missing = sorted(urlsplit(u).path for u in want - finished)
                        raise Fail(f"not loaded after {WAIT_S} s: {' '.join(missing)}")
                    page.wait_for_timeout(50)
                page.wait_for_timeout(SETTLE_MS)
                if failed:
                    raise Fail("request failed: " + failed[0])
                cdp.detach()
                ctx.close()  # writes the HAR
            finally:
                browser.close()
    except PwError as e:
        msg = str(e).strip().splitlines()
        raise Fail("playwright: " + (msg[0] if msg else type(e).__name__))
    # blob: and data: URLs make no network request (the page has none, but
    # Playwright reports them as requests); anything else is unexpected
    extra = [u for u in seen if u not in want and not u.startswith(("blob:", "data:"))]
    if extra:
        raise Fail(f"unexpected request: {extra[0]} ({len(extra)} extra)")
    return initiators


def check_server(log_path, sizes):
    """Every object reached caddy exactly once, and nothing else did."""
    counts = {}
    try:
        with open(log_path) as f:
            for line in f:
                uri = json.loads(line)["request"]["uri"]
                counts[uri] = counts.get(uri, 0) + 1
    except (OSError, ValueError, KeyError) as e:
        raise Fail(f"caddy's access log: {e}")
    extra = sorted(u for u in counts if u not in sizes)
    twice = sorted(u for u, n in counts.items() if n > 1)
    missing = sorted(p for p in sizes if p not in counts)
    if extra or twice or missing:
        raise Fail("the server saw " + "; ".join(
            x for x in (extra and "extra " + " ".join(extra),
                        twice and "more than once " + " ".join(twice),
                        missing and "nothing of " + " ".join(missing)) if x))
    return sum(counts.values())


def check(har, base, sizes):
    entries = har["log"]["entries"]
    problems = []
    by_path = {}
    for e in entries:
        u = urlsplit(e["request"]["url"])
        path = u.path + ("?" + u.query if u.query else "")
        if f"{u.scheme}://{u.netloc}" != base or path not in sizes:
            problems.append(f"unexpected entry {e['request']['url']}")
            continue
        if path in by_path:
            problems.append(f"{path} fetched twice")
        by_path[path] = e
        if e["response"]["status"] != 200:
            problems.append(f"{path}: status {e['response']['status']}")
        if e["response"]["content"].get("size") != sizes[path]:
            problems.append(f"{path}: content.size {e['response']['content'].get('size')}"
                            f" != file size {sizes[path]}")
        if "text" in e["response"]["content"]:
            problems.append(f"{path}: content.text present")
    for p in sizes:
        if p not in by_path:
            problems.append(f"{p} missing")
    if len(entries) != len(sizes):
        problems.insert(0, f"{len(entries)} entries, want {len(sizes)}")
    if problems:
        raise Fail("; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)"
                                               if len(problems) > 3 else ""))


def initiator_url(ini):
    """The initiator's url, or the top frame of the innermost stack with one."""
    if not ini:
        return None
    if ini.get("url"):
        return ini["url"]
    stack = ini.get("stack")
    while stack:
        frames = stack.get("callFrames") or []
        if frames and frames[0].get("url"):
            return frames[0]["url"]
        stack = stack.get("parent")
    return None


def check_levels(har):
    """Each entry's level from its _initiator chain must be the site's."""
    by_url = {e["request"]["url"]: e for e in har["log"]["entries"]}
    levels = {}

    def level(url, depth=0):
        if url not in levels:
            parent = initiator_url(by_url[url].get("_initiator"))
            if parent is None or depth > len(by_url):
                levels[url] = 0
            elif parent not in by_url:
                raise Fail(f"{urlsplit(url).path}: initiator {parent} is not in the HAR")
            else:
                levels[url] = level(parent, depth + 1) + 1
        return levels[url]

    counts = {}
    for url in by_url:
        path = urlsplit(url).path
        want = page_site.MANIFEST[path][1]
        if level(url) != want:
            raise Fail(f"{path}: level {level(url)} by its initiator, want {want}")
        counts[want] = counts.get(want, 0) + 1
    return "/".join(str(counts[k]) for k in sorted(counts))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", metavar="OUT.har")
    ap.add_argument("--https", action="store_true",
                    help="serve over TLS (self-signed, HTTP/1.1 and HTTP/2)")
    args = ap.parse_args()
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        raise Fail(f"no directory {out_dir} for {args.out}")
    if not shutil.which(CHROMIUM):
        raise Fail(f"{CHROMIUM} not found: apt-get install chromium")
    if not shutil.which(CADDY):
        raise Fail("caddy not found: apt-get install caddy")
    if args.https and not shutil.which("openssl"):
        raise Fail("openssl not found")

    become_subreaper()
    tmp = tempfile.mkdtemp(prefix="qbench-har-")
    caddy = None
    try:
        # Playwright's chromium profile and HAR scratch files go in tmp too
        os.environ["TMPDIR"] = tmp
        site = os.path.join(tmp, "site")
        sizes = page_site.build(site)
        caddy, base = start_caddy(tmp, site, args.https)
        har_tmp = os.path.join(tmp, "raw.har")
        t0 = time.monotonic()
        initiators = record(base, sizes, har_tmp, args.https, tmp)
        elapsed = time.monotonic() - t0
        if caddy.poll() is not None:
            raise Fail("caddy died during the load: " + last_error(f"{tmp}/caddy.log"))
        try:
            with open(har_tmp) as f:
                har = json.load(f)
        except (OSError, ValueError) as e:
            raise Fail(f"no HAR from playwright: {e}")
        check(har, base, sizes)
        served = check_server(f"{tmp}/access.log", sizes)
        had_initiator = any("_initiator" in e for e in har["log"]["entries"])
        added = 0
        for e in har["log"]["entries"]:
            ini = initiators.get(e["request"]["url"])
            if "_initiator" not in e and ini is not None:
                e["_initiator"] = ini
                added += 1
        levels = check_levels(har)
        out_tmp = os.path.join(tmp, "out.har")
        with open(out_tmp, "w") as f:
            json.dump(har, f, indent=2)
            f.write("\n")
        shutil.move(out_tmp, args.out)
        entries = har["log"]["entries"]
        versions = sorted({e["response"].get("httpVersion", "?") for e in entries})
        n_init = sum("_initiator" in e for e in entries)
        print(f"{args.out}: entries={len(entries)} server_requests={served} "
              f"body_bytes={sum(e['response']['content']['size'] for e in entries)} "
              f"_initiator={'yes' if n_init == len(entries) else 'partial' if n_init else 'no'}"
              f"({'playwright' if had_initiator else f'added from CDP: {added}'}) "
              f"levels={levels} httpVersion={','.join(versions)} load_s={elapsed:.2f}")
    finally:
        stop(caddy)
        reap_strays(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    # when the browser goes away under it (Ctrl-C reaches Playwright's driver
    # too), asyncio logs "Future exception was never retrieved": keep one line
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    try:
        main()
    except Fail as e:
        print(f"record-har: error: {e}", file=sys.stderr)
        sys.exit(1)
    except (KeyboardInterrupt, Interrupted) as e:
        print(f"record-har: error: interrupted ({str(e) or 'SIGINT'})", file=sys.stderr)
        sys.exit(130)
    except Exception as e:  # anything else: still one line
        print(f"record-har: error: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
