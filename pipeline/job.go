package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/blockhaul/blockhaul/chain"
	"github.com/blockhaul/blockhaul/export"
	"github.com/blockhaul/blockhaul/family"
	"github.com/blockhaul/blockhaul/monitor"
	"github.com/jackc/pgx/v5"
)

// Job is one invocation resolved once from its Config (flags and
// environment) by Resolve: validated (every problem at once), its chain
// family looked up, its --pg parsed into a connection configuration, its
// decoding options (--abi, --proto, …) compiled. A Job is a value: nothing
// changes it once Resolve returns it. A step that learns more (the staging
// store's family, the range end from the chain's tip) makes a new Job
// (withFamily, withRange) and hands that on; the one it was given is left
// as it was. It is safe for concurrent reads.
type Job struct {
	// Config is the flags, defaults applied and validated. Read only.
	Config
	// Family is the chain family: --chain's, or the staging store's where
	// the store decides (withFamily).
	Family *family.Family
	// PGConn is --pg parsed once, with blockhaul's application_name where
	// the DSN names none (pgConnConfig); nil without --pg. Every connection of the job is made from it
	// (openSession, connectPG).
	PGConn *pgx.ConnConfig
	// AgainstConn is checksum's --against, parsed as PGConn is; nil
	// without it.
	AgainstConn *pgx.ConnConfig
	// Decoding is how the decoder is built: its options compiled once.
	Decoding Decoding
}

// Decoding is what shapes the rows a decoder makes from a record, beyond its
// family: the options as given (for a replay request to carry them) and
// what they compiled into, and the tables the job writes.
type Decoding struct {
	EventEncoding    family.EventEncoding // --event-encoding
	Proto            []string             // --proto
	ProtoDescriptors []string             // --proto-descriptors
	Bech32Prefix     string               // --bech32-prefix
	ABI              []string             // --abi values
	// ABIDigests are the --abi values' files as read when they were
	// compiled: "NAME=sha256:HEX[@ADDRESSES]", one per value, in order.
	// Two jobs whose digests agree decode logs alike whatever the paths.
	ABIDigests []string
	// Messages is what Proto and ProtoDescriptors compiled into (nil: the
	// built-in set); Events what ABI compiled into (nil: none).
	Messages *family.MessageTypes
	Events   *family.EventTables
	// Tables is what --tables or --replay selected, nil for every table.
	Tables []string
}

// options are the family.DecoderOptions of d.
func (d *Decoding) options() family.DecoderOptions {
	return family.DecoderOptions{EventEncoding: d.EventEncoding, Messages: d.Messages, Bech32Prefix: d.Bech32Prefix, Events: d.Events}
}

// decoder is fam's decoder with d's options, restricted to d.Tables.
func (d *Decoding) decoder(fam *family.Family) (export.Decoder, error) {
	if fam == nil {
		return nil, errors.New("no chain family")
	}
	dec := fam.NewDecoder(d.options())
	if d.Tables == nil {
		return dec, nil
	}
	return export.Select(dec, d.Tables)
}

// Resolve validates cfg and resolves it into a Job: the only place the
// family is looked up from --chain, --pg parsed and the decoding options
// compiled. Every invalid field is reported at once as a *ConfigError.
func Resolve(cfg Config) (*Job, error) {
	cfg.EnsureDefaults()
	fam, err := family.Lookup(cfg.Chain)
	j, fs := cfg.resolve(fam, err)
	if len(fs) > 0 {
		return nil, &ConfigError{Fields: fs}
	}
	return j, nil
}

// resolve is Resolve on a Config whose defaults are in, of family fam
// (ferr: why --chain names none): the Job, and every problem found.
func (c Config) resolve(fam *family.Family, ferr error) (*Job, []*FieldError) {
	j := &Job{Config: c}
	var fs []*FieldError
	bad := func(flag, format string, args ...any) {
		fs = append(fs, &FieldError{Flag: flag, Env: EnvName(flag), Msg: fmt.Sprintf(format, args...)})
	}
	if ferr != nil {
		bad("chain", "%v", ferr)
	}
	var err error
	j.Family = fam
	j.Decoding, fs = c.resolveDecoding(fam, fs)
	if c.PG != "" {
		if j.PGConn, err = pgConnConfig(c.PG); err != nil {
			bad("pg", "does not parse as a PostgreSQL DSN: %s", redactPGError(err, c.PG))
		}
	}
	if c.Command == CmdChecksum && c.Against != "" {
		if j.AgainstConn, err = pgConnConfig(c.Against); err != nil {
			bad("against", "does not parse as a PostgreSQL DSN: %s", redactPGError(err, c.Against))
		}
	}
	fs = append(fs, c.validate(fam)...)
	return j, fs
}

