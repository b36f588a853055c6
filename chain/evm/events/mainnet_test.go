package events

import (
	"encoding/json"
	"math/big"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/evm"
)

// The topic0 of each event the test expects, as block explorers list
// them (not computed here from the ABI, as the decoder does).
const (
	topicTransfer = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
	topicApproval = "0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925"
	topicV2Swap   = "0xd78ad95fa46c994b6551d0da85fc275fe613ce37657fb8d5e3d130840159d822"
	topicV2Sync   = "0x1c411e9a96e071241c2f21f7726b17ae89e3cab4c78be50e062b03a9fffbbad1"
	topicV3Swap   = "0xc42079f94a6350d7e6235f29174924f928cc2ac818eb64fed8004e115fbcca67"
)

type rpcLog struct {
	Address         string
	Topics          []string
	Data            string
	BlockNumber     string
	TransactionHash string
	LogIndex        string
}

// wordsOf splits ABI data into its 32-byte words.
func wordsOf(t *testing.T, data []byte) [][]byte {
	if len(data)%32 != 0 {
		t.Fatalf("data of %d bytes", len(data))
	}
	var w [][]byte
	for i := 0; i < len(data); i += 32 {
		w = append(w, data[i:i+32])
	}
	return w
}

func uintWord(w []byte) string { return new(big.Int).SetBytes(w).String() }

// intWord reads a word as a two's complement int256.
func intWord(w []byte) string {
	v := new(big.Int).SetBytes(w)
	if w[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), 256))
	}
	return v.String()
}

func addrTopic(topic string) string { return "0x" + topic[len(topic)-40:] }

