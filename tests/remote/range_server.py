#!/usr/bin/env python3
"""range_server.py - a loopback HTTP server with Range support and fault injection, for tests/remote.

Usage: range_server.py ROOT   (listens on 127.0.0.1, port 0; prints "PORT <n>" and serves until killed)
With $TEST_TLS_CERT and $TEST_TLS_KEY (PEM files) it serves https with that certificate.
It is also a forward proxy for itself: a request for an absolute URL (http://HOST/<mode>/<file>,
as a client sends to an http proxy) is served as /<mode>/<file>, whatever HOST is.

Environment: $TEST_BIND_HOST listens on another loopback address (127.0.0.2); $TEST_REQUEST_LOG
names a file where every request appends "<Host header> <path> authorization=0|1 token=0|1" (whether
it carried Authorization / x-amz-security-token), for the redirect tests.

GET/HEAD /<mode>/<file> serves ROOT/<file> with single byte ranges (206, Content-Range, ETag,
Last-Modified, If-Match, If-Unmodified-Since). Modes inject one fault each:
  ok          no fault
  flaky       the first request for each range answers 503 (retries pass)
  short1      the first ranged answer for each range sends half its body, then closes (retries pass)
  short       every ranged answer is short (retries are spent)
  shortbig    every ranged answer of more than 512 KiB is short (opening passes, a load's data fails)
  reset1      the first request for each range is dropped without an answer (retries pass)
  wrongrange  every 206 names a Content-Range shifted by one byte
  norange     Range is ignored: 200 with the whole object
  replaced    after 3 requests the object has another ETag (If-Match fails: 412)
  replacedbig  a request for more than 512 KiB finds another ETag (412): replaced between opening and loading
  unsatisfiable  every ranged request answers 416 with Content-Range: bytes */<size> (a server that
              refuses suffix ranges)
  loop        302 to itself, forever
  redirect    302 to /ok/<file>
  trickle     every 206 body is sent 4 bytes a second (a low-speed limit catches it)
  endless404  404 with a body that never ends (no Content-Length; an error body cap stops it)
  endless503  the same with 503 (retryable)
  silent      reads the request, then says nothing and keeps the connection open
  silentbig   as silent for a request of more than 512 KiB (opening passes, a load's data stalls)
  s3          path /s3/<bucket>/<file>: 403 unless the request carries a valid SigV4 signature for
              the key id and secret in $TEST_S3_KEY_ID / $TEST_S3_SECRET and the session token in
              $TEST_S3_TOKEN; then as ok
  away        path /away/<scheme>/<host>/<port>/<rest>: 302 to <scheme>://who:L0cpass@<host>:<port>/<rest>?sig=L0csig
              (another origin; user information and a query that must never be shown or sent on)
  s3here      path /s3here/<bucket>/<key>: 302 to /s3/<bucket>/<key> (the same origin)
"""
import datetime
import time
import hashlib
import hmac
import os
import re
import socket
import ssl
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = sys.argv[1]
COUNTS = {}
LOCK = threading.Lock()


def requested_bytes(rng):
    """The length a single first-last range asks for (0 for a suffix range or none)."""
    m = re.fullmatch(r"bytes=(\d+)-(\d+)", rng.strip())
    return int(m.group(2)) - int(m.group(1)) + 1 if m else 0


def bump(key):
    with LOCK:
        COUNTS[key] = COUNTS.get(key, 0) + 1
        return COUNTS[key]


