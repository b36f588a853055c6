package aptos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/aptos"
	"github.com/blockhaul/blockhaul/chain/aptossynth"
	"github.com/blockhaul/blockhaul/chain/jsonrpc"
	"github.com/blockhaul/blockhaul/internal/fault"
)

// TestRealBlocksFromReplay: each recorded mainnet block fetched from a
// local node that puts at most 3 transactions in a block's answer: the
// source follows with /v1/transactions pages, and the record holds the
// block's answer as sent, the pages, and the parent's hash and last
// version; the staged hash is the block's, its parent hash the parent's,
// and the record passes full verification.
func TestRealBlocksFromReplay(t *testing.T) {
	ctx := context.Background()
	r := newReplay(t, "1")
	r.ledger = readReal(t, "mainnet_ledger_info.json")
	r.maxBlockTxs = 3
	envs := map[uint64]envelope{}
	for _, h := range realBlocks {
		envs[h] = r.addReal(h)
	}
	src := newSource(t, "", r.serve(t))
	for _, h := range realBlocks {
		bs, err := src.Fetch(ctx, h, h)
		if err != nil {
			t.Fatalf("block %d: %v", h, err)
		}
		b := bs[0]
		e := envs[h]
		var want string
		json.Unmarshal(e.fields["block_hash"], &want)
		if fmt.Sprintf("0x%x", b.Hash) != want || fmt.Sprintf("0x%x", b.ParentHash) != assembledParentHash(h) || b.Height != h {
			t.Fatalf("block %d: hash %x parent %x", h, b.Hash, b.ParentHash)
		}
		var rec aptos.Record
		if err := json.Unmarshal(b.Raw, &rec); err != nil {
			t.Fatal(err)
		}
		var got []json.RawMessage
		var page0 struct{ Transactions []json.RawMessage }
		json.Unmarshal(rec.Block, &page0)
		got = append(got, page0.Transactions...)
		for _, p := range rec.Pages {
			var txs []json.RawMessage
			json.Unmarshal(p, &txs)
			got = append(got, txs...)
		}
		if len(got) != len(e.txs) {
			t.Fatalf("block %d: %d transactions in the record, %d recorded", h, len(got), len(e.txs))
		}
		for i := range got {
			if !sameJSONText(t, got[i], e.txs[i]) {
				t.Fatalf("block %d: transaction %d is not the recorded one", h, i)
			}
		}
		if wantPages := len(e.txs) > 3; (len(rec.Pages) > 0) != wantPages {
			t.Fatalf("block %d: %d pages for %d transactions", h, len(rec.Pages), len(e.txs))
		}
		if hash, err := aptos.VerifyBlock(b.Raw); err != nil || !bytes.Equal(hash, b.Hash) {
			t.Fatalf("block %d: verify: %x, %v", h, hash, err)
		}
	}
	// The seven transactions of block 456015808: three in the block's
	// answer, four in one page.
	if !slices.Contains(r.requests(), "/v1/transactions?start=3556737306&limit=4") {
		t.Fatalf("no page of block 456015808 asked: %q", r.requests())
	}
}

// TestPagesOfALargeBlock: a synthetic block of ≈40 transactions, at most 5
// in the block's answer and 7 a page, comes whole and in order.
func TestPagesOfALargeBlock(t *testing.T) {
	ctx := context.Background()
	syn := aptossynth.New(aptossynth.Config{Seed: 5, TxPerBlock: 40, Steady: true})
	r := newReplay(t, "4")
	for h := uint64(0); h <= 3; h++ {
		r.add(blockOf(t, syn, h))
	}
	r.maxBlockTxs = 5
	c, err := jsonrpc.New(jsonrpc.Config{Endpoints: []string{r.serve(t)}})
	if err != nil {
		t.Fatal(err)
	}
	src, err := aptos.NewSource(aptos.SourceConfig{Client: c, PageLimit: 7})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := src.Fetch(ctx, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		got, err := aptos.ParseRecord(b.Raw)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := aptos.ParseRecord(mustRecord(t, syn, b.Height))
		if len(got.Txs) != len(want.Txs) || len(got.Txs) < 40 {
			t.Fatalf("block %d: %d transactions, want %d", b.Height, len(got.Txs), len(want.Txs))
		}
		for i := range got.Txs {
			if got.Txs[i].Version != want.Txs[i].Version || got.Txs[i].Hash != want.Txs[i].Hash {
				t.Fatalf("block %d: transaction %d is %s, want %s", b.Height, i, got.Txs[i].Version, want.Txs[i].Version)
			}
		}
	}
	pages := 0
	for _, p := range r.requests() {
		if strings.HasPrefix(p, "/v1/transactions?") {
			pages++
			if !strings.HasSuffix(p, "limit=7") && !strings.Contains(p, "limit=") {
				t.Fatalf("page request %s", p)
			}
		}
	}
	if pages < 3*5 {
		t.Fatalf("%d pages for three blocks of %d transactions beyond the first 5", pages, 37)
	}
}

