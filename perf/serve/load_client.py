#!/usr/bin/env python3
"""Load for `megaton serve`: REQUESTS completions of NEW tokens each (greedy, ignore_eos: every request decodes the
full length), CONCURRENCY at a time, through POST /v1/completions; one warm-up request first. Standard library only.

usage: load_client.py URL MODEL --requests R --concurrency C --new-tokens N [--prompt-ids 50256]
prints one line: serve requests=R concurrency=C new_tokens=N requests_per_s=X tokens_per_s=Y mean_latency_s=Z
"""
import argparse
import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor


def complete(url, body):
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=3600) as r:
        out = json.load(r)
    return out["usage"]["completion_tokens"], time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("model")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--prompt-ids", default="50256")
    a = ap.parse_args()
    body = {"model": a.model, "prompt": [int(x) for x in a.prompt_ids.split(",")], "max_tokens": a.new_tokens,
            "temperature": 0, "ignore_eos": True}
    complete(a.url, dict(body, max_tokens=8))  # warm-up
    t = time.perf_counter()
    with ThreadPoolExecutor(a.concurrency) as pool:
        results = list(pool.map(lambda _: complete(a.url, body), range(a.requests)))
    wall = time.perf_counter() - t
    tokens = sum(n for n, _ in results)
    assert tokens == a.requests * a.new_tokens, (tokens, a.requests * a.new_tokens)
    print(f"serve requests={a.requests} concurrency={a.concurrency} new_tokens={a.new_tokens} "
          f"requests_per_s={a.requests / wall:.2f} tokens_per_s={tokens / wall:.1f} "
          f"mean_latency_s={sum(s for _, s in results) / len(results):.3f}", flush=True)


if __name__ == "__main__":
    main()
