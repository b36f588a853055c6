#!/usr/bin/env python3
"""Drive a local CometBFT node running the kvstore app until it has a small, varied chain.

Transactions go in right after a new block is seen, so most land together in the next block;
the plan mixes empty blocks with blocks of 1-5 txs. Txs are sent through every path a user has:
URI broadcast_tx_commit / broadcast_tx_sync, JSON-RPC POST with base64 tx, 0x-hex in the URI,
and non-ASCII keys and values. The kvstore's "key:value" form is avoided on purpose: its
PrepareProposal rewrites it to "key=value", so the mempool never sees that tx committed and
re-proposes it in every later block (and broadcast_tx_commit times out on it).

Usage: cometbft_gen.py [--rpc URL] [--blocks N]
Prints the tip height when done on stdout.
"""
import argparse
import base64
import json
import sys
import threading
import time
import urllib.parse
import urllib.request

PLAN = [1, 0, 3, 0, 0, 5, 2, 0, 1, 4, 0, 0, 2, 5, 0, 1, 3, 0, 0, 2]


def get(rpc, path):
    with urllib.request.urlopen(rpc + path, timeout=30) as r:
        return json.load(r)


def post(rpc, method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(rpc + "/", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def height(rpc):
    return int(get(rpc, "/status")["result"]["sync_info"]["latest_block_height"])


def wait_height_above(rpc, h, deadline):
    while time.time() < deadline:
        cur = height(rpc)
        if cur > h:
            return cur
        time.sleep(0.02)
    raise SystemExit("cometbft_gen: node stopped producing blocks")


def send(rpc, kind, tx, errors):
    try:
        if kind == "commit":
            res = get(rpc, "/broadcast_tx_commit?tx=" + urllib.parse.quote('"%s"' % tx))
        elif kind == "sync":
            res = get(rpc, "/broadcast_tx_sync?tx=" + urllib.parse.quote('"%s"' % tx))
        elif kind == "hex":
            res = get(rpc, "/broadcast_tx_sync?tx=0x" + tx.encode().hex())
        else:  # JSON-RPC POST; tx travels base64 encoded
            res = post(rpc, "broadcast_tx_sync", {"tx": base64.b64encode(tx.encode()).decode()})
        if "error" in res:
            errors.append((tx, res["error"]))
        else:
            r = res["result"]
            code = r.get("code", r.get("check_tx", {}).get("code", 0))
            if code:
                errors.append((tx, r))
    except Exception as e:  # noqa: BLE001 - reported below, the run fails
        errors.append((tx, repr(e)))


def txs_for(block_no, n):
    out = []
    kinds = ["commit", "sync", "post", "hex", "sync"]
    for i in range(n):
        kind = kinds[(block_no + i) % len(kinds)]
        if i == 2 and n >= 5:
            kind = "post"
            tx = "ключ%d_%d=значение ✓" % (block_no, i)  # non-ASCII, only via POST
        else:
            tx = "k%d_%d=v%d" % (block_no, i, block_no * 10 + i)
        out.append((kind, tx))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rpc", default="http://127.0.0.1:26657")
    ap.add_argument("--blocks", type=int, default=40)
    args = ap.parse_args()

    deadline = time.time() + 300
    h = wait_height_above(args.rpc, 0, deadline)
    errors = []
    block_no = 0
    while h < args.blocks - 2:
        n = PLAN[block_no % len(PLAN)]
        threads = [threading.Thread(target=send, args=(args.rpc, kind, tx, errors))
                   for kind, tx in txs_for(block_no, n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        block_no += 1
        h = wait_height_above(args.rpc, h, deadline)
    # let the last txs commit and the chain pass the requested length
    while h < args.blocks:
        h = wait_height_above(args.rpc, h, deadline)
    if errors:
        for tx, err in errors:
            print("cometbft_gen: tx %r: %s" % (tx, err), file=sys.stderr)
        raise SystemExit(1)
    print(h)


if __name__ == "__main__":
    main()
