// Writes txs.json: Cosmos SDK transactions built, encoded and signed with
// CosmJS (the SDK's JavaScript client, an encoder independent of
// blockhaul), each with what CosmJS itself reads back from the bytes: the
// messages' type URLs, values and JSON (keys in proto snake_case), the
// memo, the fee and the signers' addresses from their public keys.
//
//   npm install && node make_txs.mjs
//
// Each tx's bytes hold exactly one '=' and no ':' (the sequence number is
// varied until they do), so that CometBFT's kvstore app accepts them as a
// key=value tx and a real node can put them in blocks (see README.md).
import { writeFileSync } from "node:fs";
import { DirectSecp256k1Wallet, DirectEthSecp256k1Wallet, makeAuthInfoBytes, makeSignDoc, encodePubkey, decodeTxRaw } from "@cosmjs/proto-signing";
import { encodeSecp256k1Pubkey, pubkeyToAddress, rawEthSecp256k1PubkeyToRawAddress, createMultisigThresholdPubkey } from "@cosmjs/amino";
import { sha256 } from "@cosmjs/crypto";
import { fromBech32, toBase64, toBech32, toUtf8 } from "@cosmjs/encoding";
import { TxRaw, TxBody } from "cosmjs-types/cosmos/tx/v1beta1/tx";
import { MsgSend, MsgMultiSend } from "cosmjs-types/cosmos/bank/v1beta1/tx";
import { MsgDelegate, MsgUndelegate, MsgBeginRedelegate } from "cosmjs-types/cosmos/staking/v1beta1/tx";
import { MsgWithdrawDelegatorReward, MsgWithdrawValidatorCommission } from "cosmjs-types/cosmos/distribution/v1beta1/tx";
import * as govV1beta1 from "cosmjs-types/cosmos/gov/v1beta1/tx";
import * as govV1 from "cosmjs-types/cosmos/gov/v1/tx";
import { MsgTransfer } from "cosmjs-types/ibc/applications/transfer/v1/tx";
import { MsgExecuteContract } from "cosmjs-types/cosmwasm/wasm/v1/tx";

const types = {
  "/cosmos.bank.v1beta1.MsgSend": MsgSend,
  "/cosmos.bank.v1beta1.MsgMultiSend": MsgMultiSend,
  "/cosmos.staking.v1beta1.MsgDelegate": MsgDelegate,
  "/cosmos.staking.v1beta1.MsgUndelegate": MsgUndelegate,
  "/cosmos.staking.v1beta1.MsgBeginRedelegate": MsgBeginRedelegate,
  "/cosmos.distribution.v1beta1.MsgWithdrawDelegatorReward": MsgWithdrawDelegatorReward,
  "/cosmos.distribution.v1beta1.MsgWithdrawValidatorCommission": MsgWithdrawValidatorCommission,
  "/cosmos.gov.v1beta1.MsgVote": govV1beta1.MsgVote,
  "/cosmos.gov.v1beta1.MsgDeposit": govV1beta1.MsgDeposit,
  "/cosmos.gov.v1.MsgVote": govV1.MsgVote,
  "/ibc.applications.transfer.v1.MsgTransfer": MsgTransfer,
  "/cosmwasm.wasm.v1.MsgExecuteContract": MsgExecuteContract, // not decoded by blockhaul: raw bytes only
};
const decodedByBlockhaul = (url) => url !== "/cosmwasm.wasm.v1.MsgExecuteContract";

// MsgTransfer.encoding (field 9) is ibc-go v9's alone, which CosmJS knows
// and blockhaul does not decode.
function blockhaulFields(url, v) {
  if (url === "/ibc.applications.transfer.v1.MsgTransfer" && v.encoding === "") delete v.encoding;
  return v;
}

const key = (label) => sha256(toUtf8("blockhaul fixture key " + label));
const snake = (v) => {
  if (Array.isArray(v)) return v.map(snake);
  if (v && typeof v === "object") {
    const out = {};
    for (const [k, x] of Object.entries(v)) out[k.replace(/[A-Z]/g, (c) => "_" + c.toLowerCase())] = snake(x);
    return out;
  }
  return v;
};

async function signer(label, prefix, eth = false) {
  const w = eth ? await DirectEthSecp256k1Wallet.fromKey(key(label), prefix) : await DirectSecp256k1Wallet.fromKey(key(label), prefix);
  const [acc] = await w.getAccounts();
  return { w, address: acc.address, pubkey: acc.pubkey, eth };
}

function anyPubkey(s) {
  if (s.eth) return encodePubkey({ type: "os/PubKeyEthSecp256k1", value: toBase64(s.pubkey) });
  return encodePubkey(encodeSecp256k1Pubkey(s.pubkey));
}

const okBytes = (b) => {
  let eq = 0;
  for (const c of b) {
    if (c === 0x3a) return false;
    if (c === 0x3d) eq++;
  }
  return eq === 1 && b[0] !== 0x3d && b[b.length - 1] !== 0x3d;
};

