// Package events decodes EVM logs into one typed table per event, from
// contract ABIs a user gives (--abi NAME=FILE[@ADDRESS,...]). It wraps the
// family's decoder: the logs rows that decoder appends for a block are read
// again here, matched to the ABIs' events by topic0 (and address, when the
// ABI is filtered), and decoded with go-ethereum's accounts/abi into rows
// of the event's table. A log that an event claims but that does not
// decode as it (another topic count, data too short, a value out of its
// column's range) is a row of the ABI's NAME_undecoded table, with the
// reason: counted, never dropped. See docs/evm-events.md.
package events

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
)

// ErrSpec is wrapped by the errors of an --abi value that cannot be used:
// its form, its file, its ABI, or the tables it would make.
var ErrSpec = errors.New("events: bad --abi")

// Spec is one --abi value: NAME=FILE[@ADDRESS[,ADDRESS]].
type Spec struct {
	// Name prefixes the tables (NAME_eventname); lower case.
	Name string
	// File is the JSON ABI's path.
	File string
	// Addresses, when any, are the only contracts whose logs are decoded.
	Addresses [][20]byte
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// ParseSpec reads an --abi value (it does not read the file).
func ParseSpec(s string) (Spec, error) {
	name, rest, ok := strings.Cut(s, "=")
	name = strings.ToLower(strings.TrimSpace(name))
	if !ok || name == "" || strings.TrimSpace(rest) == "" {
		return Spec{}, fmt.Errorf("%w: %q: want NAME=FILE[@ADDRESS[,ADDRESS]]", ErrSpec, s)
	}
	if !nameRE.MatchString(name) {
		return Spec{}, fmt.Errorf("%w: %q: the name %q must start with a letter and hold only letters, digits and _", ErrSpec, s, name)
	}
	if name == "blockhaul" || strings.HasPrefix(name, "blockhaul_") {
		return Spec{}, fmt.Errorf("%w: %q: names starting with blockhaul are blockhaul's own tables", ErrSpec, s)
	}
	sp := Spec{Name: name, File: rest}
	// An address list follows the last @ (a path may hold one).
	if i := strings.LastIndexByte(rest, '@'); i >= 0 && strings.HasPrefix(strings.TrimSpace(rest[i+1:]), "0x") {
		sp.File = rest[:i]
		for _, a := range strings.Split(rest[i+1:], ",") {
			a = strings.TrimSpace(a)
			b, err := hex.DecodeString(strings.TrimPrefix(strings.TrimPrefix(a, "0x"), "0X"))
			if err != nil || len(b) != 20 {
				return Spec{}, fmt.Errorf("%w: %q: address %q is not 20 bytes of hex (0x followed by 40 hex digits)", ErrSpec, s, a)
			}
			var addr [20]byte
			copy(addr[:], b)
			if !slices.Contains(sp.Addresses, addr) {
				sp.Addresses = append(sp.Addresses, addr)
			}
		}
		slices.SortFunc(sp.Addresses, func(a, b [20]byte) int { return bytes.Compare(a[:], b[:]) })
	}
	sp.File = strings.TrimSpace(sp.File)
	if sp.File == "" {
		return Spec{}, fmt.Errorf("%w: %q: no file", ErrSpec, s)
	}
	return sp, nil
}

// Compile reads the ABI file of each --abi value and makes the tables of
// their events. Every problem of one value is an error naming it; names
// that two values' tables would share are refused.
func Compile(values []string) (*Set, error) {
	set := &Set{byTopic: map[[32]byte][]*event{}, anonymous: map[[20]byte][]*event{}}
	seen := map[string]string{} // table → the --abi value that makes it
	for _, v := range values {
		sp, err := ParseSpec(v)
		if err != nil {
			return nil, err
		}
		f, err := os.Open(sp.File)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrSpec, sp.Name, err)
		}
		parsed, err := abi.JSON(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %s is not a JSON ABI: %w", ErrSpec, sp.Name, sp.File, err)
		}
		a, err := newABI(sp, parsed)
		if err != nil {
			return nil, fmt.Errorf("%w: %s (%s): %w", ErrSpec, sp.Name, sp.File, err)
		}
		for _, t := range a.tables() {
			if other, dup := seen[t.Name]; dup {
				return nil, fmt.Errorf("%w: table %s would be made by both %q and %q: give one another NAME", ErrSpec, t.Name, other, v)
			}
			seen[t.Name] = v
		}
		set.add(a)
	}
	return set, nil
}
