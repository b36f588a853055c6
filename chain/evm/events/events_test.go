package events

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/chain/evm"
	"github.com/jackc/pgx/v5/pgtype"
)

func compile(t *testing.T, values ...string) *Set {
	t.Helper()
	set, err := Compile(values)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func tableNamesOf(ts []chain.Table) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"Transfer": "transfer", "OwnershipTransferred": "ownership_transferred", "sqrtPriceX96": "sqrt_price_x96",
		"tokenID": "token_id", "_value": "value", "ERC20Transfer": "erc20_transfer", "amount0": "amount0",
		"URI": "uri", "a__b": "a_b", "": "",
	} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseSpec(t *testing.T) {
	sp, err := ParseSpec("Tok=dir/erc20.json@0x1BFD67037B42Cf73acF2047067bd4F2C47D9BfD6,0x0000000000000000000000000000000000000001")
	if err != nil {
		t.Fatal(err)
	}
	if sp.Name != "tok" || sp.File != "dir/erc20.json" || len(sp.Addresses) != 2 || sp.Addresses[0][19] != 1 {
		t.Fatalf("got %+v", sp)
	}
	if sp, err := ParseSpec("x=a@b.json"); err != nil || sp.File != "a@b.json" || sp.Addresses != nil {
		t.Fatalf("a path with @: %+v %v", sp, err)
	}
	for _, bad := range []string{"erc20.json", "=f.json", "1x=f.json", "x-y=f.json", "blockhaul=f.json", "x=f.json@0x12", "x=@0x0000000000000000000000000000000000000001"} {
		if _, err := ParseSpec(bad); !errors.Is(err, ErrSpec) {
			t.Errorf("ParseSpec(%q) = %v, want ErrSpec", bad, err)
		}
	}
}

func TestCompileTables(t *testing.T) {
	set := compile(t, "erc20=testdata/erc20.json", "univ3=testdata/uniswap_v3_pool.json")
	got := tableNamesOf(set.Tables())
	want := []string{"erc20_approval", "erc20_transfer", "erc20_undecoded", "univ3_swap", "univ3_undecoded"}
	if !slices.Equal(got, want) {
		t.Fatalf("tables %v, want %v", got, want)
	}
	swap := set.Tables()[3]
	var cols []string
	for _, c := range swap.Columns {
		cols = append(cols, c.Name+" "+c.Type)
	}
	wantCols := []string{"block_number bigint", "block_time timestamptz", "transaction_hash bytea", "log_index integer", "address bytea",
		"sender bytea", "recipient bytea", "amount0 numeric", "amount1 numeric", "sqrt_price_x96 numeric", "liquidity numeric", "tick bigint"}
	if !slices.Equal(cols, wantCols) {
		t.Fatalf("swap columns\n%v\nwant\n%v", cols, wantCols)
	}
	if !strings.Contains(swap.Definition, "Swap(address indexed sender, address indexed recipient, int256 amount0") ||
		!strings.Contains(swap.Definition, "0xc42079f94a6350d7e6235f29174924f928cc2ac818eb64fed8004e115fbcca67") {
		t.Fatalf("definition %q", swap.Definition)
	}
}

func TestCompileShapesAndOverloads(t *testing.T) {
	set := compile(t, "s=testdata/shapes.json@0x0000000000000000000000000000000000000001")
	got := tableNamesOf(set.Tables())
	// Transfer is overloaded: both tables carry their topic0's first four
	// bytes (keccak of the signature: ddf252ad for the ERC-20 one).
	want := []string{"s_everything", "s_transfer_ddf252ad", "s_transfer_e19260af", "s_undecoded"}
	if !slices.Equal(got, want) {
		t.Fatalf("tables %v, want %v", got, want)
	}
	var cols []string
	for _, c := range set.Tables()[0].Columns[numFixedCols:] {
		cols = append(cols, c.Name+" "+c.Type)
	}
	wantCols := []string{"tag bytea", "ok boolean", "small bigint", "name text", "blob bytea", "id bytea", "list jsonb", "pair jsonb",
		"arg8 numeric", "address_9 bigint"}
	if !slices.Equal(cols, wantCols) {
		t.Fatalf("columns\n%v\nwant\n%v", cols, wantCols)
	}
}

