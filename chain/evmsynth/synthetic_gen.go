package evmsynth

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"

	"github.com/blockhaul/blockhaul/chain/evm"
)

// This file writes the JSON of synthetic blocks. It appends to one byte
// buffer with precomputed hex (addresses, padded topics, the block hash)
// and never goes through maps or encoding/json: a mainnet-sized record is
// ~0.5 MB and the benchmark harness wants thousands of them per second.
// Field order and shapes follow geth (checked against the 1.17 fixtures in
// chain/evm/testdata/): blocks and receipts are marshalled from maps (keys sorted),
// transactions and logs from structs.

// rng is splitmix64: tiny state, so one can be derived per (seed, height,
// stream) at no cost, which is what makes random access cheap.
type rng struct{ s uint64 }

const (
	streamCounts = iota + 1
	streamBlock
)

func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func newRNG(seed, h, stream uint64) rng {
	return rng{s: mix64(seed^0x9e3779b97f4a7c15) ^ mix64(h*0x2545f4914f6cdd1d+stream)}
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return mix64(r.s)
}

// intn returns a uniform int in [0, n), n > 0.
func (r *rng) intn(n int) int {
	hi, _ := bits.Mul64(r.next(), uint64(n))
	return int(hi)
}

// float returns a uniform float64 in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// between returns a uniform value in [lo, hi].
func (r *rng) between(lo, hi uint64) uint64 { return lo + r.next()%(hi-lo+1) }

// logUniform returns a value spread evenly over orders of magnitude
// between 10^lo and 10^hi, as 128 bits: wei amounts cross 2^64 at ~18 ETH.
func (r *rng) logUniform(lo, hi float64) u128 {
	return u128FromFloat(math.Pow(10, lo+(hi-lo)*r.float()))
}

type u128 struct{ hi, lo uint64 }

func u128FromFloat(f float64) u128 {
	const two64 = 1 << 64
	if f < two64 {
		return u128{lo: uint64(f)}
	}
	hi := math.Floor(f / two64)
	return u128{hi: uint64(hi), lo: uint64(f - hi*two64)}
}

// addrEntry is one pooled address with its precomputed encodings.
type addrEntry struct {
	hex    [42]byte // "0x" + 40 digits
	padded [66]byte // "0x" + 24 zeros + 40 digits: a topic; [2:] is a calldata word
	bloom  [3]uint16
}

// pools hold the addresses a chain reuses: real chains are a few hot
// contracts and many users, which is also what makes them compress the
// way they do.
type pools struct {
	users     []addrEntry
	contracts []addrEntry // [0,numTokens) tokens, then pools and routers
	miners    []addrEntry
	extra     [][]byte // extraData, hex
}

const (
	numUsers     = 8192
	numContracts = 1024
	numTokens    = 96
)

func newPools(seed uint64) *pools {
	r := newRNG(seed, math.MaxUint64, 0)
	mk := func(n int) []addrEntry {
		out := make([]addrEntry, n)
		for i := range out {
			var raw [24]byte
			for j := 0; j < 24; j += 8 {
				v := r.next()
				for k := 0; k < 8; k++ {
					raw[j+k] = byte(v >> (8 * k))
				}
			}
			a := &out[i]
			copy(a.hex[:], "0x")
			hex.Encode(a.hex[2:], raw[:20])
			copy(a.padded[:], "0x000000000000000000000000")
			copy(a.padded[26:], a.hex[2:])
			a.bloom = bloomBits(r.next())
		}
		return out
	}
	p := &pools{users: mk(numUsers), contracts: mk(numContracts), miners: mk(len(builderNames))}
	for _, n := range builderNames {
		p.extra = append(p.extra, []byte("0x"+hex.EncodeToString([]byte(n))))
	}
	return p
}

var builderNames = []string{
	"beaverbuild.org", "Titan (titanbuilder.xyz)", "rsync-builder.xyz",
	"Geth/v1.15.11-stable-36b2371c/linux-amd64/go1.24.2", "bloXroute", "Illuminate Dmocratize Dstribute",
}

func bloomBits(v uint64) [3]uint16 {
	return [3]uint16{uint16(v & 2047), uint16(v >> 16 & 2047), uint16(v >> 32 & 2047)}
}

func setBloom(b *[256]byte, bs [3]uint16) {
	for _, x := range bs {
		b[255-x/8] |= 1 << (x % 8)
	}
}

// Event templates: topic0 and the shape of the log.
type eventKind struct {
	sig    string // topic0, hex without 0x
	topics int    // including topic0
	words  int    // 32-byte data words
	bloom  [3]uint16
}

const (
	evTransfer = iota
	evApproval
	evSwapV2
	evSync
	evDeposit
	evSwapV3
	evNFTTransfer
	evWithdrawal
)

