package monitor

import (
	"bytes"
	"os"
	"testing"
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
