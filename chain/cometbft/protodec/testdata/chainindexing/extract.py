#!/usr/bin/env python3
"""Extracts the real transactions of crypto-com/chain-indexing's parser fixtures.

Usage: extract.py CHAIN_INDEXING_CHECKOUT COMMIT > txs.json; extract.py ... --blocks H,H [FILE ...]

Each fixture file of usecase/parser/test/ holds Go constants of JSON text: a node's
/block answer (*_BLOCK_RESP), its /block_results (*_BLOCK_RESULTS_RESP) and, per
transaction, the node's own decoding of it (*_TXS_RESP*: GET /cosmos/tx/v1beta1/txs/HASH).
txs.json pairs each transaction's bytes (base64, from the block) with that decoding, by
sha256(bytes) = tx_response.txhash. --blocks writes block_H.json and block_results_H.json,
the RPC results of those heights as the fixtures hold them, looked for in FILE ... (fixture
names, as in FILES) when given, else in FILES.
"""
import base64, hashlib, json, re, subprocess, sys

FILES = """tx_msg_submit_text_proposal_and_start_voting tx_msg_deposit_and_start_voting
tx_msg_nft_issue_denom tx_msg_nft_mint_nft tx_msg_nft_transfer_nft tx_msg_nft_edit_nft
tx_msg_nft_burn_nft tx_msg_ibc_timeout tx_msg_software_upgrade tx_msg_cancel_upgrade
tx_msg_deposit_v1 tx_msg_deposit_v1_and_start_voting tx_msg_exec_legacy_content_v1
tx_msg_vote_v1 tx_msg_vote_weighted_v1 tx_msg_ibc_acknowledgement_duplicate_packet_sequence""".split()

def consts(repo, commit, name):
    path = f"usecase/parser/test/{name}.go"
    src = subprocess.run(["git", "-C", repo, "show", f"{commit}:{path}"], capture_output=True, text=True, check=True).stdout
    return path, [(n, json.loads(b)) for n, b in re.findall(r"const (\w+) = `(.*?)`", src, re.S)]

def main():
    repo, commit = sys.argv[1], sys.argv[2]
    blocks = set(sys.argv[4].split(",")) if len(sys.argv) > 4 and sys.argv[3] == "--blocks" else None
    files = sys.argv[5:] if blocks is not None and len(sys.argv) > 5 else FILES
    out = []
    for name in files:
        path, cs = consts(repo, commit, name)
        block = next(j for n, j in cs if n.endswith("_BLOCK_RESP"))["result"]
        header = block["block"]["header"]
        if blocks is not None:
            if header["height"] in blocks:
                results = next(j for n, j in cs if "BLOCK_RESULT" in n)["result"]
                for fn, v in (("block", block), ("block_results", results)):
                    with open(f"{fn}_{header['height']}.json", "w") as f:
                        json.dump(v, f, indent=1)
                        f.write("\n")
            continue
        txs = {hashlib.sha256(base64.b64decode(t)).hexdigest().upper(): t for t in block["block"]["data"]["txs"]}
        for n, j in cs:
            if "TXS_RESP" not in n:
                continue
            h = j["tx_response"]["txhash"]
            out.append({"source": f"{path} {n}", "chain_id": header["chain_id"], "height": header["height"],
                        "time": header["time"], "txhash": h, "tx_bytes": txs[h], "tx": j["tx"]})
    if blocks is None:
        json.dump(out, sys.stdout, indent=1)
        sys.stdout.write("\n")

main()
