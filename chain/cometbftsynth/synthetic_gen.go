package cometbftsynth

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"time"

	cmted25519 "github.com/cometbft/cometbft/crypto/ed25519"

	"github.com/blockhaul/blockhaul/chain/cometbft"
	"github.com/blockhaul/blockhaul/chain/jsonscan"
)

// generator renders one block's record. Rendering appends to a byte slice
// with hand-written JSON, no maps and no encoding/json: benchmarks generate
// millions of blocks. Generators are pooled per Synthetic; one is used by
// one goroutine at a time.
type generator struct {
	s       *Synthetic
	r       rng // content stream of the block being rendered
	plan    blockPlan
	content []txContent
	b       []byte // the record being rendered

	num      []byte    // scratch for one attribute value
	pb       [8][]byte // scratch for nested protobuf messages, one per depth
	tx       []byte    // the tx being encoded
	firstEv  bool
	firstAtt bool

	// The header being rendered, and where finish writes the hashes.
	hdr                                 cometbft.HeaderFields
	offHash, offParent, offCommitParent int
	offLastCommit                       int
	valsHash, nextHash, consHash        [32]byte
	// commit is the last commit being rendered, signed by finish once
	// its block's hash is known.
	commit                      pendingCommit
	parent, data                [32]byte
	partsPrev, appPrev, resPrev [32]byte
	lastCommit                  [32]byte
	txs                         []byte // the block's txs, encoded, end to end
	txEnds                      []int
	leaves, tmp                 [][32]byte
	leafIn                      []byte // scratch of the txs' Merkle root
}

// Genesis time of every synthetic chain, and its block interval.
const (
	genesisUnix   = 1576080000 // 2019-12-11T16:00:00Z, Cosmos Hub's launch day
	blockInterval = 6          // seconds
)

// blockTime is block h's header time: a 6 s cadence plus up to 1.5 s of
// jitter, so times are strictly increasing and any height's is known
// without its neighbours. Years stay below 10000 up to height ~4e10.
func (s *Synthetic) blockTime(h uint64) (sec, nsec int64) {
	r := newRNG(s.seed, h, streamTime)
	j := int64(r.next() % 1_500_000_000)
	return genesisUnix + int64(h-1)*blockInterval + j/1e9, j % 1e9
}

// emptyHash is SHA-256 of nothing, what CometBFT prints for an empty merkle
// tree (no txs, no evidence).
const emptyHash = "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"

func (g *generator) lit(s string) { g.b = append(g.b, s...) }

func (g *generator) hexUpper(v []byte) {
	const digits = "0123456789ABCDEF"
	for _, c := range v {
		g.b = append(g.b, digits[c>>4], digits[c&15])
	}
}

func (g *generator) derivedHex(tag byte, n uint64) {
	sum := g.s.derive(tag, n)
	g.hexUpper(sum[:])
}

func (g *generator) randomHex(n int) {
	var buf [64]byte
	g.fill(buf[:n])
	g.hexUpper(buf[:n])
}

func (g *generator) fill(p []byte) {
	for i := 0; i < len(p); i += 8 {
		v := g.r.next()
		for j := i; j < i+8 && j < len(p); j++ {
			p[j] = byte(v)
			v >>= 8
		}
	}
}

func (g *generator) quotedUint(v uint64) {
	g.b = append(g.b, '"')
	g.b = strconv.AppendUint(g.b, v, 10)
	g.b = append(g.b, '"')
}

func (g *generator) timestamp(sec, nsec int64) {
	g.b = time.Unix(sec, nsec).UTC().AppendFormat(g.b, time.RFC3339Nano)
}

// record renders block h's raw record onto dst, with zeros where its own
// hash and its parent's go (see finish), and fills g.hdr with its header.
func (g *generator) record(dst []byte, h uint64) []byte {
	s := g.s
	s.plan(h, &g.plan)
	g.r = newRNG(s.seed, h, streamContent)
	g.drawContent()
	s.results.put(h, contentResultsHash(g.content))
	g.b = dst
	g.lit(`{"block":`)
	g.block(h)
	g.lit(`,"block_results":`)
	g.results(h)
	g.lit(`}`)
	out := g.b
	g.b = nil
	return out
}

