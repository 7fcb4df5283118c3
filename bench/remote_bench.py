#!/usr/bin/env python3
"""remote_bench.py - maploc on a checkpoint served over loopback HTTP (issue 30, docs/remote.md).

Measures, on one checkpoint of about --gib GiB (torch.save of float32 tensors, made once with
Debian's python3-torch into --work):
  * `maploc ls --json URL`: bytes and requests read, against the file's size;
  * `maploc load --host copy URL`: wall time and peak RSS, against `curl -o` of the whole file
    followed by `maploc load --host copy FILE`, against the local load alone (warm page cache), and
    against `curl -o /dev/null` (the loopback transfer alone: what any reader over HTTP pays);
  * with --standin (the CUDA runtime stand-in, docs/cuda-standin.md): `maploc load --map-location
    cuda:0` of the URL and of the file, peak RSS: the stand-in's device memory is host memory, so
    what a URL load adds over the local one is the host memory it holds on the way to the device.
The server is nginx (Debian's nginx-light) when installed, else tests/remote/range_server.py.
Each timing is the median of --runs runs. Prints a Markdown table for docs/performance.md.

Usage: python3 bench/remote_bench.py --maploc build/src/cli/maploc [--gib 1] [--runs 3] [--work /tmp/maploc-remote-bench]
         [--standin build/tests/cudart_standin/libmaploc_cudart_standin.so]
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
sys.path.insert(0, HERE)
import proc_run  # noqa: E402  (GNU time: wall and peak RSS of fresh processes)


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
    ap.add_argument("--standin", help="libmaploc_cudart_standin.so: also load to cuda:0 through the stand-in")
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
        _, out = timed([a.maploc, "load", "--json", "--host", "copy", url])
        load_bytes = json.loads(out)["remote"]
        local_copy = os.path.join(a.work, "downloaded.pt")

        def download_then_load():
            if os.path.exists(local_copy):
                os.remove(local_copy)
            t_curl, _ = timed(["curl", "-sS", "-o", local_copy, url])
            t_load, _ = timed([a.maploc, "load", "--host", "copy", local_copy])
            os.remove(local_copy)
            os.sync()  # the download's dirty pages are written back now, not during the next row
            return t_curl + t_load

        # Side by side, one round at a time, so that the machine's load falls on every row alike.
        rows = {"remote": [], "both": [], "local": [], "curl_null": [], "remote_rss": [], "local_rss": []}
        timed([a.maploc, "load", "--host", "copy", ckpt])  # warm the page cache
        for _ in range(a.runs):
            r = proc_run.once([a.maploc, "load", "--host", "copy", url])
            rows["remote"].append(r["wall_s"])
            rows["remote_rss"].append(r["rss_mb"])
            r = proc_run.once([a.maploc, "load", "--host", "copy", ckpt])
            rows["local"].append(r["wall_s"])
            rows["local_rss"].append(r["rss_mb"])
            rows["curl_null"].append(timed(["curl", "-sS", "-o", "/dev/null", url])[0])
            rows["both"].append(download_then_load())
        cuda = {}
        if a.standin:
            env = dict(os.environ, MAPLOC_CUDART=os.path.abspath(a.standin),
                       MAPLOC_STANDIN=f"devices=1,memory={int(size * 1.5)},h2d=50e9")
            for where, src in (("url", url), ("file", ckpt)):
                runs = [proc_run.once(["env"] + [f"{k}={env[k]}" for k in ("MAPLOC_CUDART", "MAPLOC_STANDIN")] +
                                      [a.maploc, "load", "--quiet", "--map-location", "cuda:0", src])
                        for _ in range(a.runs)]
                bad = [r for r in runs if r["rc"] != 0]
                if bad:
                    raise SystemExit(f"load to cuda:0 through the stand-in failed: {bad[0]['stderr']}")
                cuda[where] = (statistics.median(r["wall_s"] for r in runs), max(r["rss_mb"] for r in runs))
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
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"| `load --host copy` over loopback | {med['remote']:.2f} s ({mib / 1024 / med['remote']:.2f} GiB/s; "
          f"{load_bytes['bytes_read']} bytes in {load_bytes['requests']} requests; peak RSS {med['remote_rss']:.0f} MB) |")
    print(f"| `curl -o` then local `load --host copy` | {med['both']:.2f} s |")
    print(f"| local `load --host copy` alone (warm) | {med['local']:.2f} s (peak RSS {med['local_rss']:.0f} MB) |")
    print(f"| `curl -o /dev/null` (the loopback transfer alone) | {med['curl_null']:.2f} s |")
    print(f"| remote load / (download + load) | {med['remote'] / med['both']:.2f} |")
    print(f"| remote load / local load | {med['remote'] / med['local']:.2f} |")
    print(f"| remote load / `curl -o /dev/null` | {med['remote'] / med['curl_null']:.2f} |")
    print(f"| `curl -o /dev/null` / local load | {med['curl_null'] / med['local']:.2f} |")
    if cuda:
        print(f"| `load --map-location cuda:0` (stand-in) over loopback | {cuda['url'][0]:.2f} s, peak RSS "
              f"{cuda['url'][1]:.0f} MB |")
        print(f"| `load --map-location cuda:0` (stand-in) of the file | {cuda['file'][0]:.2f} s, peak RSS "
              f"{cuda['file'][1]:.0f} MB |")
        print(f"| host memory a URL load adds on the way to cuda:0 | {cuda['url'][1] - cuda['file'][1]:.0f} MB "
              f"(the file: {mib:.0f} MiB) |")

if __name__ == "__main__":
    main()
