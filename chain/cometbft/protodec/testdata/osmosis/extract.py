#!/usr/bin/env python3
"""Extracts Osmosis mainnet block 2,836,990's transactions from osmosis-labs/docs.

Usage: extract.py OSMOSIS_DOCS_CHECKOUT COMMIT > txs.json

The docs' transaction-structure guide holds the block as `osmosisd query block 2836990`
printed it (block-2836990.md) and its 64 transactions as `osmosisd query txs --height
2836990 --events tx.height=2836990 -o json --limit 64` printed them (txs-block-2836990.md):
osmosisd's own JSON of each. txs.json pairs each transaction's bytes (base64, from the
block) with that JSON by sha256(bytes) = txhash, in txs.json's shape of ../chainindexing.
"""
import base64, hashlib, json, subprocess, sys

DIR = "docs/integrate/transaction-structure"

def doc(repo, commit, name):
    s = subprocess.run(["git", "-C", repo, "show", f"{commit}:{DIR}/{name}"], capture_output=True, text=True, check=True).stdout
    return json.loads(s[s.index("{"):s.rindex("}") + 1])

def main():
    repo, commit = sys.argv[1], sys.argv[2]
    block = doc(repo, commit, "block-2836990.md")
    header = block["block"]["header"]
    txs = {hashlib.sha256(base64.b64decode(t)).hexdigest().upper(): t for t in block["block"]["data"]["txs"]}
    out = []
    for t in doc(repo, commit, "txs-block-2836990.md")["txs"]:
        out.append({"source": f"{DIR}/txs-block-2836990.md", "chain_id": header["chain_id"], "height": header["height"],
                    "time": header["time"], "txhash": t["txhash"], "tx_bytes": txs[t["txhash"]], "tx": t["tx"]})
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")

main()