// finish completes a record rendered by record: it computes the block's
// hash from its header and the parent's hash (ignored for block 1), writes
// both where record left zeros, and returns the hash.
func (g *generator) finish(rec []byte, parent [32]byte) [32]byte {
	if g.hdr.Height > 1 {
		g.parent = parent
		g.hdr.LastHash = g.parent[:]
		putHexUpper(rec[g.offParent:], parent[:])
		putHexUpper(rec[g.offCommitParent:], parent[:])
		g.lastCommit = g.s.sign(rec, &g.commit, parent)
		g.hdr.LastCommit = g.lastCommit[:]
		putHexUpper(rec[g.offLastCommit:], g.lastCommit[:])
	}
	sum := g.hdr.Hash()
	putHexUpper(rec[g.offHash:], sum[:])
	return sum
}

func putHexUpper(dst, v []byte) {
	const digits = "0123456789ABCDEF"
	for i, c := range v {
		dst[2*i], dst[2*i+1] = digits[c>>4], digits[c&15]
	}
}

// placeholder writes 64 zeros for a hash finish fills in, and returns
// their offset in the record.
func (g *generator) placeholder() int {
	off := len(g.b)
	g.lit("0000000000000000000000000000000000000000000000000000000000000000")
	return off
}

// hexBytes writes v as uppercase hex.
func (g *generator) hexBytes(v []byte) { g.hexUpper(v) }

// block renders the result of /block?height=h.
func (g *generator) block(h uint64) {
	s := g.s
	p := &g.plan
	f := &g.hdr
	// Every txs is encoded first: data_hash, in the header, is their
	// Merkle root.
	g.txs = g.txs[:0]
	g.txEnds = g.txEnds[:0]
	g.leaves = g.leaves[:0]
	for i := range g.content {
		g.tx = g.encodeTx(g.tx[:0], &g.content[i])
		g.txs = append(g.txs, g.tx...)
		g.txEnds = append(g.txEnds, len(g.txs))
		sum := sha256.Sum256(g.tx)
		g.leaves = append(g.leaves, cometbft.LeafHash(&g.leafIn, sum[:]))
	}
	g.tmp = append(g.tmp[:0], g.leaves...)
	g.data = cometbft.MerkleRootOfLeaves(g.leaves, g.tmp, &g.leafIn)

	f.VerBlock, f.VerApp = 11, 1
	f.ChainID = s.chainIDBytes
	f.Height = int64(h)
	sec, nsec := s.blockTime(h)
	f.Sec, f.Nsec = sec, int32(nsec)
	f.Data = g.data[:]
	vals, next := s.setOf(h), s.setOf(h+1)
	g.valsHash, g.nextHash, g.consHash = vals.hash, next.hash, consensusHash(h)
	f.Vals, f.NextVals, f.Consensus = g.valsHash[:], g.nextHash[:], g.consHash[:]
	f.Evid = cometbft.EmptyHashRaw[:]
	proposer := &vals.members[vals.bySlot[p.proposer]]
	f.Proposer = proposer.addr

	g.lit(`{"block_id":{"hash":"`)
	g.offHash = g.placeholder()
	g.lit(`","parts":{"total":1,"hash":"`)
	g.derivedHex(tagPartsHash, h)
	g.lit(`"}},"block":{"header":{"version":{"block":"11","app":"1"},"chain_id":"`)
	g.lit(s.chainID)
	g.lit(`","height":`)
	g.quotedUint(h)
	g.lit(`,"time":"`)
	g.timestamp(sec, nsec)
	if h == 1 {
		g.lit(`","last_block_id":{"hash":"","parts":{"total":0,"hash":""}},"last_commit_hash":"` + emptyHash)
		f.LastHash, f.LastPartsTotal, f.LastPartsHash = nil, 0, nil
		f.LastCommit = cometbft.EmptyHashRaw[:]
	} else {
		g.lit(`","last_block_id":{"hash":"`)
		g.offParent = g.placeholder()
		g.lit(`","parts":{"total":1,"hash":"`)
		g.partsPrev = s.derive(tagPartsHash, h-1)
		g.hexBytes(g.partsPrev[:])
		g.lit(`"}},"last_commit_hash":"`)
		// Drawn as when the hash was random, so that the rest of the
		// content stream is as it was; finish writes the commit's hash.
		g.fill(g.lastCommit[:])
		g.offLastCommit = g.placeholder()
		f.LastHash, f.LastPartsTotal, f.LastPartsHash = nil, 1, g.partsPrev[:]
		f.LastCommit = nil
	}
	g.lit(`","data_hash":"`)
	g.hexBytes(g.data[:])
	g.lit(`","validators_hash":"`)
	g.lit(vals.hexHash)
	g.lit(`","next_validators_hash":"`)
	g.lit(next.hexHash)
	g.lit(`","consensus_hash":"`)
	g.hexBytes(g.consHash[:])
	g.lit(`","app_hash":"`)
	if h > 1 {
		g.appPrev = s.derive(tagAppHash, h-1)
		g.resPrev = s.resultsHash(h - 1)
		g.hexBytes(g.appPrev[:])
		g.lit(`","last_results_hash":"`)
		g.hexBytes(g.resPrev[:])
		f.App, f.LastResults = g.appPrev[:], g.resPrev[:]
	} else {
		g.lit(`","last_results_hash":"` + emptyHash)
		f.App, f.LastResults = nil, cometbft.EmptyHashRaw[:]
	}
	g.lit(`","evidence_hash":"` + emptyHash + `","proposer_address":"`)
	g.lit(proposer.hexAddr)
	g.lit(`"},"data":{"txs":[`)
	prev := 0
	for i, end := range g.txEnds {
		if i > 0 {
			g.lit(`,`)
		}
		g.lit(`"`)
		g.b = base64.StdEncoding.AppendEncode(g.b, g.txs[prev:end])
		g.lit(`"`)
		prev = end
	}
	g.lit(`]},"evidence":{"evidence":[]},"last_commit":`)
	g.lastCommitJSON(h)
	g.lit(`}}`)
}