// resolveDecoding compiles the decoding options of c for fam, adding what
// is wrong with them to fs.
func (c *Config) resolveDecoding(fam *family.Family, fs []*FieldError) (Decoding, []*FieldError) {
	bad := func(flag, format string, args ...any) {
		fs = append(fs, &FieldError{Flag: flag, Env: EnvName(flag), Msg: fmt.Sprintf(format, args...)})
	}
	d := Decoding{EventEncoding: c.EventEncoding, Proto: c.Proto, ProtoDescriptors: c.ProtoDescriptors, Bech32Prefix: c.Bech32Prefix, ABI: c.ABI}
	if len(c.ABI) > 0 && fam != nil && !(c.Command == CmdVerify && !c.ChainSet) { // verify: the store's family decides (Verify)
		if fam.CompileABIs == nil {
			bad("abi", "the %s family has no EVM logs to decode: --abi is for --chain evm", fam.Name)
		} else if set, err := fam.CompileABIs(c.ABI); err != nil {
			bad("abi", "%v", err)
		} else {
			d.Events = set
			d.ABIDigests = abiDigests(c.ABI)
		}
	}
	if len(c.Proto) > 0 || len(c.ProtoDescriptors) > 0 {
		m, err := family.LoadMessageTypes(context.Background(), c.Proto, c.ProtoDescriptors)
		switch {
		case err == nil:
			d.Messages = m
		case len(c.Proto) > 0 && (errors.Is(err, family.ErrProtoCompile) || errors.Is(err, family.ErrProtoDir)):
			bad("proto", "%v", err)
		default:
			bad("proto-descriptors", "%v", err)
		}
	}
	if p := c.Bech32Prefix; p != "" && !validBech32Prefix(p) {
		bad("bech32-prefix", "want the lowercase human-readable part of the chain's addresses (cosmos, osmo, crc), got %q", p)
	}
	if fam != nil {
		tables, tfs := c.validateTables(fam.NewDecoder(d.options()).Tables())
		d.Tables = tables
		fs = append(fs, tfs...)
		if dec, err := d.decoder(fam); err == nil {
			if err := c.Indexes.Check(dec.Tables()); err != nil {
				bad("indexes", "%v", err)
			}
		}
	}
	return d, fs
}

// abiDigests names each --abi value by its NAME, the SHA-256 of the file
// it reads and its address filter: the same for the same ABI whatever path
// reaches it. The values compiled already, so each parses and reads.
func abiDigests(values []string) []string {
	out := make([]string, len(values))
	for i, v := range values {
		name, rest, _ := strings.Cut(v, "=")
		file, addrs := rest, ""
		if k := strings.LastIndexByte(rest, '@'); k >= 0 && strings.HasPrefix(strings.TrimSpace(rest[k+1:]), "0x") {
			file, addrs = rest[:k], "@"+strings.ToLower(strings.ReplaceAll(rest[k+1:], " ", ""))
		}
		sum := "unreadable"
		if b, err := os.ReadFile(strings.TrimSpace(file)); err == nil {
			h := sha256.Sum256(b)
			sum = "sha256:" + hex.EncodeToString(h[:])
		}
		out[i] = strings.ToLower(strings.TrimSpace(name)) + "=" + sum + addrs
	}
	return out
}

// decoder is the job's decoder: its family's, with its decoding options,
// restricted to the tables it writes.
func (j *Job) decoder() (export.Decoder, error) { return j.Decoding.decoder(j.Family) }

// withFamily is j for a staging store that holds chain family id: the
// family the store holds, and its schema where that was the default. A
// family other than j's decodes with none of j's family-specific options
// (the tables, ABIs and messages selected were resolved for j's family).
func (j *Job) withFamily(id chain.Family) (*Job, error) {
	f := family.Of(id)
	if f == nil {
		return nil, fmt.Errorf("the staging store holds chain family %s, which this blockhaul does not know", id)
	}
	if f == j.Family {
		return j, nil
	}
	n := *j
	n.Chain, n.Family = f.Name, f
	if n.SchemaDefaulted {
		n.Schema = f.Name
	}
	return &n, nil
}

// withRange is j over [from, to]: the range end a job learns from the
// chain's tip, staging, or where the head stream started.
func (j *Job) withRange(from, to uint64) *Job {
	n := *j
	n.From, n.To, n.ToSet = from, to, true
	return &n
}

// withFrom is j starting at from (follow's head, which starts where the
// target's checkpoint says).
func (j *Job) withFrom(from uint64) *Job {
	n := *j
	n.From = from
	return &n
}

// Wired is j with the process's own parts: the monitor its events go to
// and the soft heap limit of one export stream (Config.Monitor,
// Config.MemoryLimitPerStream), which the binary knows only once the
// family is. j is left as it was.
func (j *Job) Wired(m *monitor.Monitor, memoryLimitPerStream int64) *Job {
	n := *j
	n.Monitor, n.MemoryLimitPerStream = m, memoryLimitPerStream
	return &n
}
