package cometbft

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"math/big"
	"slices"
	"strings"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/cometbft/protodec"
	"github.com/blockhaul/blockhaul/chain/jsonscan"
	"google.golang.org/protobuf/encoding/protowire"

	"golang.org/x/crypto/ripemd160" //nolint:staticcheck // see ValidatorAddress
	"golang.org/x/crypto/sha3"
)

// Cosmos SDK transactions, read from their protobuf bytes: TxRaw{body_bytes,
// auth_info_bytes, signatures}, TxBody{messages, memo, …} and
// AuthInfo{signer_infos, fee}.
//
// A tx is taken for an SDK tx only when all of it reads so: TxRaw has no
// field but 1–3, all length-delimited, its body has at least one message,
// every message an Any whose type URL starts with '/', and body and auth
// info are well-formed. Anything else — the kvstore app's "key=value", an
// EVM chain's raw Ethereum tx — is not an SDK tx: it has no messages and
// its fee, memo and signer columns are NULL. That never fails the export.
//
// # Signers
//
// transactions.signers has one address per AuthInfo.signer_infos entry,
// in that order (the order of the SDK's GetSigners). Each is the bech32
// account address of the entry's public key where the key type is known:
// secp256k1 (RIPEMD-160 of SHA-256 of the compressed key), ed25519 (the
// first 20 bytes of its SHA-256) and the ethsecp256k1 keys of EVM chains
// (the last 20 bytes of Keccak-256 of the uncompressed key). The address
// does not depend on decoding a message; its bech32 prefix is the chain's,
// taken, in this order, from: --bech32-prefix; an account address in the
// tx's events whose bytes are a signer key's address (tx.acc_seq,
// tx.fee_payer, the bank's transfer/coin_spent/coin_received: the chain
// writes its own accounts there); any account address in those events of
// the block's txs; a message.sender of a signer key's bytes (after the bank's:
// old SDK staking and distribution modules wrote an operator's address
// there, and crypto.org's operator prefix is crocncl, not crovaloper); the
// signer field (cosmos.msg.v1.signer) of a decoded message (a validator
// operator prefix such as cosmosvaloper read as cosmos); the fee payer or
// granter. Where the key type is not known (a multisig key, none given) or
// no prefix can be learnt, the entry is the tx.acc_seq address at its
// position when the tx has one per signer (the SDK writes them in signer
// order), else the signer field of the message at the same position, else
// NULL. A tx that signs with no signer_infos has an empty array.
//
// fee_payer is Fee.payer when set, else the first signer, as the SDK
// charges it; fee_granter is Fee.granter, NULL when unset.

// sdkMsg is one message of a tx: an Any.
type sdkMsg struct {
	typeURL, value []byte
}

// sdkCoin is one Coin of a fee.
type sdkCoin struct {
	denom, amount []byte
}

// sdkSigner is the public key of one SignerInfo.
type sdkSigner struct {
	keyType, key []byte
}

// sdkTx is what is read from one tx; every slice points into the tx bytes.
type sdkTx struct {
	msgs           []sdkMsg
	memo           []byte
	fee            []sdkCoin
	gasLimit       uint64
	payer, granter []byte
	signers        []sdkSigner
}

// reset empties t, keeping its slices' memory.
func (t *sdkTx) reset() {
	*t = sdkTx{msgs: t.msgs[:0], fee: t.fee[:0], signers: t.signers[:0]}
}

// signerOnly names the signer field of common messages the built-in
// descriptors do not know, for the signers column (CosmWasm's are not part
// of the SDK or ibc-go).
var signerOnly = map[string]protowire.Number{
	"/cosmwasm.wasm.v1.MsgExecuteContract":     1,
	"/cosmwasm.wasm.v1.MsgInstantiateContract": 1,
	"/cosmwasm.wasm.v1.MsgStoreCode":           1,
	"/cosmwasm.wasm.v1.MsgMigrateContract":     1,
}

// fieldBytes is the last length-delimited field num of message b, or nil.
func fieldBytes(b []byte, num protowire.Number) []byte {
	var out []byte
	r := pbReader{b: b}
	for f, ok := r.next(); ok; f, ok = r.next() {
		if f.num == num && f.wire == protowire.BytesType {
			out = f.bytes
		}
	}
	return out
}

