package evm

import (
	"encoding/json"
	"testing"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/jackc/pgx/v5/pgtype"
)

// BenchmarkSyntheticRecord measures generation of mainnet-density records
// on one core.
func BenchmarkSyntheticRecord(b *testing.B) {
	s := NewSynthetic(SyntheticConfig{Seed: 1})
	var bytes int64
	h := uint64(1)
	for b.Loop() {
		bytes += int64(len(s.Record(h)))
		h++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "blocks/s")
	b.ReportMetric(float64(bytes)/float64(b.N)/1e3, "KB/block")
	b.SetBytes(bytes / int64(b.N))
}

// BenchmarkDecode measures the exporter's CPU cost per record.
func BenchmarkDecode(b *testing.B) {
	const n = 64
	recs, size := syntheticRecords(n)
	d := NewDecoder()
	rows := chain.NewRows(d.Tables())
	var nrows int
	i := 0
	b.SetBytes(size / n)
	reportCPU(b)
	for b.Loop() {
		if i%n == 0 {
			rows.Reuse() // as export reuses a committed batch's rows
		}
		before := rows.Total()
		if err := d.Decode(uint64(i%n+1), recs[i%n], rows); err != nil {
			b.Fatal(err)
		}
		nrows += rows.Total() - before
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(nrows), "ns/row")
}

// BenchmarkDecodeEncodingJSON is the baseline the scanner is measured
// against: encoding/json into minimal structs of the same fields.
func BenchmarkDecodeEncodingJSON(b *testing.B) {
	s := NewSynthetic(SyntheticConfig{Seed: 1})
	raw := s.Record(5)
	type log struct {
		Address, Data, LogIndex string
		Topics                  []string
	}
	type rec struct {
		Block struct {
			Number, Hash, ParentHash, Timestamp string
			Transactions                        []struct {
				Hash, From, To, Value, Input, Nonce, Gas, GasPrice, MaxFeePerGas, Type string
			}
		}
		Receipts []struct {
			TransactionHash, GasUsed, Status string
			Logs                             []log
		}
	}
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		var r rec
		if err := json.Unmarshal(raw, &r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeRows measures what pgx's binary COPY spends encoding one
// decoded block's values, the other half of the exporter's CPU cost.
func BenchmarkEncodeRows(b *testing.B) {
	s := NewSynthetic(SyntheticConfig{Seed: 1})
	d := NewDecoder()
	tables := d.Tables()
	rows := chain.NewRows(tables)
	if err := d.Decode(5, s.Record(5), rows); err != nil {
		b.Fatal(err)
	}
	m := pgtype.NewMap()
	oids := make([][]uint32, len(tables))
	for i, tb := range tables {
		for _, c := range tb.Columns {
			name := map[string]string{"bigint": "int8", "integer": "int4", "smallint": "int2", "bytea[]": "_bytea"}[c.Type]
			if name == "" {
				name = c.Type
			}
			typ, ok := m.TypeForName(name)
			if !ok {
				b.Fatalf("no type %s", name)
			}
			oids[i] = append(oids[i], typ.OID)
		}
	}
	buf := make([]byte, 0, 1<<20)
	var values int
	for b.Loop() {
		values = 0
		for i := range tables {
			for _, r := range rows.Table(i) {
				for c, v := range r {
					var err error
					if buf, err = m.Encode(oids[i][c], pgtype.BinaryFormatCode, v, buf[:0]); err != nil {
						b.Fatal(err)
					}
					values++
				}
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*values), "ns/value")
}

// BenchmarkVerifyBlock measures what the loader spends verifying one
// mainnet-density record before staging it: "header" recomputes the block
// hash alone (what verification was before contents were checked),
// "record" every transaction hash and the three roots as well. Compare
// with BenchmarkDecode, the exporter's cost for the same record.
func BenchmarkVerifyBlock(b *testing.B) {
	const n = 64
	recs, size := syntheticRecords(n)
	b.Run("header", func(b *testing.B) {
		b.SetBytes(size / n)
		i := 0
		reportCPU(b)
		for b.Loop() {
			raw := recs[i%n]
			if _, err := VerifyHeader(raw[len(`{"block":`):]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("record", func(b *testing.B) {
		b.SetBytes(size / n)
		i := 0
		reportCPU(b)
		for b.Loop() {
			if _, err := VerifyBlock(recs[i%n]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// syntheticRecords returns the records of blocks 1..n of the mainnet-density
// synthetic chain and their total size.
func syntheticRecords(n int) (recs [][]byte, size int64) {
	s := NewSynthetic(SyntheticConfig{Seed: 1})
	recs = make([][]byte, n)
	for i := range recs {
		recs[i] = s.Record(uint64(i + 1))
		size += int64(len(recs[i]))
	}
	return recs, size
}
