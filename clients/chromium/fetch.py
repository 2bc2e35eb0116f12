#!/usr/bin/env python3
"""Fetch URLs with headless Chromium (Debian's, driven by Playwright) and print qbench fetch
lines on stdout; `qbench --client chromium` runs it. A page on the URLs' one https origin
fetch()es them in turn; times are Resource Timing's, in integer µs since the `zero` line.
Exit 0 if every fetch gave 200 and the whole body, 1 if not, 2 on bad usage, 143 on SIGTERM.
"""

import argparse, base64, ctypes, hashlib, json, os, re, shutil  # noqa: E401
import signal, subprocess, sys, tempfile, time  # noqa: E401
from urllib.parse import urlsplit

ZERO_US = time.time_ns() // 1000  # taken first, so every time printed comes after it
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
PATTERN = "qbench-payload:0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJK\r\n"
# The icon link stops Chromium's /favicon.ico request, which would share the connection.
PAGE = '<!doctype html><link rel="icon" href="data:,"><title>qbench</title>'
# net::ERR_* text to error kinds, first match wins. QUIC_HANDSHAKE_FAILED is what an ICMP port
# unreachable gives; Chromium's own QUIC handshake timeout says QUIC_NETWORK_IDLE_TIMEOUT.
KINDS = [("TIMED_OUT|TIMEOUT", "timeout"), ("CERT|SSL|TLS|ECH_", "tls"), ("ALPN", "alpn"),
         ("REFUSED|QUIC_HANDSHAKE_FAILED", "refused"), ("LENGTH_MISMATCH|INCOMPLETE", "short_body"),
         ("RESET|CLOSED|CONNECTION_ABORTED|EMPTY_RESPONSE", "reset"),
         ("UNREACHABLE|NAME_NOT_RESOLVED|DISCONNECTED", "unreachable"),
         ("HTTP2|SPDY|QUIC|HTTP_RESPONSE", "protocol")]

# Runs in the page. Reading chunk by chunk counts the bytes even of a failed body; checking
# them only once the body is complete cannot hold the download (and responseEnd) back.
FETCH_JS = """async ([url, timeoutMs, verify, pattern]) => {
  performance.clearResourceTimings();
  const out = {status: null, bytes: 0, mismatch: null, error: null, timeout: false, rt: null};
  const ctl = new AbortController(), chunks = [], timer = setTimeout(() => ctl.abort(), timeoutMs);
  try {
    const r = await fetch(url, {cache: "no-store", signal: ctl.signal});
    out.status = r.status;
    for (const rd = r.body && r.body.getReader(); rd;) {
      const {done, value} = await rd.read();
      if (done) break;
      out.bytes += value.length;
      if (verify) chunks.push(value);
    }
  } catch (e) { out.timeout = ctl.signal.aborted; out.error = String(e); }
  clearTimeout(timer);
  let p = new TextEncoder().encode(pattern), off = 0;  // 64 bytes, repeated from offset 0
  check: for (const c of out.error ? [] : chunks) {
    for (let i = 0; i < c.length; i++)
      if (c[i] !== p[(off + i) & 63]) { out.mismatch = off + i; break check; }
    off += c.length;
  }
  // The entry is queued when the load ends, which can trail the last chunk by a task.
  const name = new URL(url, location.href).href;
  for (let i = 0; i < (out.error ? 5 : 200) && !out.rt; i++) {
    const e = performance.getEntriesByName(name, "resource").pop();
    if (e) out.rt = {origin: performance.timeOrigin, proto: e.nextHopProtocol, cs: e.connectStart,
                     ce: e.connectEnd, rq: e.requestStart, rs: e.responseStart, re: e.responseEnd};
    else await new Promise(res => setTimeout(res, 10));
  }
  return out;
}"""