var events = func() []eventKind {
	ev := []eventKind{
		evTransfer:    {sig: "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef", topics: 3, words: 1},
		evApproval:    {sig: "8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925", topics: 3, words: 1},
		evSwapV2:      {sig: "d78ad95fa46c994b6551d0da85fc275fe613ce37657fb8d5e3d130840159d822", topics: 3, words: 4},
		evSync:        {sig: "1c411e9a96e071241c2f21f7726b17ae89e3cab4c78be50e062b03a9fffbbad1", topics: 1, words: 2},
		evDeposit:     {sig: "e1fffcc4923d04b559f4d29a8bfc6cda04eb5b0d3c460751c2402c5c5cc9109c", topics: 2, words: 1},
		evSwapV3:      {sig: "c42079f94a6350d7e6235f29174924f928cc2ac818eb64fed8004e115fbcca67", topics: 3, words: 5},
		evNFTTransfer: {sig: "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef", topics: 4, words: 0},
		evWithdrawal:  {sig: "7fcf532c15f0a6db0bd6d0e038bea71d30d808c7d98cb3bf7268a95bf5081b65", topics: 2, words: 1},
	}
	for i := range ev {
		ev[i].bloom = bloomBits(mix64(uint64(i) + 77))
	}
	return ev
}()

// callEvents is the event mix of multi-log (swap, aggregator) transactions.
var callEvents = []uint8{
	evTransfer, evTransfer, evTransfer, evTransfer, evTransfer, evTransfer, evTransfer, evTransfer,
	evApproval, evApproval, evSwapV2, evSwapV2, evSync, evSync, evSwapV3, evSwapV3,
	evDeposit, evWithdrawal, evNFTTransfer, evNFTTransfer,
}

// Transaction kinds, which decide shape (input, gas, logs).
const (
	kindTransfer = iota // plain ETH transfer
	kindFailed          // reverted contract call
	kindCreate          // contract creation
	kindBlob            // blob-carrying rollup batch
	kindERC20           // token transfer: one Transfer log
	kindApprove         // token approval: one Approval log
	kindCall            // swap or other multi-log call
)

type txPlan struct {
	typ       uint8
	kind      uint8
	protected bool // legacy with EIP-155 chain id
	from      int32
	to        int32 // index into users (kindTransfer, kindBlob) or contracts; -1 creation
	recipient int32 // token recipient (user) or spender (contract)
	nonce     uint64
	gas       uint64
	gasUsed   uint64
	cumGas    uint64
	value     u128
	amount    u128
	tip       uint64
	maxFee    uint64
	price     uint64 // effective gas price
	inputLen  int    // words for calls, bytes for creations
	blobs     int
	firstLog  int
	nLogs     int
	hash      [64]byte
}

type logPlan struct {
	ev   uint8
	addr int32 // contract index
	t1   int32 // address topic: user index, or ^contract index
	t2   int32
	num  uint64 // token id of an NFT transfer
}

// generator holds the scratch memory of one block; pooled per Synthetic.
type generator struct {
	s        *Synthetic
	h        uint64
	r        rng
	txs      []txPlan
	logs     []logPlan
	logCount []int
	hosts    []int
	multis   []int
	buf      []byte

	offHash     []int                    // where the block's own hash goes (see finish)
	offTx       []txHashAt               // where transaction hashes go (see seal)
	offParent   int                      // where its parent's hash goes
	spans       [evm.HeaderFields][2]int // header field values in the record
	number      []byte                   // "0x..." of h
	timestamp   uint64
	tsHex       []byte
	baseFee     uint64
	blobBaseFee uint64
	blobGasUsed uint64
	gasUsed     uint64
	size        uint64
	bloom       [256]byte
}

// The chain's clock and blob gas: block h's timestamp is GenesisTime +
// BlockTime·h seconds; a blob uses BlobGas.
const (
	GenesisTime = 1_700_000_000
	BlockTime   = 12
	BlobGas     = 1 << 17
)

const (
	blockGasLimit = 36_000_000
	maxBlobs      = 9
	withdrawals   = 16
)

func (g *generator) record(s *Synthetic, h uint64) []byte {
	g.s, g.h = s, h
	nTx, nLogs := s.ExpectedCounts(h)
	g.r = newRNG(s.seed, h, streamBlock)
	g.offHash = g.offHash[:0]
	g.offTx = g.offTx[:0]
	g.spans = [evm.HeaderFields][2]int{}
	g.number = strconv.AppendUint(append(g.number[:0], "0x"...), h, 16)
	g.timestamp = GenesisTime + BlockTime*h
	g.tsHex = strconv.AppendUint(append(g.tsHex[:0], "0x"...), g.timestamp, 16)
	g.plan(nTx, nLogs)

	b := g.buf[:0]
	b = append(b, `{"block":`...)
	b = g.writeBlock(b)
	b = append(b, `,"receipts":[`...)
	for i := range g.txs {
		if i > 0 {
			b = append(b, ',')
		}
		b = g.writeReceipt(b, i)
	}
	b = append(b, "]}"...)
	if err := g.seal(b); err != nil {
		panic(err) // the generator's own output
	}
	g.buf = b
	g.s = nil
	return bytes.Clone(b)
}

