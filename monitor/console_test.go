package monitor

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestConsoleKeepsLogsAboveDisplay(t *testing.T) {
	var out bytes.Buffer
	c := NewConsole(&out)
	if _, err := c.Write([]byte("before\n")); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "before\n" {
		t.Errorf("write with nothing drawn = %q, want it unchanged", got)
	}

	out.Reset()
	c.draw([]string{"a", "b"})
	out.Reset()
	n, err := c.Write([]byte("level=INFO msg=hello\n"))
	if err != nil || n != len("level=INFO msg=hello\n") {
		t.Fatalf("Write = %d, %v", n, err)
	}
	want := "\x1b[2A\r\x1b[J" + "level=INFO msg=hello\n" + "a\x1b[K\n" + "b\x1b[K\n"
	if got := out.String(); got != want {
		t.Errorf("log line over a display:\n got %q\nwant %q", got, want)
	}

	// A write that does not end its line still leaves the display whole.
	out.Reset()
	c.Write([]byte("partial"))
	if want := "\x1b[2A\r\x1b[Jpartial\na\x1b[K\nb\x1b[K\n"; out.String() != want {
		t.Errorf("partial line over a display:\n got %q\nwant %q", out.String(), want)
	}

	// Shrinking the display clears the lines below it.
	out.Reset()
	c.draw([]string{"c"})
	if want := "\x1b[2A\r\x1b[Jc\x1b[K\n"; out.String() != want {
		t.Errorf("shrunk display:\n got %q\nwant %q", out.String(), want)
	}

	// Once released the display is ordinary output: later writes go below.
	c.release()
	out.Reset()
	c.Write([]byte("summary\n"))
	if out.String() != "summary\n" {
		t.Errorf("write after release = %q", out.String())
	}
	c.draw(nil)
	if out.String() != "summary\n" {
		t.Errorf("an empty display drew %q", out.String())
	}
}

func TestIsTerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	file, err := os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for name, out := range map[string]any{"pipe": w, "null device": null, "regular file": file, "buffer": &bytes.Buffer{}} {
		if isTerminal(out.(interface{ Write([]byte) (int, error) })) {
			t.Errorf("%s detected as a terminal", name)
		}
	}

	// A pseudo-terminal is one, unless TERM says it cannot move the cursor.
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Logf("no pseudo-terminal to test the positive case: %v", err)
		return
	}
	defer pty.Close()
	t.Setenv("TERM", "xterm")
	if !isTerminal(pty) {
		t.Error("a pseudo-terminal is not detected as a terminal")
	}
	t.Setenv("TERM", "dumb")
	if isTerminal(pty) {
		t.Error("TERM=dumb detected as a terminal")
	}
}

// Issue 20 §7: at 80 columns log lines (long enough to wrap over rows of
// their own) print above the display, whole, and the display redraws below
// them; narrowed to 60 and then 40 columns, whether the next thing is a
// redraw or a log line, no stale part of a display line stays on screen and
// every display line fits the new width (before: a resize left the top half
// of a rewrapped progress line behind).
func TestConsoleDisplayStaysCleanOverLogsAndResizes(t *testing.T) {
	term := newFakeTerminal(80)
	con := NewConsole(term)
	clk := newClock()
	log := slog.New(slog.NewTextHandler(con, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			a.Value = slog.TimeValue(clk.Now())
		}
		return a
	}}))
	m := New(Options{Logger: log, Out: con, Terminal: ptr(true), Width: term.Width, Now: clk.Now})
	m.SetTables([]string{"blocks"})
	m.SetRange(1, 12000)
	m.FetchPlanned(12000)
	m.ExportStream(1, 12000, 1)
	step := func(h uint64) {
		clk.Add(time.Second)
		m.Staged(500, 10e6, 2e6, time.Millisecond)
		m.Exported(h, h+99, []int{100}, time.Millisecond, false)
		m.tick(clk.Now(), false)
	}
	var logged []string
	say := func(i int) {
		msg := fmt.Sprintf("export starting %d", i)
		log.Info(msg, "stream", "backfill/range-1-12000/part-2-of-2", "next", 6001, "to", 12000,
			"target", "pg:7714506271230404748/blockhaul/cometbft/backfill/range-1-12000/part-2-of-2")
		logged = append(logged, msg)
	}
	check := func(when string) {
		t.Helper()
		screen, lines := term.Screen(), term.Lines()
		width := term.Width()
		m.mu.Lock()
		want := renderLines(m.viewsLocked(), width)
		m.mu.Unlock()
		if len(screen) < len(want) {
			t.Fatalf("%s: screen %q", when, screen)
		}
		// The display is the last rows, one row each, within the width.
		bottom := screen[len(screen)-len(want):]
		for i, l := range bottom {
			if utf8.RuneCountInString(l) >= width || !strings.HasPrefix(l, strings.Fields(want[i])[0]) {
				t.Errorf("%s: display row %d is %q (width %d), want %q", when, i, l, width, want[i])
			}
		}
		// Above it: log lines only, each whole, in order.
		above := lines[:len(lines)-len(want)]
		var seen []string
		for _, l := range above {
			if strings.HasPrefix(l, "fetch ") || strings.HasPrefix(l, "export ") {
				t.Errorf("%s: a stale display line above the display: %q\nscreen:\n%s", when, l, strings.Join(screen, "\n"))
				continue
			}
			if !strings.HasPrefix(l, "time=") || !strings.HasSuffix(l, "part-2-of-2") {
				t.Errorf("%s: a log line cut or mixed with the display: %q", when, l)
				continue
			}
			seen = append(seen, l[strings.Index(l, `msg="`)+5:strings.Index(l, `" stream`)])
		}
		if fmt.Sprint(seen) != fmt.Sprint(logged) {
			t.Errorf("%s: log lines %q, want %q", when, seen, logged)
		}
	}

	step(1)
	say(1)
	step(101)
	say(2)
	say(3)
	check("80 columns")
	if rows := len(term.Screen()); rows <= 3*2+2 {
		t.Fatalf("the log lines did not wrap at 80 columns (%d rows): the test proves nothing", rows)
	}

	term.Resize(60) // then a redraw
	step(201)
	check("narrowed to 60, redrawn")
	term.Resize(40) // then a log line before any redraw
	say(4)
	check("narrowed to 40, a log line")
	step(301)
	check("narrowed to 40, redrawn")
	term.Resize(100) // widened: nothing wrapped, nothing left behind
	step(401)
	say(5)
	check("widened to 100")
}
