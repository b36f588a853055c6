package jsonrpc

import (
	"net/url"
	"strings"
)

// mask replaces anything Redact hides.
const mask = "***"

// Redact returns rawURL without what may be a credential: userinfo is
// dropped, query values are masked (keys kept), the fragment is dropped, and
// path segments that look like API keys (long runs of letters, digits, '-'
// and '_', as in Infura's /v3/<key> or Alchemy's /v2/<key>) are masked. A
// string that does not parse as a URL is masked but for its scheme, so that
// nothing after it can leak.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	// An '@' after the host means userinfo with an unescaped '/', '?' or
	// '#' in it, split at the wrong place: no part can be trusted.
	if err != nil || u.Opaque != "" || u.Host == "" || strings.ContainsRune(u.Path+u.RawQuery+u.Fragment, '@') {
		return redactUnparsed(rawURL)
	}
	var b strings.Builder
	b.Grow(len(rawURL))
	if u.Scheme != "" {
		b.WriteString(u.Scheme)
		b.WriteString("://")
	}
	b.WriteString(u.Host)
	segs := strings.Split(u.EscapedPath(), "/")
	for i, s := range segs {
		if looksLikeKey(unescapePath(s)) {
			segs[i] = mask
		}
	}
	b.WriteString(strings.Join(segs, "/"))
	if u.RawQuery != "" {
		b.WriteByte('?')
		for i, part := range strings.Split(u.RawQuery, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			key, _, hasValue := strings.Cut(part, "=")
			// A bare token or a key that itself looks like a key is as
			// sensitive as a value.
			if !hasValue || looksLikeKey(key) {
				b.WriteString(mask)
				continue
			}
			b.WriteString(key)
			b.WriteByte('=')
			b.WriteString(mask)
		}
	}
	return b.String()
}

// redactUnparsed keeps only the scheme of a string that is not a URL with a
// host: its userinfo, host and path boundaries cannot be trusted, so nothing
// of them is shown. A bare host[:port] is harmless and kept.
func redactUnparsed(s string) string {
	if scheme, _, ok := strings.Cut(s, "://"); ok {
		if isScheme(scheme) {
			return scheme + "://" + mask
		}
		return mask
	}
	if strings.ContainsAny(s, "@/?#") || looksLikeKey(s) {
		return mask
	}
	return s
}

func isScheme(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

func unescapePath(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// looksLikeKey reports whether s has the shape of an API key or token: at
// least 16 characters of a token alphabet, with a digit or mixed case (which
// words and chain names rarely have), or at least 32 characters of it; or a
// shorter one (from 6 characters) whose digits sit among its letters, as in
// a hand-made token like s3cr3tk3y, or that holds three digits or more and
// three letters or more — which chain ids and versions such as cosmoshub-4,
// v3 or eth rarely do. A false positive only hides a harmless path segment;
// a false negative leaks.
func looksLikeKey(s string) bool {
	if len(s) < 6 {
		return false
	}
	var digits, letters int
	var upper, lower, interleaved bool
	prev := byte(0) // 'a' after a letter, '0' after a digit
	sawLetterThenDigit := false
	for i := 0; i < len(s); i++ {
		r := s[i]
		switch {
		case r >= '0' && r <= '9':
			digits++
			if prev == 'a' {
				sawLetterThenDigit = true
			}
			prev = '0'
		case r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
			letters++
			if r <= 'Z' {
				upper = true
			} else {
				lower = true
			}
			if prev == '0' && sawLetterThenDigit {
				interleaved = true
			}
			prev = 'a'
		case r == '-' || r == '_' || r == '.' || r == '~' || r == '+' || r == '=',
			// A stray quote (a shell quoting mistake) does not make
			// s3cr3tk3y" less of a key.
			r == '"' || r == '\'' || r == '`':
			prev = 0
			sawLetterThenDigit = false
		default:
			return false
		}
	}
	if len(s) >= 16 {
		return digits > 0 || (upper && lower) || len(s) >= 32
	}
	return interleaved || (digits >= 3 && letters >= 3)
}

// secretsOf lists the substrings of rawURL that Redact hides and that are
// long enough to search for: the last line of defence scrubs them from any
// error text that a lower layer might have built from the raw URL.
func secretsOf(rawURL string) []string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	var out []string
	add := func(s string) {
		if len(s) >= 4 {
			out = append(out, s)
		}
	}
	if u.User != nil {
		add(u.User.Username())
		if p, ok := u.User.Password(); ok {
			add(p)
		}
	}
	for _, s := range strings.Split(u.EscapedPath(), "/") {
		if looksLikeKey(unescapePath(s)) {
			add(s)
			add(unescapePath(s))
		}
	}
	for _, part := range strings.Split(u.RawQuery, "&") {
		key, value, hasValue := strings.Cut(part, "=")
		if !hasValue || looksLikeKey(key) {
			add(part)
			continue
		}
		add(value)
		if v, err := url.QueryUnescape(value); err == nil {
			add(v)
		}
	}
	return out
}

// scrub replaces every secret in s by the mask.
func scrub(s string, secrets []string) string {
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, mask)
		}
	}
	return s
}