// render renders block h with placeholders for the hashes.
func (g *generator) render(s *Synthetic, h uint64) ([]byte, pendingBlock) {
	rec := g.record(s, h)
	p, err := g.pending(rec)
	if err != nil {
		panic(err) // the generator's own output
	}
	return rec, p
}

func (g *generator) plan(nTx, nLogs int) {
	r := &g.r
	// A base fee between 1 and ~40 gwei, mostly low.
	f := r.float()
	g.baseFee = 1_000_000_000 + uint64(f*f*40e9) + r.next()%1_000_000
	if r.float() < 0.6 {
		g.blobBaseFee = 1
	} else {
		g.blobBaseFee = r.between(1, 20_000_000_000)
	}
	g.txs = g.txs[:0]
	g.logs = g.logs[:0]
	g.bloom = [256]byte{}
	g.blobGasUsed, g.gasUsed = 0, 0
	g.size = 620 + withdrawals*38

	// Spread the block's logs over its transactions: most log-emitting
	// transactions emit one (token transfers), a minority many (swaps).
	g.logCount = g.logCount[:0]
	for range nTx {
		g.logCount = append(g.logCount, 0)
	}
	if nLogs > 0 {
		g.hosts = g.hosts[:0]
		for i := 0; i < nTx; i++ {
			if r.float() < 0.65 {
				g.hosts = append(g.hosts, i)
			}
		}
		if len(g.hosts) == 0 {
			g.hosts = append(g.hosts, r.intn(nTx))
		}
		if nLogs < len(g.hosts) {
			g.hosts = g.hosts[:nLogs]
		}
		g.multis = g.multis[:0]
		for _, i := range g.hosts {
			g.logCount[i] = 1
			if r.float() < 0.4 {
				g.multis = append(g.multis, i)
			}
		}
		if len(g.multis) == 0 {
			g.multis = append(g.multis, g.hosts[r.intn(len(g.hosts))])
		}
		for rem := nLogs - len(g.hosts); rem > 0; rem-- {
			g.logCount[g.multis[r.intn(len(g.multis))]]++
		}
	}

	blobs := 0
	for i := 0; i < nTx; i++ {
		g.txs = append(g.txs, txPlan{})
		t := &g.txs[i]
		t.nLogs = g.logCount[i]
		t.firstLog = len(g.logs)
		g.planTx(t, &blobs)
		g.gasUsed += t.gasUsed
		t.cumGas = g.gasUsed
		g.size += 110 + uint64(t.inputLen)
		if t.kind == kindCall || t.kind == kindFailed {
			g.size += 32 * uint64(t.inputLen)
		}
	}
	g.blobGasUsed = uint64(blobs) * BlobGas
}

func (g *generator) planTx(t *txPlan, blobs *int) {
	r := &g.r
	t.from = int32(r.intn(numUsers))
	t.nonce = r.next() % 2000
	if r.float() < 0.05 {
		t.nonce = r.between(10_000, 3_000_000) // bots and exchanges
	}
	g.planKind(t, blobs)
	g.planGas(t)
	g.planFees(t)
	var raw [32]byte
	g.randBytes(raw[:])
	hex.Encode(t.hash[:], raw[:])
	g.planLogs(t)
}

// planKind chooses what the transaction does from its log count.
func (g *generator) planKind(t *txPlan, blobs *int) {
	r := &g.r
	switch {
	case t.nLogs == 0:
		switch f := r.float(); {
		case f < 0.06 && *blobs < maxBlobs:
			t.kind = kindBlob
			t.blobs = 1 + r.intn(min(6, maxBlobs-*blobs))
			*blobs += t.blobs
		case f < 0.13:
			t.kind = kindFailed
		case f < 0.14:
			t.kind = kindCreate
		default:
			t.kind = kindTransfer
		}
	case t.nLogs == 1:
		t.kind = kindERC20
		if r.float() < 0.2 {
			t.kind = kindApprove
		}
	default:
		t.kind = kindCall
	}
}

// planGas sets the transaction's recipient, gas and value for its kind.
func (g *generator) planGas(t *txPlan) {
	r := &g.r
	switch t.kind {
	case kindTransfer:
		t.to = int32(r.intn(numUsers))
		t.gas, t.gasUsed = 21000, 21000
		t.value = r.logUniform(13, 20)
	case kindBlob:
		t.to = int32(r.intn(numUsers))
		t.gas, t.gasUsed = 21000, 21000
	case kindFailed:
		t.to = int32(numTokens + r.intn(numContracts-numTokens))
		t.inputLen = 2 + r.intn(8)
		t.gas = r.between(80_000, 400_000)
		t.gasUsed = r.between(22_000, t.gas)
	case kindCreate:
		t.to = -1
		t.inputLen = 800 + r.intn(9000)
		t.gas = r.between(600_000, 4_000_000)
		t.gasUsed = t.gas * (60 + r.next()%35) / 100
	case kindERC20, kindApprove:
		t.to = int32(r.intn(numTokens))
		t.gas = r.between(50_000, 110_000)
		t.gasUsed = r.between(29_000, 52_000)
		t.amount = r.logUniform(3, 24)
		if t.kind == kindERC20 {
			t.recipient = int32(r.intn(numUsers))
		} else {
			t.recipient = int32(numTokens + r.intn(numContracts-numTokens))
			if r.float() < 0.5 {
				t.amount = u128{math.MaxUint64, math.MaxUint64} // "infinite" approval
			}
		}
	case kindCall:
		t.to = int32(numTokens + r.intn(64)) // a few routers take most calls
		t.inputLen = 4 + r.intn(44)
		t.gas = r.between(150_000, 900_000)
		t.gasUsed = t.gas * (45 + r.next()%50) / 100
		if r.float() < 0.3 {
			t.value = r.logUniform(15, 20)
		}
	}
}