// release empties t and drops every reference into tx bytes.
func (t *sdkTx) release() {
	clear(t.msgs[:cap(t.msgs)])
	clear(t.fee[:cap(t.fee)])
	clear(t.signers[:cap(t.signers)])
	t.reset()
}

// readSDKTx reads tx into t and reports whether tx is a Cosmos SDK tx.
func readSDKTx(tx []byte, t *sdkTx) bool {
	t.reset()
	var body, auth []byte
	sawBody := false
	r := pbReader{b: tx}
	for f, ok := r.next(); ok; f, ok = r.next() {
		if f.wire != protowire.BytesType {
			return false
		}
		switch f.num {
		case 1:
			body, sawBody = f.bytes, true
		case 2:
			auth = f.bytes
		case 3: // signatures
		default:
			return false
		}
	}
	if r.bad || !sawBody {
		return false
	}
	return readBody(body, t) && readAuthInfo(auth, t)
}

func readBody(b []byte, t *sdkTx) bool {
	r := pbReader{b: b}
	for f, ok := r.next(); ok; f, ok = r.next() {
		switch {
		case f.num == 1 && f.wire == protowire.BytesType:
			var m sdkMsg
			var valid bool
			if m.typeURL, m.value, valid = bytesPair(f.bytes); !valid || len(m.typeURL) < 2 || m.typeURL[0] != '/' {
				return false
			}
			t.msgs = append(t.msgs, m)
		case f.num == 1:
			return false
		case f.num == 2 && f.wire == protowire.BytesType:
			t.memo = f.bytes
		case f.num == 2:
			return false
		}
		// timeout_height, unordered, extension options: not read.
	}
	return !r.bad && len(t.msgs) > 0
}

func readAuthInfo(b []byte, t *sdkTx) bool {
	r := pbReader{b: b}
	for f, ok := r.next(); ok; f, ok = r.next() {
		if f.num != 1 && f.num != 2 {
			continue // tip (deprecated), later fields
		}
		if f.wire != protowire.BytesType {
			return false
		}
		if f.num == 1 { // SignerInfo
			var s sdkSigner
			si := pbReader{b: f.bytes}
			for g, ok := si.next(); ok; g, ok = si.next() {
				if g.num != 1 {
					continue // mode_info, sequence
				}
				if g.wire != protowire.BytesType {
					return false
				}
				keyType, anyValue, valid := bytesPair(g.bytes)
				if !valid {
					return false
				}
				s.keyType = keyType
				// The single-key PubKey messages are {bytes key = 1}.
				k := pbReader{b: anyValue}
				for h, ok := k.next(); ok; h, ok = k.next() {
					if h.num == 1 && h.wire == protowire.BytesType {
						s.key = h.bytes
					}
				}
			}
			if si.bad {
				return false
			}
			t.signers = append(t.signers, s)
			continue
		}
		fee := pbReader{b: f.bytes} // Fee
		for g, ok := fee.next(); ok; g, ok = fee.next() {
			switch {
			case g.num == 1 && g.wire == protowire.BytesType:
				var c sdkCoin
				var valid bool
				if c.denom, c.amount, valid = bytesPair(g.bytes); !valid {
					return false
				}
				t.fee = append(t.fee, c)
			case g.num == 2 && g.wire == protowire.VarintType:
				t.gasLimit = g.u
			case g.num == 3 && g.wire == protowire.BytesType:
				t.payer = g.bytes
			case g.num == 4 && g.wire == protowire.BytesType:
				t.granter = g.bytes
			case g.num <= 4:
				return false
			}
		}
		if fee.bad {
			return false
		}
	}
	return !r.bad
}

// bytesPair reads a message of bytes fields (google.protobuf.Any: type_url
// and value; Coin: denom and amount) and returns its fields 1 and 2; ok is
// false for a field of another wire type or a malformed message.
func bytesPair(b []byte) (one, two []byte, ok bool) {
	r := pbReader{b: b}
	for f, more := r.next(); more; f, more = r.next() {
		if f.wire != protowire.BytesType {
			return nil, nil, false
		}
		switch f.num {
		case 1:
			one = f.bytes
		case 2:
			two = f.bytes
		}
	}
	return one, two, !r.bad
}