// TestEthereumBlock18000000 decodes every log of Ethereum mainnet block
// 18,000,000 (0x95b1…baf3: 291 logs, as eth_getLogs answered shovel's
// authors; testdata/mainnet/README.md) with three ABIs over every address
// (ERC-20, Uniswap V2 pair, Uniswap V3 pool), and checks each row against
// values read here from the topics and data words by hand — addresses from
// the topics' last 20 bytes, unsigned words as big-endian integers, signed
// ones as two's complement — never by accounts/abi. The ERC-721 Transfer
// and Approval logs of the block (their token id indexed: 4 topics) are
// rows of erc20_undecoded. The counts are the fixture's, counted by topic0
// apart from this code.
func TestEthereumBlock18000000(t *testing.T) {
	raw, err := os.ReadFile("testdata/mainnet/logs-18000000.json")
	if err != nil {
		t.Fatal(err)
	}
	// eth_getBlockByNumber's header, then eth_getLogs's answer.
	var batch []struct{ Result json.RawMessage }
	var header struct{ Number, Hash string }
	var logs []rpcLog
	if err := json.Unmarshal(raw, &batch); err != nil || len(batch) != 2 {
		t.Fatalf("%d answers: %v", len(batch), err)
	}
	if err := json.Unmarshal(batch[0].Result, &header); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(batch[1].Result, &logs); err != nil {
		t.Fatal(err)
	}
	if header.Number != "0x112a880" || header.Hash != "0x95b198e154acbfc64109dfd22d8224fe927fd8dfdedfae01587674482ba4baf3" || len(logs) != 291 {
		t.Fatalf("block %s %s, %d logs", header.Number, header.Hash, len(logs))
	}

	set := compile(t, "erc20=testdata/erc20.json", "univ2=testdata/uniswap_v2_pair.json", "univ3=testdata/uniswap_v3_pool.json")
	d := NewDecoder(evm.NewDecoder(), set)
	tables := d.Tables()
	rows := chain.NewRows(tables)
	want := map[string]map[int32]map[string]string{} // table → log index → column → value
	expect := func(table string, index int32, cols map[string]string) {
		if want[table] == nil {
			want[table] = map[int32]map[string]string{}
		}
		want[table][index] = cols
	}
	for _, l := range logs {
		idx, err := strconv.ParseInt(strings.TrimPrefix(l.LogIndex, "0x"), 16, 32)
		if err != nil || l.BlockNumber != header.Number {
			t.Fatalf("log %s of block %s: %v", l.LogIndex, l.BlockNumber, err)
		}
		index := int32(idx)
		logRow(rows, 18000000, index, l.TransactionHash, l.Address, l.Topics, l.Data)
		if len(l.Topics) == 0 {
			continue
		}
		w := wordsOf(t, unhex(l.Data))
		tp := l.Topics
		shape := func(topics, words int) bool { return len(tp) == topics && len(w) == words }
		switch tp[0] {
		case topicTransfer, topicApproval:
			table, a, b := "erc20_transfer", "from", "to"
			if tp[0] == topicApproval {
				table, a, b = "erc20_approval", "owner", "spender"
			}
			switch {
			case shape(3, 1):
				expect(table, index, map[string]string{a: addrTopic(tp[1]), b: addrTopic(tp[2]), "value": uintWord(w[0])})
			case shape(4, 0):
				expect("erc20_undecoded", index, map[string]string{"event_table": table, "reason": "4 topics, the event has 3"})
			default:
				t.Fatalf("log %d: %d topics, %d words", index, len(tp), len(w))
			}
		case topicV2Swap:
			if !shape(3, 4) {
				t.Fatalf("V2 Swap %d: %d topics, %d words", index, len(tp), len(w))
			}
			expect("univ2_swap", index, map[string]string{"sender": addrTopic(tp[1]), "to": addrTopic(tp[2]),
				"amount0_in": uintWord(w[0]), "amount1_in": uintWord(w[1]), "amount0_out": uintWord(w[2]), "amount1_out": uintWord(w[3])})
		case topicV2Sync:
			if !shape(1, 2) || new(big.Int).SetBytes(w[0]).BitLen() > 112 || new(big.Int).SetBytes(w[1]).BitLen() > 112 {
				t.Fatalf("V2 Sync %d: %d topics, %x", index, len(tp), w)
			}
			expect("univ2_sync", index, map[string]string{"reserve0": uintWord(w[0]), "reserve1": uintWord(w[1])})
		case topicV3Swap:
			if !shape(3, 5) {
				t.Fatalf("V3 Swap %d: %d topics, %d words", index, len(tp), len(w))
			}
			expect("univ3_swap", index, map[string]string{"sender": addrTopic(tp[1]), "recipient": addrTopic(tp[2]),
				"amount0": intWord(w[0]), "amount1": intWord(w[1]), "sqrt_price_x96": uintWord(w[2]), "liquidity": uintWord(w[3]), "tick": intWord(w[4])})
		}
	}
	// Two rows written out in full (computed apart, in Python, from the
	// same words): the block's two Uniswap V3 swaps, token0 sold, ticks
	// below zero.
	for _, c := range []struct {
		index int32
		tx    string
		cols  map[string]string
	}{
		{104, "0xcff1595448f469499873536bab2987ad6c032a71ac7001eed97d1bbac244ed9e", map[string]string{"amount0": "-74867353540658680193373",
			"amount1": "70000000000000000", "sqrt_price_x96": "76741821765927833552276453", "liquidity": "8575195998599500080290", "tick": "-138800"}},
		{154, "0xe808c4e337781bd24b4a83a80af05de99442f3aabdbefed9bf6e5a9cf02c720d", map[string]string{"amount0": "-8268518499613403114964181",
			"amount1": "173882681785570169", "sqrt_price_x96": "11440298242931040616231830", "liquidity": "795048825874621333350545", "tick": "-176868"}},
	} {
		for k, v := range c.cols {
			if got := want["univ3_swap"][c.index][k]; got != v {
				t.Errorf("V3 Swap %d (tx %s) %s read by hand as %s, Python says %s", c.index, c.tx, k, got, v)
			}
		}
	}

	for _, l := range rows.Table(evm.TableLogs) {
		d.decodeLog(l, rows)
	}
	counts := map[string]int{"erc20_transfer": 141, "erc20_approval": 26, "erc20_undecoded": 3, "univ2_swap": 27, "univ2_sync": 27, "univ3_swap": 2}
	byIndex := map[int32]rpcLog{}
	for _, l := range logs {
		i, _ := strconv.ParseInt(strings.TrimPrefix(l.LogIndex, "0x"), 16, 32)
		byIndex[int32(i)] = l
	}
	for i, tb := range tables[d.nBase:] {
		got := rows.Table(d.nBase + i)
		if len(got) != counts[tb.Name] || len(want[tb.Name]) != counts[tb.Name] {
			t.Errorf("%s: %d rows, %d read by hand, want %d", tb.Name, len(got), len(want[tb.Name]), counts[tb.Name])
		}
		for _, row := range got {
			index := row[colLogIndex].(int32)
			exp, ok := want[tb.Name][index]
			if !ok {
				t.Errorf("%s: a row for log %d, which is not this event", tb.Name, index)
				continue
			}
			l := byIndex[index]
			if row[colBlockNumber] != int64(18000000) || text(row[colTxHash]) != l.TransactionHash || text(row[colAddress]) != l.Address {
				t.Errorf("%s log %d: fixed columns %v", tb.Name, index, row[:numFixedCols])
			}
			seen := 0
			for c, col := range tb.Columns {
				if v, ok := exp[col.Name]; ok {
					seen++
					if got := text(row[c]); got != v {
						t.Errorf("%s log %d (tx %s): %s = %s, read by hand %s", tb.Name, index, l.TransactionHash, col.Name, got, v)
					}
				}
			}
			if seen != len(exp) {
				t.Errorf("%s: %d of the columns %v found", tb.Name, seen, exp)
			}
		}
	}
}
