#!/usr/bin/env python3
"""Drive a local `geth --dev` node until it has a small, varied EVM chain.

Everything is sent with eth_sendTransaction from the dev account (unlocked in --dev):
legacy (type 0), access-list (type 1) and EIP-1559 (type 2) value transfers, a contract
deployment whose constructor logs, contract calls emitting LOG0..LOG4 (0-4 topics, empty and
non-empty data) and calls that revert (status 0). The contract is hand-assembled below, so no
Solidity compiler is needed.

Usage: evm_gen.py [--rpc URL] [--blocks N]
Prints the tip height and the contract address when done on stdout.
"""
import argparse
import json
import sys
import time
import urllib.request

# Topics: ERC-20 Transfer(address,address,uint256), and an arbitrary marker for the rest.
TRANSFER = "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
PING = "5049" + "4e47" + "00" * 28  # "PING" padded

# Opcodes used by the contract.
OP = {
    "STOP": 0x00, "EQ": 0x14, "ISZERO": 0x15, "SHR": 0x1C, "ADDRESS": 0x30, "CALLER": 0x33,
    "CALLDATALOAD": 0x35, "CALLDATASIZE": 0x36, "CALLDATACOPY": 0x37, "CODECOPY": 0x39,
    "NUMBER": 0x43, "DUP1": 0x80, "POP": 0x50, "JUMPI": 0x57, "JUMPDEST": 0x5B, "RETURN": 0xF3,
    "REVERT": 0xFD, "LOG0": 0xA0, "LOG1": 0xA1, "LOG2": 0xA2, "LOG3": 0xA3, "LOG4": 0xA4,
}


def assemble(prog):
    """Two-pass assembler: items are opcode names, ("push", hexstr), ("label", name) and
    ("pushlabel", name), which becomes a PUSH2 of the label's offset."""
    def size(item):
        if isinstance(item, str):
            return 1
        if item[0] == "push":
            return 1 + len(item[1]) // 2
        if item[0] == "pushlabel":
            return 3
        return 0  # label

    labels, pc = {}, 0
    for item in prog:
        if not isinstance(item, str) and item[0] == "label":
            labels[item[1]] = pc
        pc += size(item)
    out = bytearray()
    for item in prog:
        if isinstance(item, str):
            out.append(OP[item])
        elif item[0] == "push":
            data = bytes.fromhex(item[1])
            out.append(0x5F + len(data))
            out += data
        elif item[0] == "pushlabel":
            out.append(0x61)
            out += labels[item[1]].to_bytes(2, "big")
    return bytes(out)


def log(n):
    """Emit LOGn: data is the whole calldata (LOG1 has empty data), topics vary by n."""
    topics = {
        0: [],
        1: [("push", PING)],
        2: [("push", PING), "CALLER"],
        3: [("push", TRANSFER), "CALLER", "ADDRESS"],
        4: [("push", PING), "CALLER", "ADDRESS", "NUMBER"],
    }[n]
    # LOGn pops offset, size, topic0..; so push the topics last-first, then size, then offset.
    code = list(reversed(topics))
    code += [("push", "00")] if n == 1 else ["CALLDATASIZE"]
    code += [("push", "00"), "LOG%d" % n]
    return code


def runtime():
    """Calldata byte 0 selects: 0..4 emit LOG0..LOG4, 5 emits all five, 0xff reverts with the
    calldata as revert data, anything else does nothing (empty calldata reads as mode 0)."""
    prog = ["CALLDATASIZE", ("push", "00"), ("push", "00"), "CALLDATACOPY",
            ("push", "00"), "CALLDATALOAD", ("push", "f8"), "SHR"]  # stack: mode
    for mode in ["00", "01", "02", "03", "04", "05", "ff"]:
        prog += ["DUP1", ("push", mode), "EQ", ("pushlabel", "m" + mode), "JUMPI"]
    prog += ["STOP"]
    for n in range(5):
        prog += [("label", "m0%d" % n), "JUMPDEST"] + log(n) + ["STOP"]
    prog += [("label", "m05"), "JUMPDEST"]
    for n in range(5):
        prog += log(n)
    prog += ["STOP"]
    prog += [("label", "mff"), "JUMPDEST", "CALLDATASIZE", ("push", "00"), "REVERT"]
    return assemble(prog)


def initcode():
    """Constructor: emit LOG1(PING) so the creation receipt carries a log, then return the
    runtime, which is appended after the constructor."""
    rt = runtime()

    def ctor(off):
        return assemble([("push", PING), ("push", "00"), ("push", "00"), "LOG1",
                         ("push", "%04x" % len(rt)), "DUP1", ("push", "%04x" % off),
                         ("push", "00"), "CODECOPY", ("push", "00"), "RETURN"])
    off = len(ctor(0))
    return ctor(off) + rt