def sigv4_ok(handler, key_id, secret, token):
    auth = handler.headers.get("Authorization", "")
    m = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/s3/aws4_request, "
                     r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})", auth)
    if not m or m.group(1) != key_id:
        return False
    date, region, signed, signature = m.group(2), m.group(3), m.group(4).split(";"), m.group(5)
    amz_date = handler.headers.get("x-amz-date", "")
    if "host" not in signed or "x-amz-date" not in signed or not amz_date.startswith(date):
        return False
    if token and (handler.headers.get("x-amz-security-token") != token or "x-amz-security-token" not in signed):
        return False
    path, _, query = handler.path.partition("?")
    canonical_headers = "".join(f"{h}:{' '.join(handler.headers.get(h, '').split())}\n" for h in signed)
    payload = handler.headers.get("x-amz-content-sha256", hashlib.sha256(b"").hexdigest())
    canonical = "\n".join([handler.command, path, query, canonical_headers, ";".join(signed), payload])
    scope = f"{date}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in (date, region, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return hmac.compare_digest(hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest(), signature)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def fail(self, status, body=b"error\n"):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self):
        self.serve(head=True)

    def do_GET(self):
        self.serve(head=False)

    def redirect_to(self, location):
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def serve(self, head):
        log = os.environ.get("TEST_REQUEST_LOG")
        if log:
            with LOCK, open(log, "a") as f:
                f.write("%s %s authorization=%d token=%d\n" % (
                    self.headers.get("Host", "-"), self.path, "Authorization" in self.headers,
                    "x-amz-security-token" in self.headers))
        target = self.path
        if target.startswith("http://"):  # absolute-form: a client using this server as its proxy
            target = "/" + target[len("http://"):].partition("/")[2]
        parts = urllib.parse.unquote(target.partition("?")[0]).lstrip("/").split("/")
        mode, name = parts[0], "/".join(parts[1:])
        if mode == "away" and len(parts) > 4:
            scheme, host, port = parts[1], parts[2], parts[3]
            return self.redirect_to(f"{scheme}://who:L0cpass@{host}:{port}/" + "/".join(parts[4:]) + "?sig=L0csig")
        if mode == "s3here":
            return self.redirect_to("/s3/" + name)
        if mode == "s3":
            if not sigv4_ok(self, os.environ.get("TEST_S3_KEY_ID", ""), os.environ.get("TEST_S3_SECRET", ""),
                            os.environ.get("TEST_S3_TOKEN", "")):
                return self.fail(403, b"SignatureDoesNotMatch\n")
            name = "/".join(parts[2:])  # /s3/<bucket>/<key>
        if mode == "silent" or (mode == "silentbig" and requested_bytes(self.headers.get("Range", "")) > 512 << 10):
            time.sleep(3600)
            return
        if mode in ("endless404", "endless503"):
            return self.endless(int(mode[len("endless"):]))
        if mode == "loop":
            self.send_response(302)
            self.send_header("Location", self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode == "redirect":
            self.send_response(302)
            self.send_header("Location", "/ok/" + name)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = os.path.join(ROOT, name)
        if not name or ".." in name.split("/") or not os.path.isfile(path):
            return self.fail(404)
        with open(path, "rb") as f:
            data = f.read()
        st = os.stat(path)
        etag = '"%x-%x"' % (st.st_size, int(st.st_mtime))
        n = bump(mode + " " + name)
        if mode == "replaced" and n > 3:
            etag = '"replaced"'
        last_modified = datetime.datetime.fromtimestamp(int(st.st_mtime), datetime.timezone.utc).strftime(
            "%a, %d %b %Y %H:%M:%S GMT")
        if mode == "flaky" and bump("flaky " + name + " " + self.headers.get("Range", "")) == 1:
            return self.fail(503)
        if mode == "replacedbig" and requested_bytes(self.headers.get("Range", "")) > 512 << 10:
            etag = '"replaced"'
        if_match = self.headers.get("If-Match")
        if if_match is not None and if_match != etag and if_match != "*":
            return self.fail(412)
        rng = self.headers.get("Range")
        if rng is not None and mode == "unsatisfiable":
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{len(data)}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if rng is None or mode == "norange":
            return self.send_body(200, data, etag, last_modified, head)
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
        if not m or (m.group(1) == "" and m.group(2) == ""):
            return self.fail(416)
        size = len(data)
        if m.group(1) == "":
            first, last = max(0, size - int(m.group(2))), size - 1
        else:
            first = int(m.group(1))
            last = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
        if first >= size or last < first:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        key = f"{mode} {name} {first}-{last}"
        if mode == "reset1" and bump(key) == 1:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            self.close_connection = True
            self.connection.close()
            return
        body = data[first:last + 1]
        shown_first = first + 1 if mode == "wrongrange" else first
        shown_last = last + 1 if mode == "wrongrange" else last
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {shown_first}-{shown_last}/{size}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", last_modified)
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if head:
            return
        if mode == "trickle":
            return self.trickle(body)
        if mode == "short" or (mode == "short1" and bump(key) == 1) or (mode == "shortbig" and len(body) > 512 << 10):
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    def endless(self, status):
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        block = b"<p>error</p>" * 341
        try:
            while True:
                self.wfile.write(block)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass

    def trickle(self, body):
        self.close_connection = True
        try:
            for i in range(0, len(body), 4):
                self.wfile.write(body[i:i + 4])
                self.wfile.flush()
                time.sleep(1)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass

    def send_body(self, status, data, etag, last_modified, head):
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", last_modified)
        self.end_headers()
        if not head:
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that drops a connection (the reset tests) is expected


def main():
    server = Server((os.environ.get("TEST_BIND_HOST", "127.0.0.1"), 0), Handler)
    if os.environ.get("TEST_TLS_CERT"):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.environ["TEST_TLS_CERT"], os.environ["TEST_TLS_KEY"])
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print("PORT", server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