func (g *generator) lastCommitJSON(h uint64) {
	if h == 1 {
		g.lit(`{"height":"0","round":0,"block_id":{"hash":"","parts":{"total":0,"hash":""}},"signatures":[]}`)
		return
	}
	p := &g.plan
	g.lit(`{"height":`)
	g.quotedUint(h - 1)
	g.lit(`,"round":`)
	g.b = strconv.AppendInt(g.b, int64(p.round), 10)
	g.lit(`,"block_id":{"hash":"`)
	g.offCommitParent = g.placeholder()
	g.lit(`","parts":{"total":1,"hash":"`)
	g.hexBytes(g.partsPrev[:])
	g.lit(`"}},"signatures":[`)
	sec, nsec := g.s.blockTime(h)
	base := sec*1e9 + nsec
	var sig [64]byte
	set := g.s.setOf(h - 1)
	c := &g.commit
	c.height, c.round, c.parts = int64(h-1), int32(p.round), g.partsPrev
	c.sigs = c.sigs[:0]
	for j := range set.members {
		m := &set.members[j]
		if j > 0 {
			g.lit(`,`)
		}
		if p.absent[m.slot] {
			g.lit(`{"block_id_flag":1,"validator_address":"","timestamp":"0001-01-01T00:00:00Z","signature":null}`)
			c.sigs = append(c.sigs, pendingSig{off: -1})
			continue
		}
		g.lit(`{"block_id_flag":2,"validator_address":"`)
		g.lit(m.hexAddr)
		g.lit(`","timestamp":"`)
		ts := base - 300_000_000 + int64(g.r.next()%600_000_000)
		g.timestamp(ts/1e9, ts%1e9)
		g.lit(`","signature":"`)
		g.fill(sig[:]) // drawn to keep the content stream as it was
		c.sigs = append(c.sigs, pendingSig{off: len(g.b), ts: ts, m: m})
		g.lit(sigPlaceholder)
		g.lit(`"}`)
	}
	g.lit(`]}`)
}

