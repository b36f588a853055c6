package pipeline

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/blockhaul/blockhaul/chain/evm/events"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/family"
	"github.com/jackc/pgx/v5"
)

// recordedABI is an --abi as a schema records it: the ABI itself, not its
// file's path, which means nothing on another machine.
type recordedABI struct {
	ABI       json.RawMessage `json:"abi"`
	Addresses []string        `json:"addresses,omitempty"`
}

// decoderRecord is cfg's decoder options that shape rows, as a schema
// records them (export.RecordDecoders): each --abi, CometBFT's
// --event-encoding, --bech32-prefix. Proto descriptors are not recorded.
func decoderRecord(cfg *Job) ([]export.DecoderOption, error) {
	var opts []export.DecoderOption
	for _, v := range cfg.ABI {
		sp, err := events.ParseSpec(v)
		if err != nil {
			return nil, err
		}
		raw, err := os.ReadFile(sp.File)
		if err != nil {
			return nil, fmt.Errorf("record --abi %s: %w", sp.Name, err)
		}
		r := recordedABI{ABI: raw}
		for _, a := range sp.Addresses {
			r.Addresses = append(r.Addresses, "0x"+hex.EncodeToString(a[:]))
		}
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("record --abi %s: %w", sp.Name, err)
		}
		opts = append(opts, export.DecoderOption{Option: "abi " + sp.Name, Value: b})
	}
	str := func(option, v string) {
		b, _ := json.Marshal(v)
		opts = append(opts, export.DecoderOption{Option: option, Value: b})
	}
	if f := cfg.Family; f != nil && f.FlagValues["event-encoding"] != nil {
		str("event-encoding", cfg.EventEncoding.String())
	}
	if cfg.Bech32Prefix != "" {
		str("bech32-prefix", cfg.Bech32Prefix)
	}
	return opts, nil
}

// recordDecoders records cfg's decoder options in its schema, once the job
// has passed its checks and is about to write rows made with them.
func recordDecoders(ctx context.Context, cfg *Job, db *export.Session) error {
	opts, err := decoderRecord(cfg)
	if err != nil || len(opts) == 0 {
		return err
	}
	return db.Do(ctx, "record the decoder options in "+cfg.Schema, func(ctx context.Context, conn *pgx.Conn) error {
		return export.RecordDecoders(ctx, conn, cfg.Schema, opts)
	})
}

// useRecordedDecoders takes the decoder options cfg's schema records for
// those cfg was not given (no --abi: the recorded ABIs; --event-encoding
// auto; no --bech32-prefix), so that a check decodes staging as the rows
// were written: it returns the Job with them (cfg is left as it was) and
// what it took, for the report.
func useRecordedDecoders(ctx context.Context, job *Job, conn *pgx.Conn) (*Job, []string, error) {
	opts, err := export.ReadDecoders(ctx, conn, job.Schema)
	if err != nil || len(opts) == 0 {
		return job, nil, err
	}
	n := *job
	cfg := &n
	var took, abis []string
	dir := ""
	defer func() {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}()
	for _, o := range opts {
		name, isABI := strings.CutPrefix(o.Option, "abi ")
		switch {
		case isABI && len(cfg.ABI) == 0:
			var r recordedABI
			if err := json.Unmarshal(o.Value, &r); err != nil {
				return nil, nil, fmt.Errorf("schema %s records --abi %s unreadably: %w", cfg.Schema, name, err)
			}
			if dir == "" {
				if dir, err = os.MkdirTemp("", "blockhaul-abi-"); err != nil {
					return nil, nil, err
				}
			}
			path := filepath.Join(dir, name+".json")
			if err := os.WriteFile(path, r.ABI, 0o600); err != nil {
				return nil, nil, err
			}
			v := name + "=" + path
			if len(r.Addresses) > 0 {
				v += "@" + strings.Join(r.Addresses, ",")
			}
			abis = append(abis, v)
			took = append(took, "--abi "+name)
		case o.Option == "event-encoding" && cfg.Decoding.EventEncoding == family.EventEncoding(0):
			var v string
			if json.Unmarshal(o.Value, &v) == nil && v != cfg.Decoding.EventEncoding.String() {
				if err := cfg.Decoding.EventEncoding.Set(v); err != nil {
					return nil, nil, fmt.Errorf("schema %s records --event-encoding %q: %w", cfg.Schema, v, err)
				}
				cfg.EventEncoding = cfg.Decoding.EventEncoding
				took = append(took, "--event-encoding "+v)
			}
		case o.Option == "bech32-prefix" && cfg.Decoding.Bech32Prefix == "":
			var v string
			if json.Unmarshal(o.Value, &v) == nil && v != "" {
				cfg.Bech32Prefix, cfg.Decoding.Bech32Prefix = v, v
				took = append(took, "--bech32-prefix "+v)
			}
		}
	}
	if len(abis) > 0 {
		if cfg, err = compileABIs(cfg, abis); err != nil {
			return nil, nil, fmt.Errorf("schema %s records: %w", cfg.Schema, err)
		}
	}
	return cfg, took, nil
}

// compileABIs compiles --abi values with cfg's family (for verify, the
// store's own): the Job decoding with them (cfg is left as it was).
func compileABIs(cfg *Job, values []string) (*Job, error) {
	f := cfg.Family
	if f == nil || f.CompileABIs == nil {
		name := "no"
		if f != nil {
			name = "the " + f.Name
		}
		return nil, &ConfigError{Fields: []*FieldError{{Flag: "abi", Env: EnvName("abi"), Msg: fmt.Sprintf("%s family has no EVM logs to decode: --abi is for evm", name)}}}
	}
	set, err := f.CompileABIs(values)
	if err != nil {
		return nil, &ConfigError{Fields: []*FieldError{{Flag: "abi", Env: EnvName("abi"), Msg: err.Error()}}}
	}
	n := *cfg
	n.ABI, n.Decoding.ABI, n.Decoding.Events, n.Decoding.ABIDigests = values, values, set, abiDigests(values)
	return &n, nil
}