// planFees chooses the transaction type and its fee fields.
func (g *generator) planFees(t *txPlan) {
	r := &g.r
	// Type mix: mostly EIP-1559, some legacy, a few access-list and
	// EIP-7702 set-code transactions; blob transactions are type 3.
	switch f := r.float(); {
	case t.kind == kindBlob:
		t.typ = 3
	case f < 0.07:
		t.typ = 0
		t.protected = r.float() < 0.9
	case f < 0.08:
		t.typ = 1
	case f < 0.086 && t.kind != kindCreate:
		t.typ = 4
	default:
		t.typ = 2
	}
	if t.typ == 0 || t.typ == 1 {
		t.price = g.baseFee + r.next()%2_000_000_000
		t.maxFee, t.tip = t.price, t.price
	} else {
		t.tip = r.between(1_000_000, 3_000_000_000)
		if r.float() < 0.2 {
			t.maxFee = g.baseFee + t.tip/2 // capped: pays less than its tip
		} else {
			t.maxFee = 2*g.baseFee + t.tip
		}
		t.price = g.baseFee + min(t.tip, t.maxFee-g.baseFee)
	}
}

// planLogs plans the transaction's logs and sets the block's bloom bits.
func (g *generator) planLogs(t *txPlan) {
	r := &g.r
	for j := 0; j < t.nLogs; j++ {
		l := logPlan{}
		switch t.kind {
		case kindERC20:
			l = logPlan{ev: evTransfer, addr: t.to, t1: t.from, t2: t.recipient}
		case kindApprove:
			l = logPlan{ev: evApproval, addr: t.to, t1: t.from, t2: ^t.recipient}
		default:
			l.ev = callEvents[r.intn(len(callEvents))]
			switch l.ev {
			case evTransfer, evApproval, evDeposit, evWithdrawal:
				l.addr = int32(r.intn(numTokens))
			case evNFTTransfer:
				l.addr = int32(numTokens + 64 + r.intn(numContracts-numTokens-64))
				l.num = r.next() % 20000
			default:
				l.addr = int32(numTokens + 64 + r.intn(numContracts-numTokens-64))
			}
			l.t1 = g.anyAddr()
			l.t2 = g.anyAddr()
		}
		g.logs = append(g.logs, l)
		setBloom(&g.bloom, g.s.pools.contracts[l.addr].bloom)
		setBloom(&g.bloom, events[l.ev].bloom)
		n := events[l.ev].topics
		if n > 1 {
			setBloom(&g.bloom, g.entry(l.t1).bloom)
		}
		if n > 2 {
			setBloom(&g.bloom, g.entry(l.t2).bloom)
		}
		if n > 3 {
			setBloom(&g.bloom, bloomBits(mix64(l.num)))
		}
	}
}

// anyAddr picks a user most of the time, a contract otherwise.
func (g *generator) anyAddr() int32 {
	if g.r.float() < 0.7 {
		return int32(g.r.intn(numUsers))
	}
	return ^int32(g.r.intn(numContracts))
}

func (g *generator) entry(ref int32) *addrEntry {
	if ref < 0 {
		return &g.s.pools.contracts[^ref]
	}
	return &g.s.pools.users[ref]
}

