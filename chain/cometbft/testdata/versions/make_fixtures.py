#!/usr/bin/env python3
"""Writes block_v034.json, block_v037.json, block_v038.json and block_sei.json: one block as
CometBFT 0.34, 0.37 and 0.38 nodes and Sei's fork print it (see README.md). Run from anywhere: python3 make_fixtures.py"""
import base64, copy, hashlib, json, os

H = 9000123
def hx(tag): return hashlib.sha256(tag.encode()).hexdigest().upper()

tx0 = bytes(range(0, 256)) + b"ibc transfer tx body"   # arbitrary bytes, incl. NUL and 0xff
tx1 = b"\x0a\x90\x01" + b"failed send " * 20
txs = [base64.b64encode(tx0).decode(), base64.b64encode(tx1).decode()]

S = "cosmos1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5lzv7xu"
R = "osmo1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5a4ayn7"
FEE = "cosmos17xpfvakm2amg962yls6f84z3kell8c5lserqta"
MINT = "cosmos1m3h30wlvsf8llruxtpukdvsy0km2kum8g38c8q"
DIST = "cosmos1jv65s3grqf6v6jl3dp4t6c9t9rk99cd88lyufl"
ESC = "cosmos1x54ltnyg88k0ejmk8ytwrhd3ltm84xehrnlslf"
VAL = "cosmosvaloper1sjllsnramtg3ewxqwwrwjxfgc4n4ef9u2lcnj0"

def ev(t, *kv): return {"type": t, "attributes": [{"key": k, "value": v, "index": True} for k, v in kv]}

ante = [
    ev("coin_spent", ("spender", S), ("amount", "5000uatom")),
    ev("coin_received", ("receiver", FEE), ("amount", "5000uatom")),
    ev("transfer", ("recipient", FEE), ("sender", S), ("amount", "5000uatom")),
    ev("message", ("sender", S)),
    ev("tx", ("fee", "5000uatom"), ("fee_payer", S)),
    ev("tx", ("acc_seq", S + "/42")),
    ev("tx", ("signature", "4NwWTAzv4yW4gsH6lj5OZ5KmuD6V9b8vQ0r1X2nJ3X8gzJ5x9Rbs8w+8WQYpGBZp0Gk9Qq9qY5n0O3q4vCkMvA==")),
]
memo = 'say "hi" \u00e9\u2014\U0001F680 tab\there nul\x00end'
tx0_events = ante + [
    ev("message", ("action", "/ibc.applications.transfer.v1.MsgTransfer"), ("sender", S), ("module", "transfer")),
    ev("coin_spent", ("spender", S), ("amount", "1000000uatom")),
    ev("coin_received", ("receiver", ESC), ("amount", "1000000uatom")),
    ev("transfer", ("recipient", ESC), ("sender", S), ("amount", "1000000uatom")),
    ev("send_packet", ("packet_data", json.dumps({"amount": "1000000", "denom": "uatom", "receiver": R, "sender": S}, separators=(",", ":"))),
       ("packet_sequence", "1234567"), ("packet_src_channel", "channel-141"), ("packet_dst_channel", "channel-0")),
    ev("ibc_transfer", ("sender", S), ("receiver", R), ("memo", memo)),
    # An attribute with an empty value, as chains do emit.
    ev("message", ("module", "ibc_channel"), ("note", "")),
]
tx1_events = ante

begin = [
    ev("coin_received", ("receiver", MINT), ("amount", "4417000uatom")),
    ev("coinbase", ("minter", MINT), ("amount", "4417000uatom")),
    ev("coin_spent", ("spender", MINT), ("amount", "4417000uatom")),
    ev("mint", ("bonded_ratio", "0.623456789012345678"), ("inflation", "0.140000000000000000"), ("annual_provisions", "43210987654321.123456789012345678"), ("amount", "4417000")),
    ev("transfer", ("recipient", DIST), ("sender", FEE), ("amount", "4421000uatom")),
    ev("commission", ("amount", "22105.000000000000000000uatom"), ("validator", VAL)),
    ev("rewards", ("amount", "442100.000000000000000000uatom"), ("validator", VAL)),
]
end = [
    ev("complete_unbonding", ("amount", "250000000uatom"), ("validator", VAL), ("delegator", S)),
]

def header(app):
    v = {"block": "11"}
    if app: v["app"] = "1"
    return {
        "version": v, "chain_id": "cosmoshub-4", "height": str(H), "time": "2022-02-15T10:11:12.345678901Z",
        "last_block_id": {"hash": hx("parent"), "parts": {"total": 1, "hash": hx("pparts")}},
        "last_commit_hash": hx("lc"), "data_hash": hx("data"), "validators_hash": hx("vals"),
        "next_validators_hash": hx("vals"), "consensus_hash": hx("cons"), "app_hash": hx("app"),
        "last_results_hash": hx("lr"), "evidence_hash": "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
        "proposer_address": "83F47D7747B0F633A6BA0DF49B7DCF61F90AA1B0",
    }

