"""Which object-store client slipstream reads pages with: obstore against
fsspec's s3fs, fetching the same pages the way the page cache does.

Usage::

    pip install s3fs          # only for this comparison; slipstream itself uses obstore
    python benchmarks/s3_clients.py [--pages N] [--threads T] [--rounds R] [--latency-ms MS] [--json PATH]

A real S3-compatible server (SeaweedFS, ``tests/object_store.py``) on
127.0.0.1 holds one object of ``--pages`` 8 MiB pages of random bytes.  Each
client fetches every page once by a ranged GET, ``--threads`` requests in
flight (a thread pool, as the page cache's downloads run), straight to the
server and through a relay adding ``--latency-ms`` to every request.  The
table gives, per client, the median and range over the rounds (which
alternate the clients' order) of the throughput in GB/s and of the CPU time
the client's process spent per GB (on a training machine that CPU is taken
from decoding).  A third route fetches straight from the server while
another thread of the process runs a pure-Python loop: a client whose
transfers need the GIL (an asyncio loop in a thread) then waits for it.  The server runs on the same cores, so absolute rates are
this machine's; the ratios between the clients are what matters.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PAGE = 8 << 20


def fetch_all(get, pages: int, threads: int, busy: bool) -> tuple[float, float]:
    """Seconds and CPU seconds to fetch every page with ``get(start, end)``;
    with ``busy``, while another thread runs a pure-Python loop (holding
    the GIL whenever it runs, as a loader's Python threads do at times)."""
    done = threading.Event()

    def spin() -> None:
        while not done.is_set():
            pass

    spinner = threading.Thread(target=spin) if busy else None
    start, cpu = time.perf_counter(), time.process_time()
    if spinner is not None:
        spinner.start()
    with ThreadPoolExecutor(threads) as pool:
        sizes = list(pool.map(lambda k: len(get(k * PAGE, (k + 1) * PAGE)), range(pages)))
    done.set()
    if spinner is not None:
        spinner.join()
    assert sizes == [PAGE] * pages
    return time.perf_counter() - start, time.process_time() - cpu


def clients(options: dict[str, str], threads: int):
    """name -> get(start, end) for each client, configured alike."""
    import obstore
    import s3fs
    from obstore.store import S3Store

    store = S3Store("bench", endpoint=options["endpoint"], access_key_id=options["access_key_id"],
                    secret_access_key=options["secret_access_key"], region=options["region"],
                    virtual_hosted_style_request=False, client_options={"allow_http": True})
    fs = s3fs.S3FileSystem(key=options["access_key_id"], secret=options["secret_access_key"],
                           endpoint_url=options["endpoint"], client_kwargs={"region_name": options["region"]},
                           config_kwargs={"max_pool_connections": threads}, skip_instance_cache=True)
    return {"obstore": lambda a, b: obstore.get_range(store, "pages", start=a, end=b),
            "s3fs": lambda a, b: fs.cat_file("bench/pages", start=a, end=b)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=96, help="8 MiB pages in the object (default: 96)")
    parser.add_argument("--threads", type=int, default=32, help="requests in flight (default: 32)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default: 5)")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="latency the relay adds (default: 50)")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    import obstore
    import s3fs
    from common import write_json
    from object_store import Proxy, S3Server

    with S3Server() as server, Proxy(server.endpoint, delay_s=args.latency_ms / 1000) as proxy:
        server.create_bucket("bench")
        obstore.put(server.store("bench"), "pages", os.urandom(args.pages * PAGE))
        # The relay runs in this process: the busy thread would slow it too, so only straight to the server.
        routes = {"direct": (server.storage_options(), False),
                  f"+{args.latency_ms:.0f} ms": (server.storage_options(endpoint=proxy.endpoint), False),
                  "busy GIL": (server.storage_options(), True)}
        results: dict[str, dict[str, list[dict]]] = {}
        for route, (options, busy) in routes.items():
            gets = clients(options, args.threads)
            for get in gets.values():
                fetch_all(get, min(4, args.pages), args.threads, False)  # connections made, code loaded
            for round_ in range(args.rounds):
                for name in (list(gets) if round_ % 2 == 0 else list(gets)[::-1]):
                    seconds, cpu = fetch_all(gets[name], args.pages, args.threads, busy)
                    size = args.pages * PAGE / 1e9
                    results.setdefault(route, {}).setdefault(name, []).append(
                        {"gb_per_s": size / seconds, "cpu_s_per_gb": None if busy else cpu / size})
    print(f"{args.pages} pages of 8 MiB, {args.threads} in flight, {args.rounds} rounds, {os.cpu_count()} cores; "
          f"obstore {obstore.__version__}, s3fs {s3fs.__version__}")
    print(f"{'route':<10} {'client':<8} {'GB/s':>20} {'CPU s per GB':>20}")
    for route, by_client in results.items():
        for name, runs in by_client.items():
            cells = []
            for key in ("gb_per_s", "cpu_s_per_gb"):
                values = [r[key] for r in runs if r[key] is not None]
                cells.append(f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]" if values
                             else "-")
            print(f"{route:<10} {name:<8} {cells[0]:>20} {cells[1]:>20}")
    now = datetime.now().astimezone()
    out = args.json or REPO_ROOT / "benchmarks" / "results" / f"s3-clients-{now.date().isoformat()}.json"
    write_json(out, {
        "pages": args.pages, "page_size": PAGE, "threads": args.threads, "rounds": args.rounds,
        "latency_ms": args.latency_ms, "results": results,
        "versions": {"python": platform.python_version(), "obstore": obstore.__version__, "s3fs": s3fs.__version__},
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "command": shlex.join([sys.executable, *sys.argv]), "timestamp": now.isoformat(timespec="seconds"),
    })
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