func (g *generator) randBytes(p []byte) {
	for len(p) >= 8 {
		v := g.r.next()
		p[0], p[1], p[2], p[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		p[4], p[5], p[6], p[7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
		p = p[8:]
	}
	if len(p) > 0 {
		v := g.r.next()
		for i := range p {
			p[i] = byte(v >> (8 * i))
		}
	}
}

// appendRandHex appends n random bytes as hex.
func (g *generator) appendRandHex(b []byte, n int) []byte {
	var tmp [64]byte
	for n > 0 {
		k := min(n, len(tmp))
		g.randBytes(tmp[:k])
		b = hex.AppendEncode(b, tmp[:k])
		n -= k
	}
	return b
}

// appendRandQty appends a random 256-bit quantity (a signature's r or s)
// in quantity form: no leading zeros.
func (g *generator) appendRandQty(b []byte) []byte {
	var raw [32]byte
	var h [64]byte
	g.randBytes(raw[:])
	hex.Encode(h[:], raw[:])
	d := h[:]
	for len(d) > 1 && d[0] == '0' {
		d = d[1:]
	}
	return append(b, d...)
}

const hexDigits = "0123456789abcdef"

// appendHex16 appends v as exactly 16 hex digits.
func appendHex16(b []byte, v uint64) []byte {
	var t [16]byte
	for i := 15; i >= 0; i-- {
		t[i] = hexDigits[v&15]
		v >>= 4
	}
	return append(b, t[:]...)
}

// appendWord appends a 32-byte ABI word holding v.
func appendWord(b []byte, v u128) []byte {
	b = append(b, "00000000000000000000000000000000"...)
	b = appendHex16(b, v.hi)
	return appendHex16(b, v.lo)
}

// appendNegWord appends a 32-byte two's-complement word of -v (v < 2^64).
func appendNegWord(b []byte, v uint64) []byte {
	b = append(b, "ffffffffffffffffffffffffffffffffffffffffffffffff"...)
	return appendHex16(b, -v)
}

// qty appends key (which carries its comma, quotes and colon) and v as a
// quoted hex quantity.
func qty(b []byte, key string, v uint64) []byte {
	b = append(b, key...)
	b = append(b, `"0x`...)
	b = strconv.AppendUint(b, v, 16)
	return append(b, '"')
}

func qty128(b []byte, key string, v u128) []byte {
	if v.hi == 0 {
		return qty(b, key, v.lo)
	}
	b = append(b, key...)
	b = append(b, `"0x`...)
	b = strconv.AppendUint(b, v.hi, 16)
	b = appendHex16(b, v.lo)
	return append(b, '"')
}

func str(b []byte, key string, v []byte) []byte {
	b = append(b, key...)
	b = append(b, '"')
	b = append(b, v...)
	return append(b, '"')
}

func (g *generator) hash(b []byte, key string) []byte {
	b = append(b, key...)
	b = append(b, `"0x`...)
	b = g.appendRandHex(b, 32)
	return append(b, '"')
}

func appendBloom(b []byte, key string, bloom *[256]byte) []byte {
	b = append(b, key...)
	b = append(b, `"0x`...)
	b = hex.AppendEncode(b, bloom[:])
	return append(b, '"')
}

func (g *generator) writeBlock(b []byte) []byte {
	s, r := g.s, &g.r
	p := s.pools
	builder := int(mix64(g.h^s.seed) % uint64(len(p.miners)))
	gasLimit := max(uint64(blockGasLimit), g.gasUsed)
	b = qty(b, `{"baseFeePerGas":`, g.baseFee)
	g.mark(b, evm.FieldBaseFee)
	b = qty(b, `,"blobGasUsed":`, g.blobGasUsed)
	g.mark(b, evm.FieldBlobGasUsed)
	b = append(b, `,"difficulty":"0x0"`...)
	g.mark(b, evm.FieldDifficulty)
	b = qty(b, `,"excessBlobGas":`, (r.next()%400)*BlobGas)
	g.mark(b, evm.FieldExcessBlobGas)
	b = str(b, `,"extraData":`, p.extra[builder])
	g.mark(b, evm.FieldExtra)
	b = qty(b, `,"gasLimit":`, gasLimit)
	g.mark(b, evm.FieldGasLimit)
	b = qty(b, `,"gasUsed":`, g.gasUsed)
	g.mark(b, evm.FieldGasUsed)
	b = g.selfHash(b, `,"hash":`)
	b = appendBloom(b, `,"logsBloom":`, &g.bloom)
	g.mark(b, evm.FieldBloom)
	b = str(b, `,"miner":`, p.miners[builder].hex[:])
	g.mark(b, evm.FieldMiner)
	b = g.hash(b, `,"mixHash":`)
	g.mark(b, evm.FieldMixHash)
	b = append(b, `,"nonce":"0x0000000000000000"`...)
	g.mark(b, evm.FieldNonce)
	b = str(b, `,"number":`, g.number)
	g.mark(b, evm.FieldNumber)
	b = g.hash(b, `,"parentBeaconBlockRoot":`)
	g.mark(b, evm.FieldBeaconRoot)
	b = append(b, `,"parentHash":"0x`...)
	g.offParent = len(b)
	b = append(b, "0000000000000000000000000000000000000000000000000000000000000000"...)
	b = append(b, '"')
	g.mark(b, evm.FieldParentHash)
	b = g.hash(b, `,"receiptsRoot":`)
	g.mark(b, evm.FieldReceiptsRoot)
	b = append(b, `,"requestsHash":"0xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"`...)
	g.mark(b, evm.FieldRequestsHash)
	b = append(b, `,"sha3Uncles":"0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347"`...)
	g.mark(b, evm.FieldUncles)
	b = qty(b, `,"size":`, g.size)
	b = g.hash(b, `,"stateRoot":`)
	g.mark(b, evm.FieldStateRoot)
	b = str(b, `,"timestamp":`, g.tsHex)
	g.mark(b, evm.FieldTimestamp)
	b = append(b, `,"transactions":[`...)
	for i := range g.txs {
		if i > 0 {
			b = append(b, ',')
		}
		b = g.writeTx(b, i)
	}
	b = append(b, ']')
	b = g.hash(b, `,"transactionsRoot":`)
	g.mark(b, evm.FieldTxRoot)
	b = append(b, `,"uncles":[],"withdrawals":[`...)
	if g.h > 0 {
		for i := uint64(0); i < withdrawals; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = qty(b, `{"index":`, (g.h-1)*withdrawals+i)
			b = qty(b, `,"validatorIndex":`, r.next()%1_500_000)
			b = str(b, `,"address":`, p.users[r.intn(numUsers)].hex[:])
			b = qty(b, `,"amount":`, r.between(10_000_000, 60_000_000))
			b = append(b, '}')
		}
	}
	b = append(b, ']')
	b = g.hash(b, `,"withdrawalsRoot":`)
	g.mark(b, evm.FieldWithdrawalsRoot)
	return append(b, '}')
}

func (g *generator) toHex(t *txPlan) []byte {
	switch t.kind {
	case kindTransfer, kindBlob:
		return g.s.pools.users[t.to].hex[:]
	case kindCreate:
		return nil
	}
	return g.s.pools.contracts[t.to].hex[:]
}

func (g *generator) writeTx(b []byte, i int) []byte {
	t := &g.txs[i]
	s, r := g.s, &g.r
	p := s.pools
	b = g.selfHash(b, `{"blockHash":`)
	b = str(b, `,"blockNumber":`, g.number)
	b = str(b, `,"blockTimestamp":`, g.tsHex)
	b = str(b, `,"from":`, p.users[t.from].hex[:])
	b = qty(b, `,"gas":`, t.gas)
	b = qty(b, `,"gasPrice":`, t.price)
	if t.typ >= 2 {
		b = qty(b, `,"maxFeePerGas":`, t.maxFee)
		b = qty(b, `,"maxPriorityFeePerGas":`, t.tip)
	}
	if t.typ == 3 {
		b = qty(b, `,"maxFeePerBlobGas":`, g.blobBaseFee*2+r.between(0, 5_000_000_000))
	}
	b = append(b, `,"hash":"0x`...)
	b = g.txHash(b, i)
	b = append(b, `","input":"0x`...)
	b = g.writeInput(b, t)
	b = qty(b, `","nonce":`, t.nonce)
	if to := g.toHex(t); to != nil {
		b = str(b, `,"to":`, to)
	} else {
		b = append(b, `,"to":null`...)
	}
	b = qty(b, `,"transactionIndex":`, uint64(i))
	b = qty128(b, `,"value":`, t.value)
	b = qty(b, `,"type":`, uint64(t.typ))
	if t.typ >= 1 {
		b = g.writeAccessList(b)
	}
	if t.typ >= 1 || t.protected {
		b = qty(b, `,"chainId":`, s.cfg.ChainID)
	}
	b = g.writeBlobsAndAuthorizations(b, t)
	parity := r.next() & 1
	switch {
	case t.typ >= 1:
		b = qty(b, `,"v":`, parity)
	case t.protected:
		b = qty(b, `,"v":`, s.cfg.ChainID*2+35+parity)
	default:
		b = qty(b, `,"v":`, 27+parity)
	}
	b = append(b, `,"r":"0x`...)
	b = g.appendRandQty(b)
	b = append(b, `","s":"0x`...)
	b = g.appendRandQty(b)
	b = append(b, '"')
	if t.typ >= 1 {
		b = qty(b, `,"yParity":`, parity)
	}
	return append(b, '}')
}

// writeAccessList writes a typed transaction's access list, empty for most.
func (g *generator) writeAccessList(b []byte) []byte {
	r, p := &g.r, g.s.pools
	b = append(b, `,"accessList":[`...)
	if r.float() < 0.15 {
		for k, n := 0, 1+r.intn(3); k < n; k++ {
			if k > 0 {
				b = append(b, ',')
			}
			b = str(b, `{"address":`, p.contracts[r.intn(numContracts)].hex[:])
			b = append(b, `,"storageKeys":[`...)
			for j, m := 0, r.intn(4); j < m; j++ {
				if j > 0 {
					b = append(b, ',')
				}
				b = g.hash(b, "")
			}
			b = append(b, "]}"...)
		}
	}
	b = append(b, ']')
	return b
}

// writeBlobsAndAuthorizations writes a blob transaction's versioned hashes
// and a set-code transaction's authorization list.
func (g *generator) writeBlobsAndAuthorizations(b []byte, t *txPlan) []byte {
	s, r := g.s, &g.r
	p := s.pools
	if t.typ == 3 {
		b = append(b, `,"blobVersionedHashes":[`...)
		for k := 0; k < t.blobs; k++ {
			if k > 0 {
				b = append(b, ',')
			}
			b = append(b, `"0x01`...)
			b = g.appendRandHex(b, 31)
			b = append(b, '"')
		}
		b = append(b, ']')
	}
	if t.typ == 4 {
		b = append(b, `,"authorizationList":[`...)
		for k, n := 0, 1+r.intn(2); k < n; k++ {
			if k > 0 {
				b = append(b, ',')
			}
			b = qty(b, `{"chainId":`, s.cfg.ChainID)
			b = str(b, `,"address":`, p.contracts[numTokens+r.intn(numContracts-numTokens)].hex[:])
			b = qty(b, `,"nonce":`, r.next()%100)
			b = qty(b, `,"yParity":`, r.next()&1)
			b = append(b, `,"r":"0x`...)
			b = g.appendRandQty(b)
			b = append(b, `","s":"0x`...)
			b = g.appendRandQty(b)
			b = append(b, `"}`...)
		}
		b = append(b, ']')
	}
	return b
}

// writeInput appends the calldata digits of t (no 0x, no quotes).
func (g *generator) writeInput(b []byte, t *txPlan) []byte {
	p := g.s.pools
	switch t.kind {
	case kindERC20:
		b = append(b, "a9059cbb"...)
		b = append(b, p.users[t.recipient].padded[2:]...)
		return appendWord(b, t.amount)
	case kindApprove:
		b = append(b, "095ea7b3"...)
		b = append(b, p.contracts[t.recipient].padded[2:]...)
		return appendWord(b, t.amount)
	case kindCreate:
		b = append(b, "6080604052"...)
		return g.appendRandHex(b, t.inputLen-5)
	case kindCall, kindFailed:
		b = g.appendRandHex(b, 4) // selector
		for k := 0; k < t.inputLen; k++ {
			switch f := g.r.float(); {
			case f < 0.4:
				b = append(b, g.entry(g.anyAddr()).padded[2:]...)
			case f < 0.7:
				b = appendWord(b, g.r.logUniform(0, 22))
			case f < 0.85:
				b = append(b, "0000000000000000000000000000000000000000000000000000000000000000"...)
			default:
				b = g.appendRandHex(b, 32)
			}
		}
	}
	return b
}

var zeroBloom = "0x" + string(bytes.Repeat([]byte("00"), 256))

func (g *generator) writeReceipt(b []byte, i int) []byte {
	t := &g.txs[i]
	p := g.s.pools
	sep := `{`
	if t.typ == 3 {
		b = qty(b, `{"blobGasPrice":`, g.blobBaseFee)
		b = qty(b, `,"blobGasUsed":`, uint64(t.blobs)*BlobGas)
		sep = `,`
	}
	b = append(b, sep...)
	b = g.selfHash(b, `"blockHash":`)
	b = str(b, `,"blockNumber":`, g.number)
	if t.kind == kindCreate {
		b = append(b, `,"contractAddress":"0x`...)
		b = g.appendRandHex(b, 20)
		b = append(b, '"')
	} else {
		b = append(b, `,"contractAddress":null`...)
	}
	b = qty(b, `,"cumulativeGasUsed":`, t.cumGas)
	b = qty(b, `,"effectiveGasPrice":`, t.price)
	b = str(b, `,"from":`, p.users[t.from].hex[:])
	b = qty(b, `,"gasUsed":`, t.gasUsed)
	b = append(b, `,"logs":[`...)
	var bloom [256]byte
	for j := 0; j < t.nLogs; j++ {
		if j > 0 {
			b = append(b, ',')
		}
		b = g.writeLog(b, t, i, t.firstLog+j, &bloom)
	}
	b = append(b, ']')
	if t.nLogs == 0 {
		b = append(b, `,"logsBloom":"`...)
		b = append(b, zeroBloom...)
		b = append(b, '"')
	} else {
		b = appendBloom(b, `,"logsBloom":`, &bloom)
	}
	if t.kind == kindFailed {
		b = append(b, `,"status":"0x0"`...)
	} else {
		b = append(b, `,"status":"0x1"`...)
	}
	if to := g.toHex(t); to != nil {
		b = str(b, `,"to":`, to)
	} else {
		b = append(b, `,"to":null`...)
	}
	b = append(b, `,"transactionHash":"0x`...)
	b = g.txHash(b, i)
	b = qty(b, `","transactionIndex":`, uint64(i))
	b = qty(b, `,"type":`, uint64(t.typ))
	return append(b, '}')
}

func (g *generator) writeLog(b []byte, t *txPlan, txIndex, logIndex int, bloom *[256]byte) []byte {
	l := &g.logs[logIndex]
	ev := &events[l.ev]
	r := &g.r
	addr := &g.s.pools.contracts[l.addr]
	setBloom(bloom, addr.bloom)
	setBloom(bloom, ev.bloom)
	b = str(b, `{"address":`, addr.hex[:])
	b = append(b, `,"topics":["0x`...)
	b = append(b, ev.sig...)
	b = append(b, '"')
	if ev.topics > 1 {
		e := g.entry(l.t1)
		setBloom(bloom, e.bloom)
		b = str(b, ",", e.padded[:])
	}
	if ev.topics > 2 {
		e := g.entry(l.t2)
		setBloom(bloom, e.bloom)
		b = str(b, ",", e.padded[:])
	}
	if ev.topics > 3 {
		setBloom(bloom, bloomBits(mix64(l.num)))
		b = append(b, `,"0x`...)
		b = appendWord(b, u128{lo: l.num})
		b = append(b, '"')
	}
	b = append(b, `],"data":"0x`...)
	switch l.ev {
	case evTransfer, evApproval:
		if t.kind == kindERC20 || t.kind == kindApprove {
			b = appendWord(b, t.amount)
		} else {
			b = appendWord(b, r.logUniform(3, 24))
		}
	case evSwapV3:
		// amount0, amount1 (one negative), sqrtPriceX96, liquidity, tick.
		b = appendWord(b, r.logUniform(10, 22))
		b = appendNegWord(b, r.next()>>8)
		b = append(b, "000000000000000000000000"...)
		b = g.appendRandHex(b, 20)
		b = appendWord(b, r.logUniform(15, 25))
		b = appendNegWord(b, r.next()%800_000)
	default:
		for k := 0; k < ev.words; k++ {
			b = appendWord(b, r.logUniform(0, 24))
		}
	}
	b = str(b, `","blockNumber":`, g.number)
	b = append(b, `,"transactionHash":"0x`...)
	b = g.txHash(b, txIndex)
	b = qty(b, `","transactionIndex":`, uint64(txIndex))
	b = g.selfHash(b, `,"blockHash":`)
	b = str(b, `,"blockTimestamp":`, g.tsHex)
	b = qty(b, `,"logIndex":`, uint64(logIndex))
	return append(b, `,"removed":false}`...)
}

// mark records that b ends with the quoted value of header field i.
func (g *generator) mark(b []byte, i int) {
	end := len(b) - 1
	g.spans[i] = [2]int{bytes.LastIndexByte(b[:end], '"') + 1, end}
}

// txHashAt is where the hash of transaction tx goes in the record.
type txHashAt struct{ tx, off int }

// txHash appends the placeholder of transaction i's hash, which seal
// fills in.
func (g *generator) txHash(b []byte, i int) []byte {
	g.offTx = append(g.offTx, txHashAt{i, len(b)})
	return append(b, g.txs[i].hash[:]...)
}

// seal writes into the rendered record rec what its contents commit to:
// every transaction's hash (keccak256 of its encoding) where its
// placeholders are, and the transactions, receipts and withdrawals roots
// in the header (the header's own hash waits for its parent's, see
// finish). It reads the record as VerifyBlock does.
func (g *generator) seal(rec []byte) error {
	sums, roots, err := evm.Commitments(rec)
	if err != nil {
		return fmt.Errorf("evm: synthetic block %d: %w", g.h, err)
	}
	if len(sums) != len(g.txs) {
		return fmt.Errorf("evm: synthetic block %d: %d transactions read of %d", g.h, len(sums), len(g.txs))
	}
	for _, at := range g.offTx {
		hex.Encode(rec[at.off:], sums[at.tx][:])
	}
	for _, r := range roots {
		if !r.Present {
			return fmt.Errorf("evm: synthetic block %d: %s not rendered", g.h, evm.HeaderFieldKey(r.Field))
		}
		hex.Encode(rec[g.spans[r.Field][0]+len("0x"):], r.Sum[:])
	}
	return nil
}

// selfHash appends key and a placeholder for the block's own hash, which
// finish fills in.
func (g *generator) selfHash(b []byte, key string) []byte {
	b = append(b, key...)
	b = append(b, `"0x`...)
	g.offHash = append(g.offHash, len(b))
	b = append(b, "0000000000000000000000000000000000000000000000000000000000000000"...)
	return append(b, '"')
}

// pendingBlock is a rendered record waiting for its parent's hash.
type pendingBlock struct {
	rlp       evm.Header
	offHash   []int
	offParent int
}

// pending reads the header of the record just rendered into rec.
func (g *generator) pending(rec []byte) (pendingBlock, error) {
	p := pendingBlock{offHash: slices.Clone(g.offHash), offParent: g.offParent}
	arena := make([]byte, 0, 768)
	var err error
	for i, sp := range g.spans {
		if sp[1] == 0 {
			return p, fmt.Errorf("evm: synthetic block %d: header field %s not rendered", g.h, evm.HeaderFieldKey(i))
		}
		if arena, err = p.rlp.Set(i, rec[sp[0]:sp[1]], arena); err != nil {
			return p, fmt.Errorf("evm: synthetic block %d: %s: %w", g.h, evm.HeaderFieldKey(i), err)
		}
	}
	return p, nil
}

// finish computes the block's hash from its header and the parent's hash,
// writes both where the record has placeholders, and returns the hash.
func (p *pendingBlock) finish(rec []byte, parent [32]byte) [32]byte {
	p.rlp.SetParent(parent[:])
	hex.Encode(rec[p.offParent:], parent[:])
	sum, err := p.rlp.Hash()
	if err != nil {
		panic(err) // every field was set by pending
	}
	for _, off := range p.offHash {
		hex.Encode(rec[off:], sum[:])
	}
	return sum
}