func TestCompileRefusals(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	anon := write("anon.json", `[{"anonymous":true,"type":"event","name":"A","inputs":[{"name":"x","type":"uint256"}]}]`)
	for _, c := range []struct {
		values []string
		want   string
	}{
		{[]string{"x=" + filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"x=" + write("bad.json", `{"not": "an abi"`)}, "is not a JSON ABI"},
		{[]string{"x=" + write("none.json", `[]`)}, "no events"},
		{[]string{"x=" + anon}, "anonymous event A(uint256) has no topic0"},
		{[]string{"x=" + write("fixed.json", `[{"type":"event","name":"F","inputs":[{"name":"f","type":"fixed128x18"}]}]`)}, "is not a JSON ABI"},
		{[]string{"a_b=testdata/erc20.json", "a=" + write("bt.json", `[{"type":"event","name":"BTransfer","inputs":[]}]`)}, "table a_b_transfer would be made by both"},
		{[]string{"x=" + write("undec.json", `[{"type":"event","name":"Undecoded","inputs":[]}]`)}, "the ABI's table of logs that do not decode"},
		{[]string{strings.Repeat("n", 50) + "=testdata/erc20.json"}, "longer than"},
		// go-ethereum parses these; the ABI has no such types.
		{[]string{"x=" + write("u999.json", `[{"type":"event","name":"X","inputs":[{"name":"v","type":"uint999"}]}]`)}, "event X(uint999) argument v: type uint999 is not an ABI type"},
		{[]string{"x=" + write("i12.json", `[{"type":"event","name":"Y","inputs":[{"name":"v","type":"int12","indexed":true}]}]`)}, "event Y(int12) argument v: type int12 is not an ABI type"},
		{[]string{"x=" + write("u999s.json", `[{"type":"event","name":"Z","inputs":[{"name":"v","type":"uint999[]"}]}]`)}, "type uint999 is not an ABI type"},
	} {
		_, err := Compile(c.values)
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Compile(%v) = %v, want ErrSpec saying %q", c.values, err, c.want)
		}
	}
	if _, err := Compile([]string{"x=" + anon + "@0x0000000000000000000000000000000000000001"}); err != nil {
		t.Errorf("an anonymous event with an address filter: %v", err)
	}
}

// logRow builds a logs row as evm's decoder appends it.
func logRow(rows *chain.Rows, height uint64, index int32, txHash, address string, topics []string, data string) {
	row := rows.Row(evm.TableLogs)
	row[evm.LogColBlockNumber] = int64(height)
	row[evm.LogColBlockTime] = time.Unix(1700000000, 0).UTC()
	row[evm.LogColIndex] = index
	row[evm.LogColTxHash] = unhex(txHash)
	row[evm.LogColAddress] = unhex(address)
	for i, tp := range topics {
		row[evm.LogColTopic0+i] = unhex(tp)
	}
	row[evm.LogColData] = unhex(data)
}

func unhex(s string) []byte {
	b, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	if err != nil {
		panic(err)
	}
	return b
}

// text is a column value as the tests compare it: bytes in 0x hex,
// numbers in decimal.
func text(v any) string {
	switch x := v.(type) {
	case []byte:
		return "0x" + hex.EncodeToString(x)
	case pgtype.Numeric:
		return x.Int.String()
	case *big.Int:
		return x.String()
	}
	return fmt.Sprint(v)
}

type recordedLog struct {
	Note        string
	ABI         string
	Table       string
	BlockNumber uint64 `json:"block_number"`
	LogIndex    int32  `json:"log_index"`
	TxHash      string `json:"tx_hash"`
	Address     string
	Topics      []string
	Data        string
	Expect      map[string]string
}