async function build(name, signers, msgs, { memo = "", fee, gas = 200000n, payer = "", granter = "", multisig = null, chainId = "blockhaul-sdk" }) {
  // A length byte can be ':' or '=' whatever the sequence: then the memo
  // grows by a space until none is.
  for (let pad = 0; pad < 40; pad++) {
  const bodyBytes = TxBody.encode(TxBody.fromPartial({
    messages: msgs.map(([typeUrl, v]) => ({ typeUrl, value: types[typeUrl].encode(types[typeUrl].fromPartial(v)).finish() })),
    memo: memo + " ".repeat(pad),
  })).finish();
  for (let seq = 0; seq < 200; seq++) {
    let infos;
    if (multisig) {
      infos = [{ pubkey: encodePubkey(multisig), sequence: BigInt(seq) }];
    } else {
      infos = signers.map((s, i) => ({ pubkey: anyPubkey(s), sequence: BigInt(seq + i) }));
    }
    const authInfoBytes = makeAuthInfoBytes(infos, fee, gas, granter, payer);
    const doc = makeSignDoc(bodyBytes, authInfoBytes, chainId, 7);
    const sigs = [];
    for (const s of multisig ? signers.slice(0, 1) : signers) {
      const { signature } = await s.w.signDirect(s.address, doc);
      sigs.push(Buffer.from(signature.signature, "base64"));
    }
    const raw = TxRaw.encode(TxRaw.fromPartial({ bodyBytes, authInfoBytes, signatures: sigs })).finish();
    if (!okBytes(raw)) continue;
    // What CosmJS reads back from the bytes.
    const d = decodeTxRaw(raw);
    const prefix = signers[0].address.slice(0, signers[0].address.lastIndexOf("1"));
    const addrs = d.authInfo.signerInfos.map((si) => {
      const url = si.publicKey.typeUrl;
      if (url === "/cosmos.crypto.secp256k1.PubKey") {
        return pubkeyToAddress(encodeSecp256k1Pubkey(si.publicKey.value.slice(2)), prefix);
      }
      if (url === "/cosmos.evm.crypto.v1.ethsecp256k1.PubKey") {
        return toBech32(prefix, rawEthSecp256k1PubkeyToRawAddress(si.publicKey.value.slice(2)));
      }
      return null; // no address from the key: blockhaul falls back to the message's signer
    });
    return {
      name,
      tx: toBase64(raw),
      expect: {
        memo: d.body.memo,
        fee: d.authInfo.fee.amount.map((c) => ({ denom: c.denom, amount: c.amount })),
        gas_limit: d.authInfo.fee.gasLimit.toString(),
        payer: d.authInfo.fee.payer,
        granter: d.authInfo.fee.granter,
        signer_pubkey_addresses: addrs,
        messages: d.body.messages.map((m) => ({
          type_url: m.typeUrl,
          value: toBase64(m.value),
          decoded: decodedByBlockhaul(m.typeUrl) ? blockhaulFields(m.typeUrl, snake(types[m.typeUrl].toJSON(types[m.typeUrl].decode(m.value)))) : null,
        })),
      },
    };
  }
  }
  throw new Error(name + ": no sequence gives bytes the kvstore accepts");
}

const coin = (amount, denom) => ({ amount: String(amount), denom });
const fee1 = [coin(5000, "uatom")];
const a = await signer("alice", "cosmos");
const b = await signer("bob", "cosmos");
const c = await signer("carol", "cosmos");
const e = await signer("erin", "crc", true);
const valoper = toBech32("cosmosvaloper", sha256(toUtf8("validator one")).slice(0, 20));
const valoper2 = toBech32("cosmosvaloper", sha256(toUtf8("validator two")).slice(0, 20));
const bValoper = toBech32("cosmosvaloper", fromBech32(b.address, 90).data);

const txs = [];
txs.push(await build("bank send, memo", [a], [["/cosmos.bank.v1beta1.MsgSend", { fromAddress: a.address, toAddress: b.address, amount: [coin(1234567, "uatom")] }]],
  { memo: "blockhaul=send \u00e9\u2014\ud83d\ude80 \"quoted\"", fee: fee1 }));