// TestSyntheticRecordsThroughReplay: the synthetic chain's blocks served by
// a node and fetched back are its records byte for byte, genesis and an
// epoch change included.
func TestSyntheticRecordsThroughReplay(t *testing.T) {
	ctx := context.Background()
	syn := aptossynth.New(aptossynth.Config{Seed: 9})
	r := newReplay(t, "4")
	for _, h := range []uint64{0, 1, 2, aptossynth.EpochBlocks - 1, aptossynth.EpochBlocks, aptossynth.EpochBlocks + 1} {
		r.add(blockOf(t, syn, h))
	}
	src := newSource(t, "", r.serve(t))
	for _, span := range [][2]uint64{{0, 2}, {aptossynth.EpochBlocks, aptossynth.EpochBlocks + 1}} {
		bs, err := src.Fetch(ctx, span[0], span[1])
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if !bytes.Equal(b.Raw, mustRecord(t, syn, b.Height)) || !bytes.Equal(b.Hash, syn.BlockHash(b.Height)) {
				t.Fatalf("block %d: not the synthetic record", b.Height)
			}
		}
	}
	end, _ := aptos.ParseRecord(mustRecord(t, syn, aptossynth.EpochBlocks))
	next, _ := aptos.ParseRecord(mustRecord(t, syn, aptossynth.EpochBlocks+1))
	if end.Txs[0].Epoch != "1" || next.Txs[0].Epoch != "2" || next.Txs[0].Round != "1" || len(end.Txs) != 2 ||
		!slices.ContainsFunc(end.Txs[0].Events, func(e aptos.Event) bool { return e.Type == "0x1::reconfiguration::NewEpochEvent" }) {
		t.Fatalf("epoch change: block %d epoch %s (%d transactions), block %d epoch %s round %s",
			aptossynth.EpochBlocks, end.Txs[0].Epoch, len(end.Txs), aptossynth.EpochBlocks+1, next.Txs[0].Epoch, next.Txs[0].Round)
	}
}

// TestLedgerInfoAndPrunedRange: the ledger info gives the chain id and the
// tip; a range below the node's oldest_block_height is refused before
// anything is fetched, naming that height.
func TestLedgerInfoAndPrunedRange(t *testing.T) {
	ctx := context.Background()
	r := newReplay(t, "1")
	r.ledger = readReal(t, "mainnet_ledger_info.json") // chain 1, tip 58851650, oldest 1101178
	src := newSource(t, "", r.serve(t))
	id, err := src.ChainID(ctx)
	if err != nil || id != "1" {
		t.Fatalf("chain id %q, %v", id, err)
	}
	if tip, err := src.Tip(ctx); err != nil || tip != 58851650 {
		t.Fatalf("tip %d, %v", tip, err)
	}
	err = src.CheckRange(ctx, 1_000_000, 1_200_000)
	if !errors.Is(err, chain.ErrSourceRefused) || !strings.Contains(err.Error(), "1101178") {
		t.Fatalf("a pruned range: %v", err)
	}
	if err := src.CheckRange(ctx, 1_101_178, 1_200_000); err != nil {
		t.Fatalf("a served range: %v", err)
	}
}