class RPC:
    def __init__(self, url):
        self.url = url
        self.id = 0

    def call(self, method, *params):
        self.id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.id, "method": method,
                           "params": list(params)}).encode()
        req = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            res = json.load(r)
        if "error" in res:
            raise RuntimeError("%s: %s" % (method, res["error"]))
        return res["result"]


def wait_block_above(rpc, h, deadline):
    while time.time() < deadline:
        cur = int(rpc.call("eth_blockNumber"), 16)
        if cur > h:
            return cur
        time.sleep(0.05)
    raise SystemExit("evm_gen: node stopped producing blocks")


def wait_receipt(rpc, txh, deadline):
    while time.time() < deadline:
        r = rpc.call("eth_getTransactionReceipt", txh)
        if r:
            return r
        time.sleep(0.1)
    raise SystemExit("evm_gen: no receipt for " + txh)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rpc", default="http://127.0.0.1:8545")
    ap.add_argument("--blocks", type=int, default=30)
    a = ap.parse_args()
    rpc = RPC(a.rpc)
    deadline = time.time() + 300
    me = rpc.call("eth_accounts")[0]
    gwei = 10**9

    def to_addr(i):
        return "0x" + ("%040x" % (0xB10C0000 + i))

    def legacy(i, value):
        return {"from": me, "to": to_addr(i), "value": hex(value), "gasPrice": hex(3 * gwei)}

    def eip1559(i, value):
        return {"from": me, "to": to_addr(i), "value": hex(value),
                "maxFeePerGas": hex(5 * gwei), "maxPriorityFeePerGas": hex(gwei)}

    def access_list(i, value):
        return {"from": me, "to": to_addr(i), "value": hex(value), "gasPrice": hex(3 * gwei),
                "gas": hex(40000),
                "accessList": [{"address": to_addr(i), "storageKeys": ["0x" + "00" * 31 + "01"]}]}

    h = wait_block_above(rpc, 0, deadline)
    # Deploy first, alone, and wait for it: later blocks call it.
    def deploy():
        return {"from": me, "data": "0x" + initcode().hex(), "gas": hex(300000),
                "maxFeePerGas": hex(5 * gwei), "maxPriorityFeePerGas": hex(gwei)}

    dep = rpc.call("eth_sendTransaction", deploy())
    rcpt = wait_receipt(rpc, dep, deadline)
    contract = rcpt["contractAddress"]
    if rcpt["status"] != "0x1" or not contract:
        raise SystemExit("evm_gen: deployment failed: %s" % rcpt)

    def call(mode, payload="", legacy_tx=False):
        tx = {"from": me, "to": contract, "data": "0x" + mode + payload, "gas": hex(100000)}
        if legacy_tx:
            tx["gasPrice"] = hex(3 * gwei)
        return tx

    word = "%064x" % 1000
    # One entry per block: the txs sent right after the previous block appeared.
    plan = [
        [],
        [legacy(1, 1)],
        [eip1559(2, 2), legacy(3, 3), access_list(4, 4)],
        [],
        [call("00", word), call("01"), call("02", word), call("03", word), call("04", word)],
        [call("05", word)],
        [],
        [call("ff", "dead", legacy_tx=True)],  # reverted, status 0
        [eip1559(i, i) for i in range(5, 15)],  # 10 txs
        [],
        [call("03", word), legacy(15, 10**18), call("ff"), call("", ""), call("07"),
         access_list(16, 5)],
        [call("05"), call("05", word), call("02", "", legacy_tx=True)],
        [],
        [],
        [call("04", word * 3), eip1559(17, 7)],
        [],
        [deploy(), call("01"), legacy(18, 1)],  # a second contract, created beside other txs
        [dict(call("03", word), value=hex(12345))],  # value sent to a contract
        [],
        [eip1559(i, i) for i in range(19, 23)] + [call("05", word, legacy_tx=True)],
        [call("ff", word * 2), call("02", word)],
        [],
        [access_list(23, 1), access_list(24, 2)],
        [call("00")],
    ]
    errors = []
    for txs in plan:
        for tx in txs:
            try:
                rpc.call("eth_sendTransaction", tx)
            except RuntimeError as e:
                errors.append((tx, str(e)))
        h = wait_block_above(rpc, h, deadline)
    while h < a.blocks:
        h = wait_block_above(rpc, h, deadline)
    if errors:
        for tx, err in errors:
            print("evm_gen: %s: %s" % (json.dumps(tx), err), file=sys.stderr)
        raise SystemExit(1)
    print(h, contract)


if __name__ == "__main__":
    main()
