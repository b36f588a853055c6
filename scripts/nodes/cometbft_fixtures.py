#!/usr/bin/env python3
"""Record raw CometBFT RPC answers as test fixtures, and compute per-height expectations.

  cometbft_fixtures.py record   --rpc URL [--from M] --to N --out DIR   raw responses + expected.json
  cometbft_fixtures.py expected --rpc URL [--from M] --to N --out FILE  expectations from a node

--from above 1 is for a pruning node: the heights below it are recorded as "not available" errors.

Responses are stored byte for byte as the node sent them (full JSON-RPC envelopes), so decoders
are tested against what a node really writes, not against a re-serialisation.
"""
import argparse
import json
import os
import urllib.error
import urllib.request


def fetch_raw(rpc, path, body=None):
    """Return (http_status, body_bytes); CometBFT answers RPC errors with HTTP 500."""
    req = urllib.request.Request(rpc + path, data=body,
                                 headers={"Content-Type": "application/json"} if body else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def fetch_json(rpc, path):
    status, raw = fetch_raw(rpc, path)
    if status != 200:
        raise SystemExit("cometbft_fixtures: %s: HTTP %d: %s" % (path, status, raw[:200]))
    return json.loads(raw)


def expect_height(block, results):
    """Expectations for one height, from the /block and /block_results envelopes."""
    b = block["result"]
    r = results["result"]
    txs = b["block"]["data"]["txs"] or []
    txr = r["txs_results"] or []
    fbe = r["finalize_block_events"] or []
    return {
        "height": int(b["block"]["header"]["height"]),
        "hash": b["block_id"]["hash"],
        "parent_hash": b["block"]["header"]["last_block_id"]["hash"],
        "time": b["block"]["header"]["time"],
        "num_txs": len(txs),
        "num_tx_results": len(txr),
        "tx_events": sum(len(t.get("events") or []) for t in txr),
        "tx_event_attributes": sum(len(e.get("attributes") or [])
                                   for t in txr for e in (t.get("events") or [])),
        "finalize_block_events": len(fbe),
        "finalize_block_event_attributes": sum(len(e.get("attributes") or []) for e in fbe),
    }


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def record(rpc, frm, to, out, app):
    heights = []
    for h in range(frm, to + 1):
        per = {}
        for method in ("block", "block_results"):
            status, raw = fetch_raw(rpc, "/%s?height=%d" % (method, h))
            if status != 200:
                raise SystemExit("cometbft_fixtures: %s %d: HTTP %d" % (method, h, status))
            write(os.path.join(out, "%s_%d.json" % (method, h)), raw)
            per[method] = json.loads(raw)
        heights.append(expect_height(per["block"], per["block_results"]))

    status_code, raw = fetch_raw(rpc, "/status")
    write(os.path.join(out, "status.json"), raw)
    tip = int(json.loads(raw)["result"]["sync_info"]["latest_block_height"])
    status_code, raw = fetch_raw(rpc, "/blockchain?minHeight=%d&maxHeight=%d" % (frm, min(to, frm + 19)))
    write(os.path.join(out, "blockchain_%d_%d.json" % (frm, min(to, frm + 19))), raw)

    # Error answers, with the HTTP status each came with.
    above = tip + 1000
    cases = {
        "height_above_tip": "/block?height=%d" % above,
        "block_results_above_tip": "/block_results?height=%d" % above,
        "height_zero": "/block?height=0",
        "block_results_height_zero": "/block_results?height=0",
        "height_negative": "/block?height=-1",
        "height_not_a_number": "/block?height=abc",
        "unknown_method": "/no_such_method",
    }
    if frm > 1:
        cases["height_pruned"] = "/block?height=%d" % (frm - 1)
        cases["block_results_pruned"] = "/block_results?height=%d" % (frm - 1)
    statuses = {}
    for name, path in cases.items():
        st, raw = fetch_raw(rpc, path)
        write(os.path.join(out, "errors", name + ".json"), raw)
        statuses[name] = {"request": path, "http_status": st}
    # The same over JSON-RPC POST (what a fetcher sends), single and batched.
    post_cases = {
        "post_height_above_tip": {"jsonrpc": "2.0", "id": 7, "method": "block",
                                  "params": {"height": str(above)}},
        # CometBFT wants int64 params as JSON strings; a bare number is refused
        "post_height_as_number": {"jsonrpc": "2.0", "id": 8, "method": "block",
                                  "params": {"height": 5}},
        "post_unknown_method": {"jsonrpc": "2.0", "id": 9, "method": "no_such_method",
                                "params": {}},
    }
    if frm > 1:
        post_cases["post_height_pruned"] = {"jsonrpc": "2.0", "id": 10, "method": "block",
                                            "params": {"height": str(frm - 1)}}
    for name, req in post_cases.items():
        body = json.dumps(req).encode()
        st, raw = fetch_raw(rpc, "/", body)
        write(os.path.join(out, "errors", name + ".json"), raw)
        statuses[name] = {"request": "POST / " + body.decode(), "http_status": st}

    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "block", "params": {"height": str(frm + 4)}},
        {"jsonrpc": "2.0", "id": 2, "method": "block_results", "params": {"height": str(frm + 4)}},
        {"jsonrpc": "2.0", "id": 3, "method": "block", "params": {"height": str(above)}},
        {"jsonrpc": "2.0", "id": "x4", "method": "block_results", "params": {"height": str(frm + 6)}},
    ]
    if frm > 1:
        batch.append({"jsonrpc": "2.0", "id": 5, "method": "block", "params": {"height": str(frm - 1)}})
    body = json.dumps(batch).encode()
    st, raw = fetch_raw(rpc, "/", body)
    write(os.path.join(out, "batch_request.json"), body)
    write(os.path.join(out, "batch_response.json"), raw)
    statuses["batch"] = {"request": "POST / batch_request.json", "http_status": st}

    expected = {"source": "cometbft %s, %s" % (node_version(rpc), app),
                "from": frm, "to": to, "tip_when_recorded": tip,
                "height_above_tip_used": above, "http_status": statuses, "heights": heights}
    write(os.path.join(out, "expected.json"), (json.dumps(expected, indent=1, ensure_ascii=False) + "\n").encode())


def node_version(rpc):
    return fetch_json(rpc, "/status")["result"]["node_info"]["version"]


def expected_only(rpc, frm, to, out):
    heights = [expect_height(fetch_json(rpc, "/block?height=%d" % h),
                             fetch_json(rpc, "/block_results?height=%d" % h))
               for h in range(frm, to + 1)]
    expected = {"source": "cometbft %s" % node_version(rpc), "from": frm, "to": to, "heights": heights}
    write(out, (json.dumps(expected, indent=1, ensure_ascii=False) + "\n").encode())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["record", "expected"])
    ap.add_argument("--rpc", default="http://127.0.0.1:26657")
    ap.add_argument("--from", dest="frm", type=int, default=1)
    ap.add_argument("--to", type=int, required=True)
    ap.add_argument("--app", default="persistent_kvstore", help="application name noted in expected.json")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.mode == "record":
        record(a.rpc, a.frm, a.to, a.out, a.app)
    else:
        expected_only(a.rpc, a.frm, a.to, a.out)


if __name__ == "__main__":
    main()