// TestThrottledAndKeyed: 429s, with and without Retry-After, are waited
// out; the key of the URL's userinfo, or else the configured one, is sent
// as a bearer token and never appears in an error.
func TestThrottledAndKeyed(t *testing.T) {
	ctx := context.Background()
	syn := aptossynth.New(aptossynth.Config{Seed: 2})
	for _, retry := range []string{"", "0"} {
		r := newReplay(t, "4")
		for h := uint64(0); h <= 2; h++ {
			r.add(blockOf(t, syn, h))
		}
		r.throttle, r.retryHdr = 2, retry
		url := r.serve(t)
		keyed := strings.Replace(url, "http://", "http://:s3cretKey42@", 1)
		src := newSource(t, "envKey99", keyed)
		if _, err := src.Fetch(ctx, 1, 2); err != nil {
			t.Fatalf("Retry-After %q: %v", retry, err)
		}
		if n := len(r.requests()); n != 2+3 {
			t.Fatalf("Retry-After %q: %d requests, want 2 refused and 3 answered", retry, n)
		}
		for _, a := range r.auth {
			if a != "Bearer s3cretKey42" {
				t.Fatalf("Authorization %q", a)
			}
		}
		_, err := src.Fetch(ctx, 3, 3) // a block the node does not have
		if err == nil || strings.Contains(err.Error(), "s3cretKey42") || !strings.Contains(err.Error(), "block 3") {
			t.Fatalf("a missing block: %v", err)
		}
		plain := newSource(t, "envKey99", url)
		r.auth = nil
		if _, err := plain.Fetch(ctx, 1, 1); err != nil {
			t.Fatal(err)
		}
		if r.auth[len(r.auth)-1] != "Bearer envKey99" {
			t.Fatalf("Authorization %q without userinfo", r.auth[len(r.auth)-1])
		}
	}
}

// lie is a node answer made wrong.
type lie struct {
	name  string
	field string // what the error names
	make  func(r *replay, h uint64)
}

var lies = []lie{
	{"a version skipped", "transactions[1].version", func(r *replay, h uint64) {
		e := r.blocks[h]
		e.txs[1] = bytes.Replace(e.txs[1], []byte(`"version":"`), []byte(`"version":"9`), 1)
		r.blocks[h], r.raw[h] = e, nil
	}},
	{"a transaction moved to the next block", "transactions[1].type", func(r *replay, h uint64) {
		// Block h's epilogue opens block h+1; both blocks' version ranges
		// are moved with it, so only the order betrays the move.
		a, b := r.blocks[h], r.blocks[h+1]
		moved := a.txs[len(a.txs)-1]
		a.txs = a.txs[:len(a.txs)-1]
		b.txs = append([]json.RawMessage{moved}, b.txs...)
		a.fields["last_version"] = json.RawMessage(fmt.Sprintf(`"%d"`, a.u64(r.t, "last_version")-1))
		b.fields["first_version"] = json.RawMessage(fmt.Sprintf(`"%d"`, b.u64(r.t, "first_version")-1))
		r.blocks[h], r.blocks[h+1], r.raw[h], r.raw[h+1] = a, b, nil, nil
	}},
	{"another block answered", "block_height", func(r *replay, h uint64) { r.answerFor[h] = h + 1 }},
	{"a chain id changed", "X-Aptos-Chain-Id", func(r *replay, h uint64) { r.chainID = "2" }},
}

// TestNegativeControls: each lie of a node is refused with an error that
// names the height and the field, unsound (retried, then exit status 4);
// beside a sound node the span is fetched from it.
func TestNegativeControls(t *testing.T) {
	ctx := context.Background()
	syn := aptossynth.New(aptossynth.Config{Seed: 3})
	const h = 5
	for _, l := range lies {
		t.Run(l.name, func(t *testing.T) {
			serve := func(liar bool) *replay {
				r := newReplay(t, "4")
				r.ledger = []byte(`{"chain_id":4,"epoch":"1","ledger_version":"100","oldest_ledger_version":"0","ledger_timestamp":"1","node_role":"full_node","oldest_block_height":"0","block_height":"8","git_hash":"x"}`)
				for k := uint64(0); k <= 8; k++ {
					r.add(blockOf(t, syn, k))
				}
				if liar {
					l.make(r, h)
				}
				return r
			}
			liar, sound := serve(true), serve(false)
			liarURL, soundURL := liar.serve(t), sound.serve(t)

			src := newSource(t, "", liarURL)
			if l.field == "X-Aptos-Chain-Id" {
				liar.chainID = "4"
				if _, err := src.ChainID(ctx); err != nil {
					t.Fatal(err)
				}
				l.make(liar, h)
			}
			_, err := src.Fetch(ctx, h, h+1)
			var re *aptos.RecordError
			if !errors.As(err, &re) || re.Field != l.field || re.Height+1 < h || re.Height > h+1 || fault.Of(err) != fault.Unsound {
				t.Fatalf("%v (%T; fault %s), want a record error of block %d naming %s", err, err, fault.Of(err), h, l.field)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("block %d", re.Height)) || !strings.Contains(err.Error(), l.field) || re.Endpoint == "" {
				t.Fatalf("error %q does not name the height, the field and the endpoint", err)
			}

			both := newSource(t, "", liarURL, soundURL)
			if l.field == "X-Aptos-Chain-Id" {
				both = newSource(t, "", soundURL, liarURL)
				if _, err := both.ChainID(ctx); err != nil {
					t.Fatal(err)
				}
			}
			asked := len(liar.requests())
			bs, err := both.Fetch(ctx, h-1, h+1)
			if err != nil {
				t.Fatalf("beside a sound node: %v", err)
			}
			if l.field != "X-Aptos-Chain-Id" && len(liar.requests()) == asked {
				t.Fatal("the lying node was not asked first")
			}
			for _, b := range bs {
				if !bytes.Equal(b.Raw, mustRecord(t, syn, b.Height)) {
					t.Fatalf("block %d is not the sound node's", b.Height)
				}
			}
		})
	}
}