def block(app):
    return {
        "block_id": {"hash": hx("block"), "parts": {"total": 1, "hash": hx("parts")}},
        "block": {
            "header": header(app),
            "data": {"txs": txs},
            "evidence": {"evidence": []},
            "last_commit": {"height": str(H - 1), "round": 0,
                            "block_id": {"hash": hx("parent"), "parts": {"total": 1, "hash": hx("pparts")}},
                            "signatures": [
                                {"block_id_flag": 2, "validator_address": "83F47D7747B0F633A6BA0DF49B7DCF61F90AA1B0", "timestamp": "2022-02-15T10:11:12.1Z", "signature": "dGVzdCBzaWduYXR1cmUgb2Ygc2l4dHktZm91ciBieXRlcyBmb3IgYSB0ZXN0IGZpeHR1cmUgaGVyZSEhISEhIQ=="},
                                {"block_id_flag": 1, "validator_address": "", "timestamp": "0001-01-01T00:00:00Z", "signature": None}]},
        },
    }

def results(events_tx0, events_tx1, legacy):
    r = {"height": str(H), "txs_results": [
        {"code": 0, "data": "Ei0KKy9pYmMuYXBwbGljYXRpb25zLnRyYW5zZmVyLnYxLk1zZ1RyYW5zZmVyUmVzcG9uc2U=",
         "log": json.dumps([{"msg_index": 0, "events": [{"type": "message", "attributes": [{"key": "action", "value": "/ibc.applications.transfer.v1.MsgTransfer"}]}]}], separators=(",", ":")) if legacy else "",
         "info": "", "gas_wanted": "200000", "gas_used": "123456", "events": events_tx0, "codespace": ""},
        {"code": 5, "data": None,
         "log": "failed to execute message; message index: 0: 10uatom is smaller than 5000uatom: insufficient funds",
         "info": "", "gas_wanted": "100000", "gas_used": "61234", "events": events_tx1, "codespace": "sdk"},
    ]}
    return r

def b64ev(evs):
    out = copy.deepcopy(evs)
    for e in out:
        for a in e["attributes"]:
            a["key"] = base64.b64encode(a["key"].encode()).decode()
            a["value"] = base64.b64encode(a["value"].encode()).decode()
    return out

def moded(evs, mode):
    out = copy.deepcopy(evs)
    for e in out:
        e["attributes"].append({"key": "mode", "value": mode, "index": False})
    return out

# 0.34: base64 attributes, begin/end block events.
r34 = results(b64ev(tx0_events), b64ev(tx1_events), True)
r34["begin_block_events"] = b64ev(begin)
r34["end_block_events"] = b64ev(end)
r34["validator_updates"] = None
r34["consensus_param_updates"] = {"block": {"max_bytes": "200000", "max_gas": "40000000", "time_iota_ms": "1000"}, "evidence": {"max_age_num_blocks": "1000000", "max_age_duration": "172800000000000", "max_bytes": "50000"}, "validator": {"pub_key_types": ["ed25519"]}}
# 0.37: plain attributes, begin/end block events.
r37 = results(tx0_events, tx1_events, False)
r37["begin_block_events"] = begin
r37["end_block_events"] = end
r37["validator_updates"] = None
r37["consensus_param_updates"] = None
# 0.38: finalize_block_events with the mode attribute the SDK appends.
r38 = results(tx0_events, tx1_events, False)
r38["finalize_block_events"] = moded(begin, "BeginBlock") + moded(end, "EndBlock")
r38["validator_updates"] = None
r38["consensus_param_updates"] = None
r38["app_hash"] = base64.b64encode(bytes.fromhex(hx("next app"))).decode()

# Sei: 0.38's shape (finalize_block_events) with 0.34's base64 attributes, everywhere.
rsei = copy.deepcopy(r38)
rsei["finalize_block_events"] = b64ev(rsei["finalize_block_events"])
for t in rsei["txs_results"]:
    t["events"] = b64ev(t["events"])

for name, app, r in (("v034", False, r34), ("v037", True, r37), ("v038", True, r38), ("sei", True, rsei)):
    rec = {"block": block(app), "block_results": r}
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "block_%s.json" % name), "w") as f:
        f.write(json.dumps(rec, indent=2, ensure_ascii=(name == "v037")) + "\n")
