package jsonscan

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// quoteIndex (Raw's search) and stringEnd (String's) find the first quote
// as bytes.IndexByte does, wherever it stands and whatever surrounds it
// (bytes one off a quote, bytes with the high bit set, a quote just past
// the SWAR part); stringEnd says a string with no closing quote is cut
// short. (evm's quoteIndex test, moved here.)
func TestQuoteIndexMatchesIndexByte(t *testing.T) {
	fillers := []byte{'0', 'a', 0x21, 0x23, 0xa2, 0x80, 0xff, 0x00, 0x01}
	for _, fill := range fillers {
		for n := range 48 {
			for q := -1; q < n; q++ {
				b := bytes.Repeat([]byte{fill}, n)
				if q >= 0 {
					b[q] = '"'
					if q+1 < n {
						b[q+1] = '"' // a second quote after the first
					}
				}
				for from := 0; from <= n; from++ {
					want := bytes.IndexByte(b[from:], '"')
					if want >= 0 {
						want += from
					}
					if got := quoteIndex(b, from); got != want {
						t.Fatalf("fill %#x, len %d, quote at %d, from %d: %d, want %d", fill, n, q, from, got, want)
					}
					got, esc, err := stringEnd(b, from)
					if want < 0 && !errors.Is(err, ErrEnd) || want >= 0 && (got != want || esc || err != nil) {
						t.Fatalf("fill %#x, len %d, quote at %d, from %d: stringEnd %d, %v, %v; want %d", fill, n, q, from, got, esc, err, want)
					}
				}
			}
		}
	}
}

// Raw and String end a string at the same quote, whatever backslashes
// stand before it, and only String unescapes.
func TestRawEndsWhereStringEnds(t *testing.T) {
	for _, body := range []string{``, `a`, `\\`, `\"`, `a\\\"b`, `\\\\`, strings.Repeat("x", 40) + `\"` + strings.Repeat("y", 20), strings.Repeat(`\\`, 30)} {
		doc := []byte(`"` + body + `",1`)
		var r, s Scanner
		r.Reset(doc)
		s.Reset(doc)
		raw := r.Raw()
		span := s.Str()
		if r.Err() != nil || s.Err() != nil || string(raw) != body || r.Pos() != s.Pos() || span.End != 1+len(body) {
			t.Errorf("%s: Raw %q at %d (%v), String ends at %d, pos %d (%v)", body, raw, r.Pos(), r.Err(), span.End, s.Pos(), s.Err())
		}
	}
	for _, doc := range []string{`"abc`, `"abc\"`, `x`, ``} {
		var r Scanner
		r.Reset([]byte(doc))
		if v := r.Raw(); r.Err() == nil {
			t.Errorf("Raw(%s) = %q, no error", doc, v)
		}
	}
}

func TestUnescape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`plain`, "plain"},
		{`a\"b\\c\/d\b\f\n\r\t`, "a\"b\\c/d\b\f\n\r\t"},
		{`\u00e9\u2014`, "é—"},
		{`\ud83d\ude80`, "🚀"},
		{`\ud83d`, "\uFFFD"},
		{`\ud83dx`, "\uFFFDx"},
		{`\ude80\ud83d`, "\uFFFD\uFFFD"},
		{`\u0000`, "\x00"},
	} {
		var s Scanner
		s.Reset([]byte(`"` + c.in + `"`))
		r := s.Str()
		if s.Err() != nil {
			t.Fatalf("%s: %v", c.in, s.Err())
		}
		var scratch []byte
		if got := string(s.Text(r, &scratch)); got != c.want {
			t.Errorf("unescape %s = %q, want %q", c.in, got, c.want)
		}
	}
}

// A raw control character in a key is refused when the key is read, as it
// is when the object is skipped: a document read key by key and the same
// document skipped whole are both refused (evm's FuzzBlockIdentity found a
// record that VerifyBlock read and BlockIdentity, skipping it, refused).
func TestKeyWithControlCharacter(t *testing.T) {
	for _, doc := range []string{"{\"a\x16b\":1}", "{\"ok\":1,\"\x00\":2}", "{\"\\u0041\x1f\":1}"} {
		var r Scanner
		r.Reset([]byte(doc))
		r.OpenObject()
		n := 0
		for {
			if _, ok := r.NextKey(&n); !ok {
				break
			}
			r.Skip()
		}
		if r.Err() == nil {
			t.Errorf("NextKey over %q: no error", doc)
		}
		r.Reset([]byte(doc))
		if r.Skip(); r.Err() == nil {
			t.Errorf("Skip of %q: no error", doc)
		}
	}
	var r Scanner
	r.Reset([]byte("{\"key\":\"value with \x16 inside\"}"))
	r.OpenObject()
	n := 0
	if k, ok := r.NextKey(&n); !ok || string(k) != "key" {
		t.Fatalf("a clean key: %q, %v (%v)", k, ok, r.Err())
	}
}
