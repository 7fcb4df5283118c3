#!/usr/bin/env python3
"""remote_bench.py - maploc on a checkpoint served over loopback HTTP (issue 30, docs/remote.md).

Measures, on one checkpoint of about --gib GiB (torch.save of float32 tensors, made once with
Debian's python3-torch into --work):
  * `maploc ls --json URL`: bytes and requests read, against the file's size;
  * `maploc load --host copy URL`: wall time, against `curl -o` of the whole file followed by
    `maploc load --host copy FILE`, and against the local load alone (warm page cache).
The server is nginx (Debian's nginx-light) when installed, else tests/remote/range_server.py.
Each timing is the median of --runs runs. Prints a Markdown table for docs/performance.md.

Usage: python3 bench/remote_bench.py --maploc build/src/cli/maploc [--gib 1] [--runs 3] [--work /tmp/maploc-remote-bench]
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def make_checkpoint(path, gib):
    if os.path.exists(path):
        return
    code = (
        "import torch, sys\n"
        "n = int(float(sys.argv[2]) * 128)\n"
        "torch.manual_seed(0)\n"
        "sd = {f'layers.{i}.weight': torch.randn(2048, 1024) for i in range(n)}\n"  # 8 MiB each
        "sd.update({f'layers.{i}.bias': torch.randn(1024) for i in range(n)})\n"
        "torch.save(sd, sys.argv[1])\n"
    )
    subprocess.run(["/usr/bin/python3", "-c", code, path, str(gib)], check=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(work, serve_dir):
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if nginx:
        port = free_port()
        conf = os.path.join(work, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""daemon off; master_process off; worker_processes 1; pid {work}/nginx.pid;
error_log {work}/nginx-error.log;
events {{ worker_connections 256; }}
http {{ access_log off; sendfile on; tcp_nopush on; client_body_temp_path {work}/tmp;
  proxy_temp_path {work}/tmp; fastcgi_temp_path {work}/tmp; uwsgi_temp_path {work}/tmp; scgi_temp_path {work}/tmp;
  server {{ listen 127.0.0.1:{port}; location /ok/ {{ alias {serve_dir}/; }} }} }}
""")
        os.makedirs(os.path.join(work, "tmp"), exist_ok=True)
        proc = subprocess.Popen([nginx, "-c", conf, "-p", work], stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                return proc, port, "nginx " + subprocess.run([nginx, "-v"], capture_output=True, text=True).stderr.strip()
            except OSError:
                time.sleep(0.05)
        proc.kill()
        raise SystemExit("nginx did not start")
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests/remote/range_server.py"), serve_dir],
                            stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline().split()[1])
    return proc, port, "tests/remote/range_server.py"


def timed(cmd, **kw):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return dt, r.stdout


def median_of(runs, f):
    return statistics.median(f() for _ in range(runs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--maploc", default=os.path.join(ROOT, "build/src/cli/maploc"))
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default="/tmp/maploc-remote-bench")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    serve = os.path.join(a.work, "serve")
    os.makedirs(serve, exist_ok=True)
    ckpt = os.path.join(serve, "model.pt")
    make_checkpoint(ckpt, a.gib)
    size = os.path.getsize(ckpt)
    proc, port, server = start_server(a.work, serve)
    url = f"http://127.0.0.1:{port}/ok/model.pt"
    try:
        _, out = timed([a.maploc, "ls", "--json", url])
        ls = json.loads(out)
        remote = ls["remote"]
        records = json.loads(subprocess.run([a.maploc, "ls", "--records", "--json", ckpt], capture_output=True,
                                            text=True, check=True).stdout)["records"]
        pickle_bytes = next(r["compressed_size"] for r in records if r["name"].endswith("/data.pkl"))
        ls_s = median_of(a.runs, lambda: timed([a.maploc, "ls", "--json", url])[0])
        load_remote = median_of(a.runs, lambda: timed([a.maploc, "load", "--host", "copy", url])[0])
        _, out = timed([a.maploc, "load", "--json", "--host", "copy", url])
        load_bytes = json.loads(out)["remote"]
        local_copy = os.path.join(a.work, "downloaded.pt")

        def download_then_load():
            if os.path.exists(local_copy):
                os.remove(local_copy)
            t_curl, _ = timed(["curl", "-sS", "-o", local_copy, url])
            t_load, _ = timed([a.maploc, "load", "--host", "copy", local_copy])
            return t_curl + t_load

        timed([a.maploc, "load", "--host", "copy", ckpt])  # warm the page cache
        both = median_of(a.runs, download_then_load)
        t_curl = median_of(a.runs, lambda: timed(["curl", "-sS", "-o", local_copy, url])[0])
        local = median_of(a.runs, lambda: timed([a.maploc, "load", "--host", "copy", ckpt])[0])
    finally:
        proc.terminate()
        proc.wait()
    mib = size / 2**20
    print(f"checkpoint: {size} bytes ({mib:.0f} MiB), {len(ls['tensors'])} tensors; server: {server}; "
          f"median of {a.runs} runs; MAPLOC_REMOTE_PARALLEL={os.environ.get('MAPLOC_REMOTE_PARALLEL', '8 (default)')}")
    print()
    print("| measure | value |")
    print("|---|---|")
    print(f"| `ls` over loopback: bytes read | {remote['bytes_read']} ({100 * remote['bytes_read'] / size:.3f}% of the file; "
          f"data.pkl is {pickle_bytes} bytes) |")
    print(f"| `ls` over loopback: requests | {remote['requests']} |")
    print(f"| `ls` over loopback: wall | {ls_s * 1000:.0f} ms |")
    print(f"| `load --host copy` over loopback | {load_remote:.2f} s ({mib / 1024 / load_remote:.2f} GiB/s; "
          f"{load_bytes['bytes_read']} bytes in {load_bytes['requests']} requests) |")
    print(f"| `curl -o` then local `load --host copy` | {both:.2f} s (curl alone {t_curl:.2f} s) |")
    print(f"| local `load --host copy` alone (warm) | {local:.2f} s |")
    print(f"| remote load / (download + load) | {load_remote / both:.2f} |")
    print(f"| remote load / local load | {load_remote / local:.2f} |")


if __name__ == "__main__":
    main()