txs.push(await build("bank multisend, two fee denoms, payer and granter", [a], [["/cosmos.bank.v1beta1.MsgMultiSend", {
  inputs: [{ address: a.address, coins: [coin(1200, "uatom"), coin(7, "ibc/27394FB092D2ECCD56123C74F36E4C1F926001CEADA9CA97EA622B25F41E5EB2")] }],
  outputs: [{ address: b.address, coins: [coin(1000, "uatom")] }, { address: c.address, coins: [coin(200, "uatom"), coin(7, "ibc/27394FB092D2ECCD56123C74F36E4C1F926001CEADA9CA97EA622B25F41E5EB2")] }],
}]], { memo: "multi=send", fee: [coin(2500, "uatom"), coin(10, "uosmo")], gas: 350000n, payer: a.address, granter: c.address }));
txs.push(await build("staking delegate, undelegate, redelegate", [b], [
  ["/cosmos.staking.v1beta1.MsgDelegate", { delegatorAddress: b.address, validatorAddress: valoper, amount: coin("250000000000000000000000", "uatom") }],
  ["/cosmos.staking.v1beta1.MsgUndelegate", { delegatorAddress: b.address, validatorAddress: valoper, amount: coin(1, "uatom") }],
  ["/cosmos.staking.v1beta1.MsgBeginRedelegate", { delegatorAddress: b.address, validatorSrcAddress: valoper, validatorDstAddress: valoper2, amount: coin(99, "uatom") }],
], { memo: "stake=3", fee: fee1 }));
txs.push(await build("distribution withdraw rewards and commission", [b], [
  ["/cosmos.distribution.v1beta1.MsgWithdrawDelegatorReward", { delegatorAddress: b.address, validatorAddress: valoper }],
  ["/cosmos.distribution.v1beta1.MsgWithdrawDelegatorReward", { delegatorAddress: b.address, validatorAddress: valoper2 }],
  ["/cosmos.distribution.v1beta1.MsgWithdrawValidatorCommission", { validatorAddress: bValoper }],
], { memo: "", fee: fee1, gas: 0n }));
txs.push(await build("gov votes and deposit", [c], [
  ["/cosmos.gov.v1beta1.MsgVote", { proposalId: 912n, voter: c.address, option: 1 }],
  ["/cosmos.gov.v1.MsgVote", { proposalId: 18446744073709551615n, voter: c.address, option: 4, metadata: "ipfs=none" }],
  ["/cosmos.gov.v1beta1.MsgDeposit", { proposalId: 913n, depositor: c.address, amount: [coin(10000000, "uatom")] }],
], { memo: "gov", fee: [] }));
txs.push(await build("ibc transfer", [a], [["/ibc.applications.transfer.v1.MsgTransfer", {
  sourcePort: "transfer", sourceChannel: "channel-141", token: coin(1000000, "uatom"), sender: a.address,
  receiver: "osmo1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5a4ayn7", timeoutHeight: { revisionNumber: 1n, revisionHeight: 20250101n },
  timeoutTimestamp: 1733000000000000000n, memo: "forward=osmo",
}]], { memo: "", fee: fee1 }));
txs.push(await build("ibc transfer, no timeout height", [a], [["/ibc.applications.transfer.v1.MsgTransfer", {
  sourcePort: "transfer", sourceChannel: "channel-0", token: coin(5, "uatom"), sender: a.address,
  receiver: "osmo1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5a4ayn7", timeoutTimestamp: 1n, memo: "",
}]], { memo: "t=1", fee: fee1 }));
txs.push(await build("wasm execute: a type not decoded", [a], [["/cosmwasm.wasm.v1.MsgExecuteContract", {
  sender: a.address, contract: toBech32("cosmos", sha256(toUtf8("contract"))), msg: toUtf8('{"swap"={}}'), funds: [coin(1, "uatom")],
}]], { memo: "", fee: fee1 }));
txs.push(await build("two signers", [a, b], [
  ["/cosmos.bank.v1beta1.MsgSend", { fromAddress: a.address, toAddress: c.address, amount: [coin(1, "uatom")] }],
  ["/cosmos.bank.v1beta1.MsgSend", { fromAddress: b.address, toAddress: c.address, amount: [coin(2, "uatom")] }],
  ["/cosmos.bank.v1beta1.MsgSend", { fromAddress: a.address, toAddress: b.address, amount: [coin(3, "uatom")] }],
], { memo: "two=signers", fee: fee1 }));
txs.push(await build("ethsecp256k1 signer", [e], [["/cosmos.bank.v1beta1.MsgSend", { fromAddress: e.address, toAddress: e.address, amount: [coin(1, "basecro")] }]],
  { memo: "eth=key", fee: [coin(1, "basecro")], chainId: "cronos_25-1" }));
const ms = createMultisigThresholdPubkey([encodeSecp256k1Pubkey(a.pubkey), encodeSecp256k1Pubkey(b.pubkey)], 1);
const msAddr = pubkeyToAddress(ms, "cosmos");
txs.push(await build("multisig signer", [a], [["/cosmos.bank.v1beta1.MsgSend", { fromAddress: msAddr, toAddress: a.address, amount: [coin(4, "uatom")] }]],
  { memo: "multi=sig", fee: fee1, multisig: ms }));

writeFileSync(new URL("./txs.json", import.meta.url), JSON.stringify({ generator: "make_txs.mjs, CosmJS 0.39.0, cosmjs-types 0.11.0", txs }, null, 1) + "\n");
console.log(txs.length + " txs");