// AccountAddress is the account address of a public key of a known type, or
// nil.
func AccountAddress(keyType, key []byte) []byte {
	switch string(keyType) {
	case "/cosmos.crypto.secp256k1.PubKey":
		if len(key) != 33 {
			return nil
		}
		sum := sha256.Sum256(key)
		h := ripemd160.New()
		h.Write(sum[:])
		return h.Sum(nil)
	case "/cosmos.crypto.ed25519.PubKey":
		if len(key) != 32 {
			return nil
		}
		sum := sha256.Sum256(key)
		return sum[:20]
	case "/ethermint.crypto.v1.ethsecp256k1.PubKey", "/injective.crypto.v1beta1.ethsecp256k1.PubKey",
		"/cosmos.evm.crypto.v1.ethsecp256k1.PubKey":
		xy := decompressSecp256k1(key)
		if xy == nil {
			return nil
		}
		h := sha3.NewLegacyKeccak256()
		h.Write(xy)
		return h.Sum(nil)[12:]
	}
	return nil
}

var (
	secpP, _    = new(big.Int).SetString("fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc2f", 16)
	secpSqrtExp = new(big.Int).Rsh(new(big.Int).Add(secpP, big.NewInt(1)), 2) // (p+1)/4: p ≡ 3 mod 4
)

// decompressSecp256k1 returns the 64 bytes X‖Y of a compressed secp256k1
// point, or nil when key is not one.
func decompressSecp256k1(key []byte) []byte {
	if len(key) != 33 || key[0] != 2 && key[0] != 3 {
		return nil
	}
	x := new(big.Int).SetBytes(key[1:])
	if x.Cmp(secpP) >= 0 {
		return nil
	}
	// y² = x³ + 7
	y2 := new(big.Int).Mul(x, x)
	y2.Mul(y2, x).Add(y2, big.NewInt(7)).Mod(y2, secpP)
	y := new(big.Int).Exp(y2, secpSqrtExp, secpP)
	if new(big.Int).Mul(y, y).Mod(new(big.Int).Mul(y, y), secpP).Cmp(y2) != 0 {
		return nil // x is not on the curve
	}
	if y.Bit(0) != uint(key[0]&1) {
		y.Sub(secpP, y)
	}
	out := make([]byte, 64)
	x.FillBytes(out[:32])
	y.FillBytes(out[32:])
	return out
}

// bech32Prefix returns the human-readable part of a bech32 account or
// validator operator address with a valid checksum ("cosmos" of cosmos1…
// and cosmosvaloper1…), or "" when s is not one.
func bech32Prefix(s []byte) string {
	if !bech32Valid(s) {
		return ""
	}
	return validBech32Prefix(s)
}

// validBech32Prefix is bech32Prefix of s that bech32Valid has accepted.
func validBech32Prefix(s []byte) string {
	p := string(s[:bech32Prefix0(s)])
	if q, ok := strings.CutSuffix(p, "valoper"); ok && q != "" {
		return q
	}
	return p
}

