#!/usr/bin/env python3
"""fetch_deadline_test.py - fixtures/real/fetch.py stops at its deadline (issue 27).

A local server sends an archive one byte every 0.2 s (a network that drops packets: each read
answers well inside the per-request timeout, so only the run's deadline stops it). download()
must give up at a 2 s deadline, and main() with --deadline must exit 1 (test.sh's "skipped
with a warning" path) within a few seconds. No network is used.
"""
import http.server
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "fixtures", "real"))
import fetch  # noqa: E402


class Trickle(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", "100000")
        self.end_headers()
        try:
            for _ in range(100000):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass

    def log_message(self, *args):
        pass


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d/archive.zip" % server.server_address[1]
    dest = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "/tmp", "fetch_deadline_test.part")
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    start = time.monotonic()
    try:
        fetch.download(url, dest, "0" * 64, 100000, time.monotonic() + 2)
    except fetch.Deadline as e:
        took = time.monotonic() - start
        print("download stopped after %.1f s: %s" % (took, e))
        if took > 6:
            print("FAILED: the deadline was 2 s")
            return 1
    else:
        print("FAILED: download of a trickling archive returned")
        return 1
    # The whole run: every source of the CI subset points at the trickling server.
    sources = fetch.load_sources()
    for s in sources:
        s["url"] = url
    fetch.load_sources = lambda: sources
    sys.argv = ["fetch.py", "--cache", os.path.join(os.path.dirname(dest), "cache"), "--deadline", "3"]
    start = time.monotonic()
    rc = fetch.main()
    took = time.monotonic() - start
    print("fetch.main() exited %d after %.1f s" % (rc, took))
    if rc != 1 or took > 10:
        print("FAILED: expected exit 1 within 10 s")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
