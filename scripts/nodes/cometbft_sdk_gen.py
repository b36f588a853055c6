#!/usr/bin/env python3
"""Drive a local CometBFT node running the kvstore app through the txs that the SDK fixtures need.

Sends, in this order: a plain key=value tx; the Cosmos SDK txs of chain/cometbft/testdata/sdk/txs.json
(CosmJS-signed, each holding exactly one '=' and no ':', so the kvstore takes it for a key=value
tx), several in one block; a validator update adding an ed25519 validator with power 1 (so that the
genesis validator keeps more than 2/3 and the chain goes on: the new one never signs, and its
commit signatures are absent), and, some blocks later, the update removing it (power 0).

Usage: cometbft_sdk_gen.py [--rpc URL] [--txs FILE]
Prints the tip height when done on stdout.
"""
import argparse
import base64
import hashlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cometbft_gen import height, post  # noqa: E402


def wait_blocks(rpc, n):
    target = height(rpc) + n
    deadline = time.time() + 60
    while time.time() < deadline:
        if height(rpc) >= target:
            return
        time.sleep(0.05)
    raise SystemExit("cometbft_sdk_gen: node stopped producing blocks")


def send(rpc, tx, method="broadcast_tx_sync"):
    res = post(rpc, method, {"tx": base64.b64encode(tx).decode()})
    if "error" in res:
        raise SystemExit("cometbft_sdk_gen: %s: %s" % (tx[:40], res["error"]))
    r = res["result"]
    code = r.get("code", r.get("check_tx", {}).get("code", 0)) or r.get("tx_result", {}).get("code", 0)
    if code:
        raise SystemExit("cometbft_sdk_gen: tx %s rejected: %s" % (tx[:40], r))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rpc", default="http://127.0.0.1:26657")
    ap.add_argument("--txs", default="chain/cometbft/testdata/sdk/txs.json")
    args = ap.parse_args()
    rpc = args.rpc
    with open(args.txs) as f:
        sdk = [base64.b64decode(t["tx"]) for t in json.load(f)["txs"]]

    wait_blocks(rpc, 2)
    send(rpc, b"plain=kvstore tx", "broadcast_tx_commit")
    for group in (sdk[:4], sdk[4:8], sdk[8:]):
        wait_blocks(rpc, 1)
        for tx in group:
            send(rpc, tx)
        wait_blocks(rpc, 2)
    key = base64.b64encode(hashlib.sha256(b"blockhaul fixture validator").digest()).decode()
    send(rpc, ("val=ed25519!%s!1" % key).encode(), "broadcast_tx_commit")
    wait_blocks(rpc, 5)
    send(rpc, ("val=ed25519!%s!0" % key).encode(), "broadcast_tx_commit")
    wait_blocks(rpc, 4)
    print(height(rpc))


if __name__ == "__main__":
    sys.exit(main())
