#!/usr/bin/env python3
"""Keep a local CometBFT kvstore node busy with transactions until it reaches a height.

Sends `key=value` txs with broadcast_tx_async (JSON-RPC POST, base64 tx) from a few threads,
a varying number per block and values of varying length (some non-ASCII), so that most blocks
carry txs whose results hold events. The kvstore's "key:value" form is avoided (see
cometbft_gen.py).

Usage: cometbft_load.py --rpc URL --height N
Prints the node's height when done.
"""
import argparse
import base64
import json
import random
import sys
import threading
import time
import urllib.request


def call(rpc, method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(rpc + "/", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def height(rpc):
    return int(call(rpc, "status", {})["result"]["sync_info"]["latest_block_height"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rpc", default="http://127.0.0.1:26657")
    ap.add_argument("--height", type=int, required=True)
    ap.add_argument("--senders", type=int, default=2)
    ap.add_argument("--seed", type=int, default=22)
    args = ap.parse_args()

    done = threading.Event()
    errors = []

    def sender(n):
        rnd = random.Random(args.seed * 100 + n)
        i = 0
        while not done.is_set():
            i += 1
            key = "k%d_%d" % (n, i)
            value = rnd.choice(["v", "värde", "値", "x" * rnd.randint(1, 300)]) + str(i)
            tx = (key + "=" + value).encode()
            try:
                res = call(args.rpc, "broadcast_tx_async", {"tx": base64.b64encode(tx).decode()})
                if "error" in res:
                    errors.append(res["error"])
            except Exception as e:  # a full mempool or a slow node: back off, bounded below
                errors.append(str(e))
            if len(errors) > 1000:
                done.set()
                return
            # bursts and pauses, so blocks hold 0..many txs
            time.sleep(rnd.choice([0, 0, 0.005, 0.02, 0.1]))

    threads = [threading.Thread(target=sender, args=(n,), daemon=True) for n in range(args.senders)]
    for t in threads:
        t.start()
    deadline = time.time() + 3600
    try:
        while time.time() < deadline:
            h = height(args.rpc)
            if h >= args.height or done.is_set():
                break
            time.sleep(0.5)
    finally:
        done.set()
        for t in threads:
            t.join()
    if len(errors) > 1000:
        raise SystemExit("cometbft_load: too many failed broadcasts, last: %s" % errors[-1])
    h = height(args.rpc)
    if h < args.height:
        raise SystemExit("cometbft_load: node at %d after an hour, wanted %d" % (h, args.height))
    print(h)


if __name__ == "__main__":
    sys.exit(main())
