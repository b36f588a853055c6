#!/usr/bin/env python3
"""Record raw EVM JSON-RPC answers of a node as test fixtures, and compute per-height expectations.

  evm_fixtures.py record   --rpc URL --to N --out DIR   raw responses + expected.json
  evm_fixtures.py expected --rpc URL --to N --out FILE  expectations straight from a node

Heights run from 0 (genesis) to N. Responses are stored byte for byte as the node sent them.
"""
import argparse
import json
import os
import urllib.error
import urllib.request


class Node:
    def __init__(self, url):
        self.url = url
        self.id = 0

    def raw(self, body):
        """POST body; return (http_status, response bytes)."""
        req = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def request(self, method, *params):
        self.id += 1
        return json.dumps({"jsonrpc": "2.0", "id": self.id, "method": method,
                           "params": list(params)}).encode()

    def call_raw(self, method, *params):
        st, raw = self.raw(self.request(method, *params))
        if st != 200:
            raise SystemExit("evm_fixtures: %s: HTTP %d: %s" % (method, st, raw[:200]))
        return raw

    def call(self, method, *params):
        res = json.loads(self.call_raw(method, *params))
        if "error" in res:
            raise SystemExit("evm_fixtures: %s %s: %s" % (method, params, res["error"]))
        return res["result"]


def expect_height(block, receipts):
    """Expectations for one height from eth_getBlockByNumber(h, true) and eth_getBlockReceipts(h)."""
    txs = block["transactions"]
    types = {}
    for tx in txs:
        types[tx["type"]] = types.get(tx["type"], 0) + 1
    return {
        "height": int(block["number"], 16),
        "hash": block["hash"],
        "parent_hash": block["parentHash"],
        "timestamp": int(block["timestamp"], 16),
        "num_txs": len(txs),
        "tx_types": types,
        "num_receipts": len(receipts),
        "num_logs": sum(len(r["logs"]) for r in receipts),
        "num_topics": sum(len(log["topics"]) for r in receipts for log in r["logs"]),
        "failed_txs": sum(1 for r in receipts if r["status"] == "0x0"),
        "contracts_created": [r["contractAddress"] for r in receipts if r.get("contractAddress")],
        "gas_used": int(block["gasUsed"], 16),
    }


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def record(node, to, out, per_tx_blocks):
    heights = []
    for h in range(0, to + 1):
        braw = node.call_raw("eth_getBlockByNumber", hex(h), True)
        rraw = node.call_raw("eth_getBlockReceipts", hex(h))
        write(os.path.join(out, "block_%d.json" % h), braw)
        write(os.path.join(out, "receipts_%d.json" % h), rraw)
        block, receipts = json.loads(braw)["result"], json.loads(rraw)["result"]
        heights.append(expect_height(block, receipts))
        if h in per_tx_blocks:
            # The per-tx fallback for nodes without eth_getBlockReceipts.
            for i, tx in enumerate(block["transactions"]):
                write(os.path.join(out, "tx_receipts", "%d_%d.json" % (h, i)),
                      node.call_raw("eth_getTransactionReceipt", tx["hash"]))

    tip = int(node.call("eth_blockNumber"), 16)
    write(os.path.join(out, "chain_id.json"), node.call_raw("eth_chainId"))
    write(os.path.join(out, "block_number.json"), node.call_raw("eth_blockNumber"))
    write(os.path.join(out, "block_hashes_%d.json" % min(5, to)),
          node.call_raw("eth_getBlockByNumber", hex(min(5, to)), False))
    write(os.path.join(out, "logs_0_%d.json" % to),
          node.call_raw("eth_getLogs", {"fromBlock": "0x0", "toBlock": hex(to)}))

    above = tip + 1000
    statuses = {}
    cases = {
        # both answer a null result, not an error
        "block_above_tip": node.request("eth_getBlockByNumber", hex(above), True),
        "receipts_above_tip": node.request("eth_getBlockReceipts", hex(above)),
        "tx_receipt_unknown": node.request("eth_getTransactionReceipt", "0x" + "ab" * 32),
        "height_decimal_number": node.request("eth_getBlockByNumber", 5, True),
        "height_decimal_string": node.request("eth_getBlockByNumber", "5", True),
        "height_leading_zero": node.request("eth_getBlockByNumber", "0x05", True),
        "unknown_method": node.request("eth_noSuchMethod"),
        "not_json": b"{nope",
        "empty_batch": b"[]",
    }
    for name, body in cases.items():
        st, raw = node.raw(body)
        write(os.path.join(out, "errors", name + ".json"), raw)
        statuses[name] = {"request": body.decode(), "http_status": st}

    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "eth_getBlockByNumber", "params": [hex(5), True]},
        {"jsonrpc": "2.0", "id": 2, "method": "eth_getBlockReceipts", "params": [hex(5)]},
        {"jsonrpc": "2.0", "id": 3, "method": "eth_getBlockByNumber", "params": [hex(above), True]},
        {"jsonrpc": "2.0", "id": "x4", "method": "eth_chainId", "params": []},
        {"jsonrpc": "2.0", "id": 5, "method": "eth_noSuchMethod", "params": []},
    ]
    body = json.dumps(batch).encode()
    st, raw = node.raw(body)
    write(os.path.join(out, "batch_request.json"), body)
    write(os.path.join(out, "batch_response.json"), raw)
    statuses["batch"] = {"request": "batch_request.json", "http_status": st}

    # One call over geth's default batch limit (1000 items).
    big = json.dumps([{"jsonrpc": "2.0", "id": i, "method": "eth_chainId", "params": []}
                      for i in range(1001)]).encode()
    st, raw = node.raw(big)
    write(os.path.join(out, "errors", "batch_too_large.json"), raw)
    statuses["batch_too_large"] = {"request": "1001 x eth_chainId", "http_status": st}

    expected = {"source": node.call("web3_clientVersion") + ", --dev --dev.period 1",
                "chain_id": int(node.call("eth_chainId"), 16),
                "from": 0, "to": to, "tip_when_recorded": tip, "height_above_tip_used": above,
                "per_tx_receipt_heights": sorted(per_tx_blocks),
                "http_status": statuses, "heights": heights}
    write(os.path.join(out, "expected.json"), (json.dumps(expected, indent=1) + "\n").encode())


def expected_only(node, to, out):
    heights = [expect_height(node.call("eth_getBlockByNumber", hex(h), True),
                             node.call("eth_getBlockReceipts", hex(h)))
               for h in range(0, to + 1)]
    expected = {"source": node.call("web3_clientVersion"), "chain_id": int(node.call("eth_chainId"), 16),
                "from": 0, "to": to, "heights": heights}
    write(out, (json.dumps(expected, indent=1) + "\n").encode())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["record", "expected"])
    ap.add_argument("--rpc", default="http://127.0.0.1:8545")
    ap.add_argument("--to", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-tx", default="", help="comma-separated heights whose receipts are also recorded one tx at a time")
    a = ap.parse_args()
    node = Node(a.rpc)
    if a.mode == "record":
        per_tx = {int(x) for x in a.per_tx.split(",") if x}
        record(node, a.to, a.out, per_tx)
    else:
        expected_only(node, a.to, a.out)


if __name__ == "__main__":
    main()