// results renders the result of /block_results?height=h, 0.38 shape.
func (g *generator) results(h uint64) {
	g.lit(`{"height":`)
	g.quotedUint(h)
	if len(g.content) == 0 {
		g.lit(`,"txs_results":null`)
	} else {
		g.lit(`,"txs_results":[`)
		for i := range g.content {
			if i > 0 {
				g.lit(`,`)
			}
			g.txResult(&g.content[i])
		}
		g.lit(`]`)
	}
	g.lit(`,"finalize_block_events":[`)
	g.firstEv = true
	g.blockEvents(h)
	g.lit(`],"validator_updates":`)
	g.validatorUpdates(h)
	g.lit(`,"consensus_param_updates":{"block":{"max_bytes":`)
	g.quotedUint(uint64(maxBytes(h)))
	g.lit(`,"max_gas":"75000000"},"evidence":{"max_age_num_blocks":"1000000","max_age_duration":"172800000000000","max_bytes":"50000"},"validator":{"pub_key_types":["ed25519"]}},"app_hash":"`)
	sum := g.s.derive(tagAppHash, h)
	g.b = base64.StdEncoding.AppendEncode(g.b, sum[:])
	g.lit(`"}`)
}

func (g *generator) txResult(c *txContent) {
	t := c.plan
	if t.failed {
		g.lit(`{"code":`)
		g.b = strconv.AppendUint(g.b, uint64(c.failCode), 10)
		g.lit(`,"data":null,"log":"`)
		g.failLog(c)
		g.lit(`","info":"","gas_wanted":`)
	} else {
		g.lit(`{"code":0,"data":"`)
		g.lit(msgResponses[t.kind][t.msgs-1])
		g.lit(`","log":"","info":"","gas_wanted":`)
	}
	g.quotedUint(c.gasWanted)
	g.lit(`,"gas_used":`)
	g.quotedUint(c.gasUsed)
	g.lit(`,"events":[`)
	g.firstEv = true
	g.txEvents(c)
	g.lit(`],"codespace":"`)
	if t.failed {
		g.lit(`sdk`)
	}
	g.lit(`"}`)
}

func (g *generator) failLog(c *txContent) {
	switch c.failCode {
	case 11:
		g.lit(`out of gas in location: WriteFlat; gasWanted: `)
		g.b = strconv.AppendUint(g.b, c.gasWanted, 10)
		g.lit(`, gasUsed: `)
		g.b = strconv.AppendUint(g.b, c.gasUsed, 10)
		g.lit(`: out of gas`)
	case 32:
		g.lit(`account sequence mismatch, expected `)
		g.b = strconv.AppendUint(g.b, c.seq+1, 10)
		g.lit(`, got `)
		g.b = strconv.AppendUint(g.b, c.seq, 10)
		g.lit(`: incorrect account sequence`)
	default: // 5
		g.lit(`failed to execute message; message index: 0: spendable balance `)
		g.b = strconv.AppendUint(g.b, c.amount/3, 10)
		g.lit(`uatom is smaller than `)
		g.b = strconv.AppendUint(g.b, c.amount, 10)
		g.lit(`uatom: insufficient funds`)
	}
}

// Event writing. ev opens an event, attr* add attributes, end closes it;
// mode, when not empty, is the "mode" attribute a 0.38 application appends
// to every finalize_block event.

func (g *generator) ev(typ string) {
	if !g.firstEv {
		g.lit(`,`)
	}
	g.firstEv = false
	g.firstAtt = true
	g.lit(`{"type":"`)
	g.lit(typ)
	g.lit(`","attributes":[`)
}

func (g *generator) attrKey(key string) {
	if !g.firstAtt {
		g.lit(`,`)
	}
	g.firstAtt = false
	g.lit(`{"key":"`)
	g.lit(key)
	g.lit(`","value":`)
}

// attr adds an attribute whose value needs no JSON escaping.
func (g *generator) attr(key, value string) {
	g.attrKey(key)
	g.lit(`"`)
	g.lit(value)
	g.lit(`","index":true}`)
}