// TestRecordChecks: records made wrong are refused by VerifyBlock, naming
// the field: a parent whose last version is not the one before, a
// metadata transaction whose round or NewBlockEvent height is another's,
// and a recomputed hash that does not match (a metadata transaction, a
// block epilogue of another block, an event root of no events).
func TestRecordChecks(t *testing.T) {
	syn := aptossynth.New(aptossynth.Config{Seed: 4})
	good := mustRecord(t, syn, 7)
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"parent's last version", `"last_version":"` + lastOf(t, syn, 6) + `"}}`, `"last_version":"1"}}`, "first_version"},
		{"metadata round", `"round":"7","events"`, `"round":"8","events"`, "transactions[0].events[0].data.round"},
		{"event height", `"height":"7","previous_block_votes_bitvec"`, `"height":"6","previous_block_votes_bitvec"`, "transactions[0].events[0].data.height"},
		{"metadata hash", `"failed_proposer_indices":[],"timestamp"`, `"failed_proposer_indices":[1],"timestamp"`, "transactions[0].hash"},
		{"epilogue of another block", `"block_effective_block_gas_units":`, `"block_effective_block_gas_units":1`, "block_epilogue_transaction"},
		{"no events, an event root", `"event_root_hash":"0x414343554d554c41544f525f504c414345484f4c4445525f4841534800000000"`, `"event_root_hash":"0x414343554d554c41544f525f504c414345484f4c4445525f4841534800000001"`, "event_root_hash (no events)"},
	} {
		bad := bytes.Replace(good, []byte(tc.from), []byte(tc.to), 1)
		if bytes.Equal(bad, good) {
			t.Fatalf("%s: %q not in the record", tc.name, tc.from)
		}
		_, err := aptos.VerifyBlock(bad)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "block 7") {
			t.Fatalf("%s: %v, want an error of block 7 naming %s", tc.name, err, tc.want)
		}
	}
	if _, err := aptos.VerifyBlock(good); err != nil {
		t.Fatal(err)
	}
}

// sameJSONText reports whether two JSON texts are the same but for
// insignificant whitespace (a transaction as recorded, pretty-printed, and
// as a node's answer re-cut to fewer transactions carries it).
func sameJSONText(t testing.TB, a, b []byte) bool {
	var ca, cb bytes.Buffer
	if err := json.Compact(&ca, a); err != nil {
		t.Fatal(err)
	}
	if err := json.Compact(&cb, b); err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

func lastOf(t *testing.T, syn *aptossynth.Chain, h uint64) string {
	_, last := syn.Versions(h)
	return fmt.Sprint(last)
}

func mustRecord(t testing.TB, syn *aptossynth.Chain, h uint64) []byte {
	t.Helper()
	raw, err := syn.Record(h)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// blockOf is the node's answer inside a synthetic record.
func blockOf(t testing.TB, syn *aptossynth.Chain, h uint64) []byte {
	var rec aptos.Record
	if err := json.Unmarshal(mustRecord(t, syn, h), &rec); err != nil {
		t.Fatal(err)
	}
	return rec.Block
}