// TestMainnetLogs decodes real mainnet logs (an Avalanche USDC Transfer,
// a Polygon WBTC Transfer and Approval) and a Uniswap V3 Swap in a
// mainnet pool's shape, against values computed independently of
// accounts/abi (testdata/mainnet_logs.json: decimal by hand, encoded by
// Python).
func TestMainnetLogs(t *testing.T) {
	raw, err := os.ReadFile("testdata/mainnet_logs.json")
	if err != nil {
		t.Fatal(err)
	}
	var logs []recordedLog
	if err := json.Unmarshal(raw, &logs); err != nil {
		t.Fatal(err)
	}
	set := compile(t, "erc20=testdata/erc20.json", "univ3=testdata/uniswap_v3_pool.json@0x4e68ccd3e89f51c3074ca5072bbac773960dfa36")
	d := NewDecoder(evm.NewDecoder(), set)
	tables := d.Tables()
	for _, l := range logs {
		t.Run(l.Table+"/"+fmt.Sprint(l.LogIndex), func(t *testing.T) {
			rows := chain.NewRows(tables)
			logRow(rows, l.BlockNumber, l.LogIndex, l.TxHash, l.Address, l.Topics, l.Data)
			d.decodeLog(rows.Table(evm.TableLogs)[0], rows)
			var found []any
			for i, tb := range tables[d.nBase:] {
				n := rows.Len(d.nBase + i)
				if tb.Name == l.Table && n == 1 {
					found = rows.Table(d.nBase + i)[0]
				} else if n != 0 {
					t.Errorf("%s has %d rows", tb.Name, n)
				}
			}
			if found == nil {
				t.Fatalf("%s: no row in %s", l.Note, l.Table)
			}
			var tb chain.Table
			for _, x := range tables {
				if x.Name == l.Table {
					tb = x
				}
			}
			if text(found[colAddress]) != l.Address || found[colBlockNumber] != int64(l.BlockNumber) || found[colLogIndex] != l.LogIndex {
				t.Errorf("fixed columns %v", found[:numFixedCols])
			}
			for i, c := range tb.Columns {
				if want, ok := l.Expect[c.Name]; ok {
					if got := text(found[i]); got != want {
						t.Errorf("%s = %s, want %s", c.Name, got, want)
					}
					delete(l.Expect, c.Name)
				}
			}
			if len(l.Expect) > 0 {
				t.Errorf("columns not found: %v", l.Expect)
			}
		})
	}
	// A log of the Swap's topic0 from another pool is not the ABI's:
	// univ3 reads 0x4e68…3a36 alone.
	rows := chain.NewRows(tables)
	sw := logs[3]
	logRow(rows, 9, 0, sw.TxHash, "0x88e6a0c2ddd26feeb64f039a2c41296fcb3f5640", sw.Topics, sw.Data)
	d.decodeLog(rows.Table(evm.TableLogs)[0], rows)
	if n := rows.Total(); n != 1 {
		t.Fatalf("a log of another address made %d rows", n-1)
	}
}

func TestValuesToJSON(t *testing.T) {
	set := compile(t, "s=testdata/shapes.json@0x0000000000000000000000000000000000000001")
	var ev *event
	for _, e := range set.abis[0].events {
		if e.ev.RawName == "Everything" {
			ev = e
		}
	}
	who := [20]byte{19: 7}
	data, err := ev.nonIndexed.Pack("héllo", []byte{1, 2}, [4]byte{0xde, 0xad, 0xbe, 0xef},
		[]*big.Int{big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), 200)},
		struct {
			Who    [20]byte
			Amount *big.Int
		}{who, big.NewInt(-5)}, uint64(1<<63+1), uint32(9))
	if err != nil {
		t.Fatal(err)
	}
	topics := []string{"0x" + hex.EncodeToString(ev.id[:]), "0x" + strings.Repeat("ab", 32),
		"0x" + strings.Repeat("00", 31) + "01", "0x" + strings.Repeat("ff", 32)}
	d := NewDecoder(evm.NewDecoder(), set)
	rows := chain.NewRows(d.Tables())
	logRow(rows, 5, 3, "0x"+strings.Repeat("11", 32), "0x0000000000000000000000000000000000000001", topics, "0x"+hex.EncodeToString(data))
	d.decodeLog(rows.Table(evm.TableLogs)[0], rows)
	pos := d.nBase + ev.pos
	if rows.Len(pos) != 1 {
		t.Fatalf("%d rows in %s (undecoded: %v)", rows.Len(pos), ev.table.Name, rows.Table(d.nBase+set.abis[0].undecodedPos))
	}
	row := rows.Table(pos)[0][numFixedCols:]
	want := []string{"0x" + strings.Repeat("ab", 32), "true", "-1", "héllo", "0x0102", "0xdeadbeef",
		`[1,1606938044258990275541962092341162602522202993782792835301376]`,
		`{"who":"0x0000000000000000000000000000000000000007","amount":-5}`,
		"9223372036854775809", "9"}
	for i, w := range want {
		got := text(row[i])
		if b, ok := row[i].([]byte); ok && ev.cols[i].kind == kindJSON {
			got = string(b)
		}
		if got != w {
			t.Errorf("%s = %s, want %s", ev.table.Columns[numFixedCols+i].Name, got, w)
		}
	}
}