func (g *generator) attrBytes(key string, value []byte) {
	g.attrKey(key)
	g.lit(`"`)
	g.b = append(g.b, value...)
	g.lit(`","index":true}`)
}

// attrJSON adds an attribute whose value must be escaped.
func (g *generator) attrJSON(key string, value []byte) {
	g.attrKey(key)
	g.b = jsonscan.AppendQuoted(g.b, value)
	g.lit(`,"index":true}`)
}

func (g *generator) attrUint(key string, v uint64) {
	g.num = strconv.AppendUint(g.num[:0], v, 10)
	g.attrBytes(key, g.num)
}

func (g *generator) attrCoin(key string, amount uint64, denom string) {
	g.num = strconv.AppendUint(g.num[:0], amount, 10)
	g.num = append(g.num, denom...)
	g.attrBytes(key, g.num)
}

// attrDec adds a Cosmos SDK decimal (18 fractional digits) with a denom.
func (g *generator) attrDec(key string, whole uint64, denom string) {
	g.num = appendDec(g.num[:0], whole, g.r.next())
	g.num = append(g.num, denom...)
	g.attrBytes(key, g.num)
}

func appendDec(dst []byte, whole, frac uint64) []byte {
	dst = strconv.AppendUint(dst, whole, 10)
	dst = append(dst, '.')
	frac %= 1_000_000_000_000_000_000
	var digits [18]byte
	for i := 17; i >= 0; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	return append(dst, digits[:]...)
}

func (g *generator) end(mode string) {
	if mode != "" {
		g.attr("mode", mode)
	}
	g.lit(`]}`)
}

// eventEnd closes an event: a transaction's event with the index of the
// message that wrote it (none for the fee's), a finalize_block event with
// its mode.
type eventEnd struct{ msgIndex, mode string }

func inTx(msgIndex string) eventEnd { return eventEnd{msgIndex: msgIndex} }

func (g *generator) close(e eventEnd) {
	if e.msgIndex != "" {
		g.attr("msg_index", e.msgIndex)
	}
	g.end(e.mode)
}

// The bank module's events, as x/bank writes them.

// coinEvent writes an event of one account and an amount: coin_spent
// (its spender), coin_received (its receiver), coinbase (its minter).
func (g *generator) coinEvent(typ, role, account string, amount uint64, denom string, e eventEnd) {
	g.ev(typ)
	g.attr(role, account)
	g.attrCoin("amount", amount, denom)
	g.close(e)
}

func (g *generator) transfer(recipient, sender string, amount uint64, denom string, e eventEnd) {
	g.ev("transfer")
	g.attr("recipient", recipient)
	g.attr("sender", sender)
	g.attrCoin("amount", amount, denom)
	g.close(e)
}

// send writes the three events of a bank send from one account to another.
func (g *generator) send(from, to string, amount uint64, denom string, e eventEnd) {
	g.coinEvent("coin_spent", "spender", from, amount, denom, e)
	g.coinEvent("coin_received", "receiver", to, amount, denom, e)
	g.transfer(to, from, amount, denom, e)
}

// messageSender is the "message" event naming a message's sender.
func (g *generator) messageSender(sender string, e eventEnd) {
	g.ev("message")
	g.attr("sender", sender)
	g.close(e)
}

// messageModule is the "message" event naming the module that handled a
// message.
func (g *generator) messageModule(module string, e eventEnd) {
	g.ev("message")
	g.attr("module", module)
	g.close(e)
}