// emitSDK fills the SDK columns of the transactions row of tx (index i)
// and appends its messages rows; msgJS is the block's arena for decoded
// JSON, returned grown.
func (st *decodeState) emitSDK(rows *chain.Rows, row []any, i int, tx []byte, hv, tv any, msgJS []byte) []byte {
	t := &st.sdk
	if !readSDKTx(tx, t) {
		for c := tMemo; c < tWidth; c++ {
			row[c] = nil
		}
		return msgJS
	}
	st.msgSigners = st.msgSigners[:0]
	prefix, learned := "", false // learned: from a decoded message's signer, which outranks a guess
	set := st.msgSet()
	txIndex := boxInt32(int32(i))
	for j, m := range t.msgs {
		mr := rows.Row(tableMessages)
		mr[mHeight] = hv
		mr[mBlockTime] = tv
		mr[mTxIndex] = txIndex
		mr[mIndex] = boxInt32(int32(j))
		mr[mTypeURL] = st.internText(m.typeURL)
		mr[mValue] = rows.BoxBytes(m.value)
		mr[mDecoded] = nil
		if m.value == nil {
			mr[mValue] = emptyBytes
		}
		var signer string
		u, _ := mr[mTypeURL].(string)
		if set.Known(u) {
			js, s, err := set.AppendJSON(msgJS, u, m.value)
			if err == nil {
				mr[mDecoded] = rows.BoxBytes(js[len(msgJS):len(js):len(js)])
				msgJS, signer = js, s
			}
		} else if f := signerOnly[u]; f != 0 {
			signer = string(fieldBytes(m.value, f))
		}
		if signer == "" {
			continue
		}
		if !learned {
			if p := bech32Prefix([]byte(signer)); p != "" {
				prefix, learned = p, true
			}
		}
		if !slices.Contains(st.msgSigners, signer) {
			st.msgSigners = append(st.msgSigners, signer)
		}
	}
	// The prefix: the operator's; else the events' (signersEventPrefix);
	// else a message's signer's; else the fee payer's or granter's.
	st.signerAddrs = st.signerAddrs[:0]
	for _, s := range t.signers {
		st.signerAddrs = append(st.signerAddrs, AccountAddress(s.keyType, s.key))
	}
	switch {
	case st.prefix != "":
		prefix = st.prefix
	case slices.ContainsFunc(st.signerAddrs, func(a []byte) bool { return a != nil }):
		if p := st.signersEventPrefix(i); p != "" {
			prefix, learned = p, true
		}
	}
	// A signer whose key is not known is the address of the tx.acc_seq
	// event at its position, where the tx has one per signer: the chain's
	// own word for who signed.
	st.accSeq = st.accSeqSigners(st.accSeq[:0], i)
	if len(st.accSeq) != len(t.signers) {
		st.accSeq = st.accSeq[:0]
	}
	if prefix == "" {
		if p := bech32Prefix(t.payer); p != "" {
			prefix = p
		} else if p := bech32Prefix(t.granter); p != "" {
			prefix = p
		}
	}

	row[tMemo] = st.cleanString(t.memo)
	fee := rows.Bytes(2 + len(t.fee)*40)[:0]
	fee = append(fee, '[')
	for j, c := range t.fee {
		if j > 0 {
			fee = append(fee, ',')
		}
		fee = append(fee, `{"denom":`...)
		fee = jsonscan.AppendQuoted(fee, c.denom)
		fee = append(fee, `,"amount":`...)
		fee = jsonscan.AppendQuoted(fee, c.amount)
		fee = append(fee, '}')
	}
	row[tFee] = rows.BoxBytes(append(fee, ']'))
	row[tGasLimit] = nil
	if t.gasLimit <= 1<<63-1 {
		row[tGasLimit] = rows.BoxInt64(int64(t.gasLimit))
	}

	var signers []string
	var withNull []*string
	for j := range t.signers {
		addr := ""
		if a := st.signerAddrs[j]; a != nil && prefix != "" {
			addr = Bech32Encode(prefix, a)
		} else if j < len(st.accSeq) && st.accSeq[j] != "" {
			addr = st.accSeq[j]
		} else if j < len(st.msgSigners) {
			addr = st.msgSigners[j]
		} else if withNull == nil {
			withNull = make([]*string, 0, len(t.signers))
			for k := range signers {
				withNull = append(withNull, &signers[k])
			}
		}
		if withNull != nil {
			if addr == "" {
				withNull = append(withNull, nil)
			} else {
				withNull = append(withNull, &addr)
			}
			continue
		}
		signers = append(signers, addr)
	}
	switch {
	case withNull != nil:
		row[tSigners] = withNull
	case signers == nil:
		row[tSigners] = []string{}
	default:
		row[tSigners] = signers
	}

	row[tFeePayer] = nil
	switch {
	case len(t.payer) > 0:
		row[tFeePayer] = st.cleanString(t.payer)
	case withNull != nil && len(withNull) > 0 && withNull[0] != nil:
		row[tFeePayer] = *withNull[0]
	case withNull == nil && len(signers) > 0:
		row[tFeePayer] = signers[0]
	}
	row[tFeeGranter] = nil
	if len(t.granter) > 0 {
		row[tFeeGranter] = st.cleanString(t.granter)
	}
	return msgJS
}

// Event attributes by what the chain writes in them, for the signers'
// prefix and addresses.
const (
	attrOther   = iota
	attrAccount // an account address by definition: tx.acc_seq ("addr/sequence"), tx.fee_payer, the bank's transfer, coin_spent, coin_received
	attrSender  // message.sender: an account's, save where the SDK's staking and distribution modules wrote an operator's (MsgEditValidator, MsgWithdrawValidatorCommission before v0.46)
	attrAccSeq  // tx.acc_seq alone: one per signer, in signer order (the SDK's SetPubKeyDecorator)
)

