package cometbftsynth

import "math"

// rng is SplitMix64: tiny state, fast, good enough for workload data, and
// seedable per (chain, height, stream) so that no height depends on another.
type rng uint64

func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// Streams of newRNG: the plan of a block (what it holds, hence its row
// counts) draws from its own stream, so that ExpectedCounts need not render
// the content.
const (
	streamRegion = iota + 1
	streamPlan
	streamContent
	streamTime
)

func newRNG(seed, n, stream uint64) rng {
	return rng(mix64(mix64(seed+stream*0x632be59bd9b4e019) ^ n))
}

func (r *rng) next() uint64 {
	*r += 0x9e3779b97f4a7c15
	return mix64(uint64(*r))
}

// intn returns a value in [0, n), n < 2^32.
func (r *rng) intn(n int) int { return int((r.next() >> 32) * uint64(n) >> 32) }

// between returns a value in [lo, hi].
func (r *rng) between(lo, hi uint64) uint64 { return lo + r.next()%(hi-lo+1) }

// float returns a value in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// chance reports true with probability p.
func (r *rng) chance(p float64) bool { return r.float() < p }

// poisson draws from a Poisson distribution of mean lambda.
func (r *rng) poisson(lambda float64) int {
	if lambda <= 0 {
		return 0
	}
	if lambda < 30 {
		limit := math.Exp(-lambda)
		k := 0
		for p := r.float(); p > limit; p *= r.float() {
			k++
		}
		return k
	}
	// Normal approximation; exact enough at this size.
	u1, u2 := 1-r.float(), r.float()
	n := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
	return max(0, int(math.Round(lambda+math.Sqrt(lambda)*n)))
}

// Transaction kinds of the synthetic chain, after what Cosmos Hub carries.
const (
	kindSend        = iota // bank MsgSend
	kindIBCTransfer        // ibc MsgTransfer
	kindWithdraw           // distribution MsgWithdrawDelegatorReward, 1–3 msgs
	kindDelegate           // staking MsgDelegate
	kindRelay              // relayer: ibc MsgUpdateClient + MsgRecvPacket
	kindVote               // gov MsgVote
)

type txPlan struct {
	kind   uint8
	msgs   uint8
	failed bool
}

// blockPlan is what block h holds, drawn from its plan stream.
type blockPlan struct {
	txs      []txPlan
	absent   []bool // per validator: missing from the last commit
	proposer int
	round    int
	extras   int // complete_unbonding events at EndBlock
}

// regionLen is the length of a stretch of blocks sharing one tx rate.
const regionLen = 200

// Region rate factors: quiet stretches, bursts, and normal stretches whose
// factor makes the mean exactly 1.
const (
	quietShare, quietFactor = 0.12, 0.05
	burstShare, burstFactor = 0.10, 3.5
	normalFactor            = (1 - quietShare*quietFactor - burstShare*burstFactor) / (1 - quietShare - burstShare)
)

// txRate is the mean number of txs of the blocks of h's region.
func (s *Synthetic) txRate(h uint64) float64 {
	if s.steady {
		return s.txPerBlock
	}
	r := newRNG(s.seed, (h-1)/regionLen, streamRegion)
	switch u := r.float(); {
	case u < quietShare:
		return s.txPerBlock * quietFactor
	case u < quietShare+burstShare:
		return s.txPerBlock * burstFactor
	default:
		return s.txPerBlock * normalFactor
	}
}

// plan fills p with block h's plan, reusing its slices.
func (s *Synthetic) plan(h uint64, p *blockPlan) {
	r := newRNG(s.seed, h, streamPlan)
	n := r.poisson(s.txRate(h))
	p.txs = p.txs[:0]
	for range n {
		t := txPlan{msgs: 1}
		switch u := r.intn(100); {
		case u < 52:
			t.kind = kindSend
		case u < 61:
			t.kind = kindIBCTransfer
		case u < 74:
			t.kind = kindWithdraw
			t.msgs = uint8(1 + r.intn(3))
		case u < 84:
			t.kind = kindDelegate
		case u < 90:
			t.kind = kindRelay
			t.msgs = 2
		default:
			t.kind = kindVote
		}
		t.failed = r.chance(0.04)
		p.txs = append(p.txs, t)
	}
	p.absent = p.absent[:0]
	missing := 0
	for range s.vals {
		a := r.chance(0.025)
		p.absent = append(p.absent, a)
		if a {
			missing++
		}
	}
	// A commit carries more than 2/3 of the power: powers differ by less
	// than 0.1%, so the present must be more than 2.002/3 of the set.
	// Absences past that are dropped, last first (no draw is skipped).
	nv := len(s.vals)
	for i := nv - 1; i >= 0 && 3000*(nv-missing) <= 2002*nv; i-- {
		if p.absent[i] {
			p.absent[i] = false
			missing--
		}
	}
	p.proposer = r.intn(len(s.vals))
	p.round = 0
	if r.chance(0.01) {
		p.round = 1
	}
	p.extras = 0
	if r.chance(0.03) {
		p.extras = 1 + r.intn(3)
	}
}

// Events per transaction: the ante handler's (fee transfer, fee, sequence,
// signature) that every tx has, then each kind's own. A failed tx keeps only
// the ante events, as the Cosmos SDK does.
const anteEvents = 7

func txEventCount(t txPlan) int {
	if t.failed {
		return anteEvents
	}
	switch t.kind {
	case kindSend:
		return anteEvents + 5
	case kindIBCTransfer:
		return anteEvents + 9
	case kindWithdraw:
		return anteEvents + 6*int(t.msgs)
	case kindDelegate:
		return anteEvents + 4
	case kindRelay:
		return anteEvents + 11
	default: // kindVote
		return anteEvents + 2
	}
}

// Block-level events: mint (6) and the fee transfer to distribution (3)
// every block; from height 2, commission and rewards per validator that
// signed the last commit and liveness per validator that did not; and the
// plan's EndBlock extras.
const mintAndFeeEvents = 9

func blockEventCount(h uint64, p *blockPlan) int {
	n := mintAndFeeEvents + p.extras
	if h > 1 {
		for _, a := range p.absent {
			if a {
				n++
			} else {
				n += 2
			}
		}
	}
	return n
}

// ExpectedCounts returns the number of transactions and of events (block
// level plus transaction level) of block h (h ≥ 1): the rows a decoder must
// produce for it.
func (s *Synthetic) ExpectedCounts(h uint64) (txs, events int) {
	var p blockPlan
	s.plan(h, &p)
	events = blockEventCount(h, &p)
	for _, t := range p.txs {
		events += txEventCount(t)
	}
	return len(p.txs), events
}