// blockEvents renders the finalize_block_events of block h: what
// blockEventCount counts.
func (g *generator) blockEvents(h uint64) {
	s := g.s
	p := &g.plan
	m := &s.modules
	begin := eventEnd{mode: "BeginBlock"}
	minted := g.r.between(4_000_000, 4_600_000)

	g.coinEvent("coin_received", "receiver", m.mint, minted, "uatom", begin)
	g.coinEvent("coinbase", "minter", m.mint, minted, "uatom", begin)
	g.send(m.mint, m.feeCollector, minted, "uatom", begin)
	g.ev("mint")
	g.num = appendDec(g.num[:0], 0, 620_000_000_000_000_000+g.r.next()%10_000_000_000_000_000)
	g.attrBytes("bonded_ratio", g.num)
	g.num = appendDec(g.num[:0], 0, 100_000_000_000_000_000+g.r.next()%50_000_000_000_000_000)
	g.attrBytes("inflation", g.num)
	g.attrDec("annual_provisions", 40_000_000_000_000+g.r.next()%4_000_000_000_000, "")
	g.attrUint("amount", minted)
	g.end(begin.mode)

	fees := minted + g.r.between(0, 200_000)
	g.send(m.feeCollector, m.distribution, fees, "uatom", begin)

	if h > 1 {
		share := fees / uint64(len(s.vals))
		for i, v := range s.vals {
			if p.absent[i] {
				continue
			}
			reward := share/2 + g.r.next()%(share+1)
			g.ev("commission")
			g.attrDec("amount", reward/20, "uatom")
			g.attr("validator", v.operator)
			g.end(begin.mode)
			g.ev("rewards")
			g.attrDec("amount", reward, "uatom")
			g.attr("validator", v.operator)
			g.end(begin.mode)
		}
		for i, v := range s.vals {
			if !p.absent[i] {
				continue
			}
			g.ev("liveness")
			g.attr("address", v.cons)
			g.attrUint("missed_blocks", g.r.between(1, 500))
			g.attrUint("height", h)
			g.end(begin.mode)
		}
	}

	for range p.extras {
		g.ev("complete_unbonding")
		g.attrCoin("amount", g.r.between(1_000, 50_000_000_000), "uatom")
		g.attr("validator", s.vals[g.r.intn(len(s.vals))].operator)
		g.attr("delegator", s.accounts[g.r.intn(len(s.accounts))])
		g.end("EndBlock")
	}
}

// ValidatorUpdatesEvery is how often the synthetic chain's application
// changes a validator's power (as staking does at the end of a block where
// a delegation moved it; on a busy chain, most blocks): every that many
// heights, one slot in turn.
const ValidatorUpdatesEvery = 100

// occupant returns slot i's validator as the updates of height h see it
// (the set after the updates below h): its key.
func (s *Synthetic) occupant(i int, h uint64) ed25519.PrivateKey {
	gen, _ := s.slotState(i, lastUpdate(h-1))
	return s.slotKey(i, gen)
}

// UpdatedValidator returns the consensus address of the validator whose
// power the update at height h (a multiple of ValidatorUpdatesEvery)
// changes.
func (s *Synthetic) UpdatedValidator(h uint64) [20]byte {
	k := s.occupant(int(h/ValidatorUpdatesEvery%uint64(len(s.vals))), h)
	return [20]byte(cmted25519.PubKey(k.Public().(ed25519.PublicKey)).Address())
}

// validatorUpdates renders block_results.validator_updates of height h as
// a 0.38 node prints it; null at most heights.
func (g *generator) validatorUpdates(h uint64) {
	s := g.s
	n := uint64(len(s.vals))
	rotate := h >= RotateAt && (h-RotateAt)%RotateEvery == 0
	if h%ValidatorUpdatesEvery != 0 && !rotate {
		g.lit(`null`)
		return
	}
	g.lit(`[`)
	update := func(k ed25519.PrivateKey, power uint64) {
		g.lit(`{"pub_key":{"Sum":{"type":"tendermint.crypto.PublicKey_Ed25519","value":{"ed25519":"`)
		g.b = base64.StdEncoding.AppendEncode(g.b, k.Public().(ed25519.PublicKey))
		g.lit(`"}}},"power":`)
		g.quotedUint(power)
		g.lit(`}`)
	}
	if h%ValidatorUpdatesEvery == 0 {
		update(s.occupant(int(h/ValidatorUpdatesEvery%n), h), basePower+h%997)
	} else {
		// One slot's validator leaves, the next generation joins.
		slot := int((h - RotateAt) / RotateEvery % n)
		gen, _ := s.slotState(slot, lastUpdate(h-1))
		update(s.slotKey(slot, gen), 0)
		g.lit(`,`)
		update(s.slotKey(slot, gen+1), basePower+h%997)
	}
	g.lit(`]`)
}
