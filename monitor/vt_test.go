package monitor

import (
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// fakeTerminal is the part of a terminal a Console relies on: printable
// characters wrap at the width (deferred, as xterm does: a line of exactly
// the width does not wrap until the next character), \n starts the next
// row, \r returns to its start, and ESC[nA, ESC[J and ESC[K move up and
// clear. A resize reflows wrapped lines at the new width, as tmux, VTE and
// most terminals do. The scrollback has no bound.
type fakeTerminal struct {
	mu      sync.Mutex
	width   int
	rows    [][]rune
	wrapped []bool // row i continues on row i+1
	r, c    int
	esc     []byte // an escape sequence being read
	partial []byte // an incomplete UTF-8 sequence
}

func newFakeTerminal(width int) *fakeTerminal { return &fakeTerminal{width: width} }

func (t *fakeTerminal) Width() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.width
}

func (t *fakeTerminal) row(i int) {
	for len(t.rows) <= i {
		t.rows = append(t.rows, nil)
		t.wrapped = append(t.wrapped, false)
	}
}

func (t *fakeTerminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := append(t.partial, p...)
	t.partial = nil
	for len(b) > 0 {
		if t.esc != nil {
			t.esc = append(t.esc, b[0])
			b = b[1:]
			if last := t.esc[len(t.esc)-1]; len(t.esc) > 2 && last >= 0x40 && last <= 0x7e || len(t.esc) == 2 && last != '[' {
				t.control(string(t.esc))
				t.esc = nil
			}
			continue
		}
		if !utf8.FullRune(b) {
			t.partial = append([]byte(nil), b...)
			break
		}
		ch, n := utf8.DecodeRune(b)
		b = b[n:]
		switch ch {
		case 0x1b:
			t.esc = []byte{0x1b}
		case '\n':
			t.r, t.c = t.r+1, 0
		case '\r':
			t.c = 0
		default:
			if t.c >= t.width {
				t.row(t.r)
				t.wrapped[t.r] = true
				t.r, t.c = t.r+1, 0
			}
			t.row(t.r)
			for len(t.rows[t.r]) <= t.c {
				t.rows[t.r] = append(t.rows[t.r], ' ')
			}
			t.rows[t.r][t.c] = ch
			t.c++
		}
	}
	return len(p), nil
}

// control applies one CSI sequence: ESC [ params final.
func (t *fakeTerminal) control(seq string) {
	if !strings.HasPrefix(seq, "\x1b[") {
		panic("fake terminal: unexpected escape " + strconv.Quote(seq))
	}
	params, final := seq[2:len(seq)-1], seq[len(seq)-1]
	n := 1
	if params != "" {
		n, _ = strconv.Atoi(params)
	}
	switch final {
	case 'A':
		t.r = max(0, t.r-n)
	case 'J':
		t.clearLine()
		if t.r+1 < len(t.rows) {
			t.rows, t.wrapped = t.rows[:t.r+1], t.wrapped[:t.r+1]
		}
		if t.r < len(t.wrapped) {
			t.wrapped[t.r] = false
		}
	case 'K':
		t.clearLine()
	default:
		panic("fake terminal: unexpected escape " + strconv.Quote(seq))
	}
}

func (t *fakeTerminal) clearLine() {
	if t.r < len(t.rows) && t.c < len(t.rows[t.r]) {
		t.rows[t.r] = t.rows[t.r][:t.c]
	}
}

// Resize reflows the screen at width. The cursor must be at the start of
// the row after the last (where a Console leaves it).
func (t *fakeTerminal) Resize(width int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.c != 0 || t.r < len(t.rows) && len(t.rows[t.r]) > 0 {
		panic("fake terminal: resize with the cursor inside the text")
	}
	var lines [][]rune
	var cur []rune
	for i, row := range t.rows[:min(t.r, len(t.rows))] {
		cur = append(cur, row...)
		if !t.wrapped[i] {
			lines, cur = append(lines, cur), nil
		}
	}
	t.width, t.rows, t.wrapped = width, nil, nil
	for _, l := range lines {
		for {
			n := min(len(l), width)
			t.rows = append(t.rows, append([]rune(nil), l[:n]...))
			t.wrapped = append(t.wrapped, len(l) > width)
			if len(l) <= width {
				break
			}
			l = l[n:]
		}
	}
	t.r, t.c = len(t.rows), 0
}

// Screen is the rows, trailing spaces dropped.
func (t *fakeTerminal) Screen() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.rows))
	for _, r := range t.rows {
		out = append(out, strings.TrimRight(string(r), " "))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// Lines is the screen's logical lines: wrapped rows joined.
func (t *fakeTerminal) Lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	var cur strings.Builder
	for i, r := range t.rows {
		cur.WriteString(string(r))
		if !t.wrapped[i] {
			out = append(out, strings.TrimRight(cur.String(), " "))
			cur.Reset()
		}
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}