def now_us():
    return max(0, time.time_ns() // 1000 - ZERO_US)


def wall_us(ms):
    """Wall-clock ms (timeOrigin + a Resource Timing value) to integer µs since zero."""
    return max(0, round(ms * 1000) - ZERO_US)


def emit(**fields):
    sys.stdout.write(json.dumps(fields, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def say(msg):
    print(f"chromium-fetch: {msg}", file=sys.stderr, flush=True)


def first_line(e):
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def fail_line(url, t0, err, kind="io"):
    emit(event="request", url=url, start_us=t0, done_us=max(t0, now_us()), bytes=0,
         error=err, error_kind=kind)


def spki_hashes(path):
    """Base64 SHA-256 of each certificate's SubjectPublicKeyInfo: Chromium's
    --ignore-certificate-errors-spki-list trusts those keys with no CA store change."""
    with open(path, "rb") as f:
        pem = f.read()
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
        ders = [c.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
                for c in x509.load_pem_x509_certificates(pem)]
    except (ImportError, AttributeError):  # no cryptography, or one older than 39
        def run(cmd, data):
            return subprocess.run(cmd, input=data, capture_output=True, check=True).stdout
        ders = [run(["openssl", "pkey", "-pubin", "-outform", "der"],
                    run(["openssl", "x509", "-pubkey", "-noout"], pem))]
    return [base64.b64encode(hashlib.sha256(d).digest()).decode() for d in ders]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--proto", required=True, choices=["h2", "h3"])
    ap.add_argument("--ca", required=True, metavar="FILE", help="PEM of the server's certificate")
    ap.add_argument("--reuse", action="store_true", help="one browser context for all URLs")
    ap.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS")
    ap.add_argument("--verify", action="store_true", help="check every body byte in the page")
    ap.add_argument("urls", nargs="+", metavar="URL")
    a = ap.parse_args()
    if not a.timeout > 0:
        ap.error("--timeout must be positive")
    try:
        parts = [urlsplit(u) for u in a.urls]
        origins = {(p.scheme, p.hostname, p.port or 443) for p in parts}
    except ValueError as e:
        ap.error(str(e))
    if len(origins) != 1 or any(p.scheme != "https" or not p.hostname for p in parts):
        ap.error("the URLs must all be https:// and share one origin")
    _, host, port = origins.pop()
    a.hostport = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    a.home = f"https://{a.hostport}/"
    try:  # no certificate in the file is a ValueError (or openssl failing) too
        a.spki = spki_hashes(a.ca)
    except (OSError, ValueError, subprocess.CalledProcessError) as e:
        ap.error(f"--ca {a.ca}: no usable certificate ({e})")
    return a


def open_page(browser, args, failures):
    """A fresh context with a page on the origin. Playwright answers the navigation itself:
    the server sees only the fetches, and the first fetch is the one that connects."""
    ctx = browser.new_context()
    page = ctx.new_page()
    page.on("requestfailed", lambda r: failures.__setitem__(r.url, r.failure))
    page.route(args.home, lambda route: route.fulfill(body=PAGE, content_type="text/html"))
    page.goto(args.home, timeout=args.timeout * 1000)
    page.unroute(args.home)  # with no route left Playwright stops intercepting requests
    return ctx, page


def fetch_one(page, url, args, failures, conns):
    """Prints the connection line (if the fetch opened one) and the request line."""
    failures.pop(url, None)
    t0 = now_us()
    try:
        r = page.evaluate(FETCH_JS, [url, args.timeout * 1000, args.verify, PATTERN])
    except Exception as e:  # the page or the browser died under us
        r = dict(status=None, bytes=0, mismatch=None, timeout=False, rt=None, error=first_line(e))
    t1 = now_us()
    err = kind = None
    if r["timeout"]:
        err, kind = f"no complete response within {args.timeout:g} s", "timeout"
    elif r["error"]:
        try:
            for _ in range(30):  # Playwright's failure event can trail the rejection
                if url not in failures:
                    page.wait_for_timeout(10)
        except Exception:
            pass
        detail = failures.get(url)
        err = f"{detail} ({r['error']})" if detail else r["error"]
        kind = next((k for pat, k in KINDS if re.search(pat, detail or "")), "io")
    rt = r["rt"] if r["rt"] and r["rt"]["rq"] > 0 else None
    at = (lambda key: wall_us(rt["origin"] + rt[key])) if rt else None
    if rt and rt["ce"] > rt["cs"]:  # connectStart < connectEnd: set up now, not reused
        conns.append(len(conns))
        emit(event="connection", conn=conns[-1], start_us=at("cs"), handshake_us=at("ce"))
    m = re.search(r"/bytes/(\d+)$", urlsplit(url).path)
    want, got = (int(m.group(1)) if m else None), r["bytes"]
    if err is None:
        if not rt:
            err, kind = "no Resource Timing entry to tell the protocol by", "protocol"
        elif rt["proto"] != args.proto:
            err, kind = f"used {rt['proto'] or 'an unknown protocol'}, not {args.proto}", "protocol"
        elif r["status"] != 200:
            err, kind = f"status {r['status']}", "status"
        elif want is not None and got != want:
            err, kind = f"{got} bytes of {want}", "short_body" if got < want else "long_body"
        elif r["mismatch"] is not None:
            err, kind = f"body differs from the pattern at byte {r['mismatch']}", "body_mismatch"
    line = {"event": "request", "url": url, "conn": conns[-1] if rt and conns else None}
    if rt:
        start, done = at("rq"), max(at("rq"), at("re"))
        headers = min(max(start, at("rs")), done) if rt["rs"] > 0 else None
        line.update(start_us=start, headers_us=headers, done_us=done)
    else:
        line.update(start_us=t0, done_us=max(t0, t1))
    line.update(bytes=got, status=r["status"], verified=(err is None) if args.verify else None)
    line.update({"error": err, "error_kind": kind} if err else {})
    emit(**{k: v for k, v in line.items() if v is not None})  # absent, not null
    return err is None


def run(args, tmp):
    from playwright.sync_api import sync_playwright, Error as PwError
    # The server sends no Alt-Svc, hence QUIC forced on for the origin. Port migration on a
    # "degrading path" is off: a server busy for a few PTOs (loopback, a shaped link) reads to
    # Chromium as a failing path, and a connection with no request open is then closed, not
    # migrated, so the next load opens another and --reuse is not kept.
    flags = ["--no-sandbox", "--no-proxy-server",
             "--ignore-certificate-errors-spki-list=" + ",".join(args.spki)] + (
        ["--enable-quic", f"--origin-to-force-quic-on={args.hostport}",
         "--force-fieldtrials=QUIC/Enabled",
         "--force-fieldtrial-params=QUIC.Enabled:allow_port_migration/false"]
        if args.proto == "h3" else ["--disable-quic"])
    # Network prediction preconnects to the origin when a navigation starts; a fetch then
    # takes that idle socket and Resource Timing shows connectStart == connectEnd for a new
    # connection. The pref turns it off. Only a profile we write takes it (hence the
    # persistent context), and the contexts new_context() makes inherit it.
    os.makedirs(f"{tmp}/profile/Default")
    with open(f"{tmp}/profile/Default/Preferences", "w") as f:
        json.dump({"net": {"network_prediction_options": 2}}, f)
    # Crashpad and caches would otherwise write under the caller's ~/.config and ~/.cache.
    env = dict(os.environ, HOME=tmp, XDG_CONFIG_HOME=f"{tmp}/config",
               XDG_CACHE_HOME=f"{tmp}/cache", TMPDIR=tmp)
    ok, failures, conns, started, persistent = True, {}, [], 0, None
    with sync_playwright() as pw:
        try:
            persistent = pw.chromium.launch_persistent_context(
                f"{tmp}/profile", executable_path=CHROMIUM, headless=True, args=flags, env=env)
            emit(event="version", version=f"Chromium {persistent.browser.version}")
            ctx = page = None
            for url in args.urls:
                t0 = now_us()
                started += 1  # from here on this URL gets its line whatever happens
                try:
                    if page is None or not args.reuse:
                        old, ctx, page = ctx, None, None
                        old and old.close()
                        ctx, page = open_page(persistent.browser, args, failures)
                except PwError as e:
                    fail_line(url, t0, f"opening the page: {first_line(e)}")
                    ok = False
                    continue
                ok &= fetch_one(page, url, args, failures, conns)
        except PwError as e:
            say(f"browser: {first_line(e)}")
            for url in args.urls[started:]:
                fail_line(url, now_us(), f"browser: {first_line(e)}")
            ok = False
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # let the cleanup finish
            try:
                if persistent is not None:
                    persistent.close()  # closes the browser too
            except Exception as e:
                say(f"closing the browser: {first_line(e)}")
    return ok


def reap_children(grace=3.0, kill=True):
    """As a subreaper we inherit chromium's helpers that outlive the browser: give them
    `grace` seconds, then kill what is left. Only our own children are ever touched."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            if not os.waitpid(-1, os.WNOHANG)[0]:
                time.sleep(0.02)
        except ChildProcessError:
            return
    for d in filter(str.isdigit, os.listdir("/proc") if kill else []):
        try:
            with open(f"/proc/{d}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == os.getpid():
                    os.kill(int(d), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass
    if kill:
        reap_children(1.0, kill=False)


def main():
    args = parse_args()
    # SystemExit unwinds through every finally: the browser is closed, then we exit 143.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER (Linux only, as is qbench)
    emit(event="zero", unix_us=ZERO_US)
    tmp = tempfile.mkdtemp(prefix="qbench-chromium-")
    code = 1
    try:
        code = 0 if run(args, tmp) else 1
    except KeyboardInterrupt:
        code = 130
    except ImportError as e:
        say(f"{e}: pip install playwright")
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        reap_children()
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
