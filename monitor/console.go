package monitor

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"sync"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Console is an output shared by a progress display and log lines. A
// display redrawn in place assumes that the lines it drew are still the last
// on screen; a log line written in between would be overwritten or leave a
// stale copy behind. Writes through a Console erase the display, write, and
// draw it again below, so log lines scroll above it. On an output that is not
// a terminal nothing is ever drawn and a Console only serialises writes.
// A Console is safe for concurrent use.
//
// Display lines are cut to one column less than the terminal's width, so
// that none wraps when drawn. After a resize the terminal may have rewrapped
// them: the display is erased as the lines it drew occupy the terminal at its
// new width (a terminal that reflows, as most do), so no stale part of a line
// stays behind.
type Console struct {
	mu    sync.Mutex
	w     io.Writer
	cols  func() int // the terminal's width now; nil or 0: unknown
	frame []string   // the display on screen, if drawn > 0
	drawn int        // lines of frame on screen below the last log line
	buf   bytes.Buffer
}

// NewConsole returns a Console writing to w.
func NewConsole(w io.Writer) *Console { return &Console{w: w} }

// setWidth gives the Console the terminal's width, asked at every write.
func (c *Console) setWidth(cols func() int) {
	c.mu.Lock()
	c.cols = cols
	c.mu.Unlock()
}

func (c *Console) width() int {
	if c.cols == nil {
		return 0
	}
	return c.cols()
}

// Write writes p (one or more whole lines, as a log handler writes them)
// above the display.
func (c *Console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.drawn == 0 {
		return c.w.Write(p)
	}
	width := c.width()
	c.buf.Reset()
	c.erase(width)
	c.buf.Write(p)
	if len(p) > 0 && p[len(p)-1] != '\n' {
		c.buf.WriteByte('\n')
	}
	c.frame = cutLines(c.frame, width)
	c.put(c.frame)
	if _, err := c.w.Write(c.buf.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// draw replaces the display with lines.
func (c *Console) draw(lines []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(lines) == 0 && c.drawn == 0 {
		return
	}
	width := c.width()
	c.buf.Reset()
	c.erase(width)
	c.frame = cutLines(append(c.frame[:0], lines...), width)
	c.put(c.frame)
	c.drawn = len(lines)
	// A display is decoration: a failed write must not fail the job.
	_, _ = c.w.Write(c.buf.Bytes())
}

// release leaves the display on screen as ordinary output: later writes go
// below it.
func (c *Console) release() {
	c.mu.Lock()
	c.drawn = 0
	c.frame = c.frame[:0]
	c.mu.Unlock()
}

// erase moves the cursor to the first row of the display and clears from
// there down. The display's lines take one row each unless the terminal,
// narrowed since they were drawn, has rewrapped them over more.
func (c *Console) erase(width int) {
	rows := 0
	if c.drawn > 0 {
		for _, l := range c.frame {
			rows += rowsOf(l, width)
		}
	}
	if rows > 0 {
		c.buf.WriteString("\x1b[")
		c.buf.WriteString(strconv.Itoa(rows))
		c.buf.WriteString("A")
	}
	c.buf.WriteString("\r\x1b[J")
}

func (c *Console) put(lines []string) {
	for _, l := range lines {
		c.buf.WriteString(l)
		c.buf.WriteString("\x1b[K\n")
	}
}

// rowsOf is how many rows line takes on a terminal width columns wide.
func rowsOf(line string, width int) int {
	n := utf8.RuneCountInString(line)
	if width <= 0 || n <= width {
		return 1
	}
	return (n + width - 1) / width
}

// cutLines cuts each line to width-1 columns (in place), so that none
// reaches the last column, where some terminals wrap.
func cutLines(lines []string, width int) []string {
	if width <= 1 {
		return lines
	}
	for i, l := range lines {
		if utf8.RuneCountInString(l) > width-1 {
			lines[i] = string([]rune(l)[:width-1])
		}
	}
	return lines
}

// isTerminal reports whether w is an interactive terminal that understands
// cursor movement: a character device (which a pipe, a file or a Kubernetes
// log stream is not) other than the null device, with TERM not "dumb".
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(fi, null) {
		return false
	}
	return true
}

// TerminalWidth returns the columns of the terminal w writes to: its window
// size, else $COLUMNS, else 0 (unknown).
func TerminalWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			return int(ws.Col)
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 0
}
