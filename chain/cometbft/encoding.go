package cometbft

import (
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/blockhaul/blockhaul/chain/jsonscan"
	"github.com/blockhaul/blockhaul/internal/fault"
)

// EventEncoding is how a block's event attribute keys and values are
// written in block_results.
type EventEncoding uint8

const (
	// EventEncodingAuto decides per block from the attributes themselves
	// (see Decoder for the rule).
	EventEncodingAuto EventEncoding = iota
	// EventEncodingBase64 decodes every key and value as standard base64;
	// one that is not base64 is an error naming the height.
	EventEncodingBase64
	// EventEncodingText stores keys and values as they are written.
	EventEncodingText
)

// ParseEventEncoding reads "auto" (or ""), "base64" or "text".
func ParseEventEncoding(s string) (EventEncoding, error) {
	switch s {
	case "auto", "":
		return EventEncodingAuto, nil
	case "base64":
		return EventEncodingBase64, nil
	case "text":
		return EventEncodingText, nil
	}
	return EventEncodingAuto, fmt.Errorf("unknown event encoding %q (want auto, base64 or text)", s)
}

func (e EventEncoding) String() string {
	switch e {
	case EventEncodingBase64:
		return "base64"
	case EventEncodingText:
		return "text"
	}
	return "auto"
}

// Set implements pflag.Value (--event-encoding).
func (e *EventEncoding) Set(s string) error {
	v, err := ParseEventEncoding(s)
	if err != nil {
		return err
	}
	*e = v
	return nil
}

// Type implements pflag.Value.
func (*EventEncoding) Type() string { return "encoding" }

// ErrEncodingUndecided is wrapped by the error of a block whose attributes
// read neither as plain text nor as base64 with confidence: decoding it
// either way could store wrong text, so the block is refused and the
// operator chooses with --event-encoding.
var ErrEncodingUndecided = errors.New("event attribute encoding undecided")

// strictBase64 refuses non-canonical padding bits, which a real encoder
// never writes and which plain words often have.
var strictBase64 = base64.StdEncoding.Strict()

// keyClass is what one non-empty attribute key can be.
type keyClass uint8

const (
	keyPlain  keyClass = iota // not canonical padded base64: only plain text can be it
	keyName                   // base64 of an identifier-like key: "c2VuZGVy" is "sender"
	keyText                   // base64 of other printable text
	keyBinary                 // base64 of bytes that are not printable text
)

// isBase64Shaped reports whether b has the form of padded standard base64:
// a non-empty multiple of four characters of its alphabet, with at most two
// '=' at the end. (encoding/base64 itself skips '\r' and '\n'.)
func isBase64Shaped(b []byte) bool {
	if len(b) == 0 || len(b)%4 != 0 {
		return false
	}
	end := len(b)
	for end > len(b)-2 && b[end-1] == '=' {
		end--
	}
	for _, c := range b[:end] {
		if !isBase64Char[c] {
			return false
		}
	}
	return true
}

var isBase64Char = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") {
		t[c] = true
	}
	return t
}()

// isIdentifier reports whether b looks like an event attribute key as
// chains name them: 1 to 128 bytes of ASCII letters, digits and _ . - / : @,
// with at least one letter ("spender", "acc_seq", "_contract_address",
// "packet_src_channel").
func isIdentifier(b []byte) bool {
	if len(b) == 0 || len(b) > 128 {
		return false
	}
	letter := false
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			letter = true
		case c >= '0' && c <= '9', c == '_', c == '.', c == '-', c == '/', c == ':', c == '@':
		default:
			return false
		}
	}
	return letter
}

func (st *decodeState) classifyKey(k []byte) keyClass {
	if !isBase64Shaped(k) {
		return keyPlain
	}
	var err error
	st.scratch2, err = strictBase64.AppendDecode(st.scratch2[:0], k)
	switch {
	case err != nil:
		return keyPlain
	case isIdentifier(st.scratch2):
		return keyName
	case isPrintableText(st.scratch2):
		return keyText
	}
	return keyBinary
}

// attrsAreBase64 decides how the block's attributes are written (see
// Decoder). A block the rule cannot decide is an error wrapping
// ErrEncodingUndecided; with EventEncodingBase64, a key or value that is
// not base64 is a configuration error (the flag does not fit the data).
func (st *decodeState) attrsAreBase64(mode EventEncoding) (bool, error) {
	switch mode {
	case EventEncodingText:
		return false, nil
	case EventEncodingBase64:
		for _, a := range st.attrs {
			for _, r := range [2]jsonscan.Span{a.key, a.value} {
				var err error
				if st.scratch2, err = base64.StdEncoding.AppendDecode(st.scratch2[:0], st.bytesOf(r)); err != nil {
					// The record is what the node sent; the flag is wrong
					// for it (exit 2), not the record (exit 4).
					return false, fault.Errorf(fault.Config, "--event-encoding base64 does not fit this block's attributes: %q is not base64 (%v): use --event-encoding auto (the default, decided per block) or text", clip(st.bytesOf(r)), err)
				}
			}
		}
		return true, nil
	}
	var n [4]int
	var name, binary string // an example of each, for the error
	for _, a := range st.attrs {
		k := st.bytesOf(a.key)
		if len(k) == 0 {
			continue
		}
		c := st.classifyKey(k)
		if c == keyPlain {
			// A base64 block has no such key: this one is plain text.
			return false, nil
		}
		n[c]++
		switch {
		case c == keyName && name == "":
			name = clip(k)
		case c == keyBinary && binary == "":
			binary = clip(k)
		}
	}
	if n[keyName]+n[keyText] == 0 {
		// No key, or every key decodes to bytes no chain names a key with
		// ("receiver", "proposer", "mode" are such words).
		return false, nil
	}
	undecided := func(why string, args ...any) error {
		return fmt.Errorf("%w: %s (choose with --event-encoding base64 or text)", ErrEncodingUndecided, fmt.Sprintf(why, args...))
	}
	switch {
	case n[keyName] == 0:
		return false, undecided("every attribute key is base64, of text that is not a key name")
	case n[keyBinary] > 0:
		return false, undecided("attribute key %q is base64 of a key name but %q is base64 of binary bytes", name, binary)
	}
	for _, a := range st.attrs {
		if v := st.bytesOf(a.value); len(v) > 0 {
			if !isBase64Shaped(v) {
				return false, undecided("every attribute key is base64 (%q) but value %q is not", name, clip(v))
			}
			var err error
			if st.scratch2, err = strictBase64.AppendDecode(st.scratch2[:0], v); err != nil {
				return false, undecided("every attribute key is base64 (%q) but value %q is not", name, clip(v))
			}
		}
	}
	return true, nil
}

// clip shortens b for an error message.
func clip(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "…"
	}
	return string(b)
}