// TestGethChain decodes the real geth --dev chain of chain/evm/testdata
// whole: its contract's LOG3 logs carry the ERC-20 Transfer topic (from,
// to, and its calldata as data: 33 bytes, or 1 where the call sent one
// byte), its LOG0 logs no topic at all (read by an anonymous event).
func TestGethChain(t *testing.T) {
	const contract = "0x3a220f351252089d385b29beca14e27f204c296a"
	set := compile(t, "g=testdata/geth_ping.json@"+contract)
	d := NewDecoder(evm.NewDecoder(), set)
	tables := d.Tables()
	idx := map[string]int{}
	for i, tb := range tables {
		idx[tb.Name] = i
	}
	counts := map[string]int{}
	var transfers, undecoded, raws [][]any
	for h := uint64(0); h <= 30; h++ {
		rec := evm.MarshalRecord(rpcResult(t, fmt.Sprintf("block_%d.json", h)), rpcResult(t, fmt.Sprintf("receipts_%d.json", h)))
		rows := chain.NewRows(tables)
		if err := d.Decode(h, rec, rows); err != nil {
			t.Fatalf("block %d: %v", h, err)
		}
		for name, i := range idx {
			counts[name] += rows.Len(i)
		}
		transfers = append(transfers, rows.Table(idx["g_transfer"])...)
		undecoded = append(undecoded, rows.Table(idx["g_undecoded"])...)
		raws = append(raws, rows.Table(idx["g_raw"])...)
	}
	// logs_0_30.json: Transfer-topic logs at 6, 7, 12, 13 (two), 19, 21;
	// the one at 13 log 3 has one byte of data.
	if len(transfers) != 6 || len(undecoded) != 1 {
		t.Fatalf("%d transfers, %d undecoded (want 6 and 1); counts %v", len(transfers), len(undecoded), counts)
	}
	u := undecoded[0]
	if u[colBlockNumber] != int64(13) || u[colLogIndex] != int32(3) || u[colUndecodedTable] != "g_transfer" ||
		!strings.HasPrefix(u[colUndecodedReason].(string), "data (1 bytes) does not decode") {
		t.Fatalf("undecoded row %v", u)
	}
	// The first Transfer: height 6, log 3, from the dev account to the
	// contract, data 0x03 followed by the word 0x…03e8: the first word is
	// 0x03 << 248 | 0x03 (the 33rd byte is not read).
	first := transfers[0]
	wantValue := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(3), 248), big.NewInt(3))
	if first[colBlockNumber] != int64(6) || first[colLogIndex] != int32(3) ||
		text(first[numFixedCols]) != "0x71562b71999873db5b286df957af199ec94617f7" ||
		text(first[numFixedCols+1]) != contract || text(first[numFixedCols+2]) != wantValue.String() {
		t.Fatalf("first transfer %v", first)
	}
	if text(first[colTxHash]) != "0x061bbe6b0c82d0f1a71484edd219127da6612ac2d367adb92036399408d82f82" {
		t.Fatalf("tx hash %s", text(first[colTxHash]))
	}
	// LOG0 with 33 bytes of data decodes as Raw (heights 6, 7, 13 log 5,
	// 21); with one byte it is no log of Raw's and is not counted.
	// Height 6's call sent 0x00 and the word 0x…03e8: Raw's word is 3.
	if len(raws) != 4 || text(raws[0][numFixedCols]) != "3" {
		t.Fatalf("%d raw rows: %v", len(raws), raws)
	}
}

func rpcResult(t *testing.T, name string) json.RawMessage {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "geth-dev", name))
	if err != nil {
		t.Fatal(err)
	}
	var resp struct{ Result json.RawMessage }
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	return resp.Result
}

// FuzzDecodeLog: any topics and data claimed by an event of the shapes ABI
// (strings, bytes, arrays, tuples, overloads) give a row of the event's
// table or of the undecoded table, exactly one, and never a panic.
func FuzzDecodeLog(f *testing.F) {
	set, err := Compile([]string{"s=testdata/shapes.json@0x0000000000000000000000000000000000000001", "u=testdata/uniswap_v3_pool.json"})
	if err != nil {
		f.Fatal(err)
	}
	d := NewDecoder(evm.NewDecoder(), set)
	var ids [][]byte
	for _, a := range set.abis {
		for _, e := range a.events {
			ids = append(ids, e.id[:])
		}
	}
	f.Add(uint8(0), uint8(2), []byte{1}, []byte{})
	f.Add(uint8(3), uint8(3), []byte{}, make([]byte, 5*32))
	f.Fuzz(func(t *testing.T, which, nTopics uint8, seed, data []byte) {
		topics := []string{"0x" + hex.EncodeToString(ids[int(which)%len(ids)])}
		for i := 1; i < int(nTopics%5); i++ {
			w := make([]byte, 32)
			copy(w, seed)
			w[31] ^= byte(i)
			topics = append(topics, "0x"+hex.EncodeToString(w))
		}
		rows := chain.NewRows(d.Tables())
		logRow(rows, 1, 0, "0x"+strings.Repeat("11", 32), "0x0000000000000000000000000000000000000001", topics, "0x"+hex.EncodeToString(data))
		d.decodeLog(rows.Table(evm.TableLogs)[0], rows)
		if n := rows.Total() - 1; n != 1 {
			t.Fatalf("%d rows for one claimed log", n)
		}
	})
}