// attrKind says which of the above the attribute key of an event of type
// typ is (either kind of tx.acc_seq: attrAccSeq).
func (st *decodeState) attrKind(typ []byte, key jsonscan.Span) int {
	var name string
	switch string(typ) {
	case "tx", "transfer", "coin_spent", "coin_received", "message":
	default:
		return attrOther
	}
	k := st.bytesOf(key)
	if st.b64 {
		var buf [16]byte
		if base64.StdEncoding.DecodedLen(len(k)) > len(buf) {
			return attrOther
		}
		n, err := base64.StdEncoding.Decode(buf[:], k)
		if err != nil {
			return attrOther
		}
		name = string(buf[:n])
	} else {
		name = string(k)
	}
	switch string(typ) + "." + name {
	case "tx.acc_seq":
		return attrAccSeq
	case "tx.fee_payer", "transfer.sender", "transfer.recipient", "coin_spent.spender", "coin_received.receiver":
		return attrAccount
	case "message.sender":
		return attrSender
	}
	return attrOther
}

// attrAddress is the value of a, base64-decoded where the block's are, up
// to a '/' (acc_seq's "addr/sequence"), in scratch2.
func (st *decodeState) attrAddress(a attrRef) []byte {
	v := st.bytesOf(a.value)
	if st.b64 {
		if len(v) > 4*160/3 {
			return nil // no address is this long
		}
		st.scratch2, _ = base64.StdEncoding.AppendDecode(st.scratch2[:0], v)
		v = st.scratch2
	}
	if k := bytes.IndexByte(v, '/'); k >= 0 {
		v = v[:k]
	}
	return v
}

// eventPrefix returns the bech32 prefix of an address whose bytes are addr
// among the values of tx i's event attributes of the kinds want accepts
// (attrAccSeq counts as attrAccount), or "". A prefix read from
// message.sender has a "valoper" suffix taken off.
func (st *decodeState) eventPrefix(i int, addr []byte, want int) string {
	if addr == nil || i >= len(st.results) {
		return ""
	}
	dataLen := (len(addr)*8+4)/5 + 6 // bech32 characters after the '1'
	// addr's data characters (between the '1' and the checksum) are the
	// same under any prefix: a value whose are not these is not addr and
	// costs a comparison; a match is encoded whole with its prefix, its
	// checksum compared, and checked by bech32Valid, which also holds the
	// prefix to lowercase letters.
	var buf [128]byte
	chars := appendBech32Data(buf[:0], addr)
	r := &st.results[i]
	for _, ev := range st.txEvents[r.ev0:r.ev1] {
		typ := st.bytesOf(ev.typ)
		if len(typ) > 16 {
			continue
		}
		var tb [16]byte
		typ = tb[:copy(tb[:], typ)]
		for _, a := range st.attrs[ev.a0:ev.a1] {
			kind := st.attrKind(typ, a.key)
			if kind == attrAccSeq {
				kind = attrAccount
			}
			if kind != want {
				continue
			}
			v := st.attrAddress(a)
			sep := bytes.LastIndexByte(v, '1')
			if sep < 1 || len(v)-sep-1 != dataLen || !bytes.Equal(v[sep+1:len(v)-6], chars) {
				continue
			}
			if Bech32Encode(string(v[:sep]), addr) == string(v) && bech32Valid(v) {
				if kind == attrSender {
					return validBech32Prefix(v)
				}
				return string(v[:sep])
			}
		}
	}
	return ""
}

// signersEventPrefix is the account prefix for tx i's signers as the
// chain's events say it: that of an account address of a signer's bytes in
// the tx's events; else the block's account prefix; else that of a
// message.sender of a signer's bytes (an operator's read as its account's);
// else "".
func (st *decodeState) signersEventPrefix(i int) string {
	for _, want := range []int{attrAccount, 0, attrSender} {
		if want == 0 {
			if p := st.blockAccountPrefix(); p != "" {
				return p
			}
			continue
		}
		for _, a := range st.signerAddrs {
			if p := st.eventPrefix(i, a, want); p != "" {
				return p
			}
		}
	}
	return ""
}

// blockAccountPrefix is the prefix of the first account address (an
// attribute of kind attrAccount or attrAccSeq with a valid bech32 value)
// among the events of the block's txs, or "": the chain's account prefix
// as the chain itself writes it. It is the same for every tx of a block
// whichever were decoded before, so a height's rows do not depend on where
// an export started.
func (st *decodeState) blockAccountPrefix() string {
	if st.accountPrefixRead {
		return st.accountPrefix
	}
	st.accountPrefixRead = true
	for _, ev := range st.txEvents {
		typ := st.bytesOf(ev.typ)
		if len(typ) > 16 {
			continue
		}
		var tb [16]byte
		typ = tb[:copy(tb[:], typ)]
		for _, a := range st.attrs[ev.a0:ev.a1] {
			if k := st.attrKind(typ, a.key); k != attrAccount && k != attrAccSeq {
				continue
			}
			if v := st.attrAddress(a); bech32Valid(v) {
				st.accountPrefix = string(v[:bytes.LastIndexByte(v, '1')])
				return st.accountPrefix
			}
		}
	}
	return ""
}

// accSeqSigners appends to dst the addresses of tx i's tx.acc_seq events,
// in order, each "" where it is not a valid bech32 address.
func (st *decodeState) accSeqSigners(dst []string, i int) []string {
	if i >= len(st.results) {
		return dst
	}
	r := &st.results[i]
	for _, ev := range st.txEvents[r.ev0:r.ev1] {
		if string(st.bytesOf(ev.typ)) != "tx" {
			continue
		}
		for _, a := range st.attrs[ev.a0:ev.a1] {
			if st.attrKind([]byte("tx"), a.key) != attrAccSeq {
				continue
			}
			v := st.attrAddress(a)
			if bech32Valid(v) {
				dst = append(dst, string(v))
			} else {
				dst = append(dst, "")
			}
		}
	}
	return dst
}

// emptyBytes is an empty, non-nil bytea value (nil would be NULL).
var emptyBytes any = []byte{}

// msgSet is the message types the decoder was given, else the built-in set.
func (st *decodeState) msgSet() *protodec.Set {
	if st.msgs != nil {
		return st.msgs
	}
	return protodec.MustBuiltin()
}

// cleanString is b as a Go string fit for a text column.
func (st *decodeState) cleanString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	c := cleanText(st.clean, b)
	if &c[0] != &b[0] {
		st.clean = c
	}
	return string(c)
}

// internText is cleanString for type URLs: the common ones come boxed
// already and cost no allocation.
func (st *decodeState) internText(b []byte) any {
	if v, ok := typeURLBoxed[string(b)]; ok {
		return v
	}
	return st.cleanString(b)
}

var typeURLBoxed = func() map[string]any {
	m := map[string]any{}
	for _, u := range []string{
		"/cosmos.bank.v1beta1.MsgSend", "/cosmos.bank.v1beta1.MsgMultiSend",
		"/cosmos.staking.v1beta1.MsgDelegate", "/cosmos.staking.v1beta1.MsgUndelegate",
		"/cosmos.staking.v1beta1.MsgBeginRedelegate", "/cosmos.staking.v1beta1.MsgCancelUnbondingDelegation",
		"/cosmos.staking.v1beta1.MsgCreateValidator", "/cosmos.staking.v1beta1.MsgEditValidator",
		"/cosmos.distribution.v1beta1.MsgWithdrawDelegatorReward", "/cosmos.distribution.v1beta1.MsgWithdrawValidatorCommission",
		"/cosmos.distribution.v1beta1.MsgSetWithdrawAddress", "/cosmos.distribution.v1beta1.MsgFundCommunityPool",
		"/cosmos.gov.v1beta1.MsgVote", "/cosmos.gov.v1.MsgVote", "/cosmos.gov.v1beta1.MsgDeposit", "/cosmos.gov.v1.MsgDeposit",
		"/cosmos.gov.v1beta1.MsgSubmitProposal", "/cosmos.gov.v1.MsgSubmitProposal", "/cosmos.gov.v1.MsgVoteWeighted",
		"/ibc.applications.transfer.v1.MsgTransfer",
		"/ibc.core.client.v1.MsgUpdateClient", "/ibc.core.channel.v1.MsgRecvPacket",
		"/ibc.core.channel.v1.MsgAcknowledgement", "/ibc.core.channel.v1.MsgTimeout",
		"/cosmwasm.wasm.v1.MsgExecuteContract", "/cosmos.authz.v1beta1.MsgExec",
		"/cosmos.authz.v1beta1.MsgGrant", "/cosmos.feegrant.v1beta1.MsgGrantAllowance",
	} {
		m[u] = u
	}
	return m
}()
