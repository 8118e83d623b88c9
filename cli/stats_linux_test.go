package cli

import (
	"bytes"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

// readUntil reads the pty master until the output holds want, or fails
// after the test's own bound (not a timed assertion: the frame comes).
func readUntil(t *testing.T, master *os.File, out *bytes.Buffer, want func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	buf := make([]byte, 4096)
	for !want(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no such output; got %q", out.String())
		}
		_ = master.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, _ := master.Read(buf)
		out.Write(buf[:n])
	}
}

// On a terminal the watch's screen draws each frame over the last, cut at
// the terminal's width, and redraws the last frame at the new width when
// the terminal is resized (SIGWINCH), without a new round.
func TestScreenRedrawsOnResize(t *testing.T) {
	master, slave := testutil.OpenPTY(t, 20, 5)
	s := newScreen(slave)
	if s.tty == nil {
		t.Fatal("the pty slave is not seen as a terminal")
	}
	text := "ID            NAME\nc0123456789a  a-long-name-here\n"
	if err := s.draw(text); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	readUntil(t, master, &out, func(o string) bool { return strings.Contains(o, "\x1b[J") })
	first := out.String()
	if !strings.HasPrefix(first, "\x1b[2J\x1b[?25l\x1b[H") || !strings.Contains(first, "c0123456789a  a-long\x1b[K\r\n") {
		t.Fatalf("first frame: %q", first)
	}
	out.Reset()
	testutil.ResizePTY(t, master, 12, 5)
	// The pty is no controlling terminal here: signal the process as the
	// kernel signals a terminal's foreground group.
	if err := syscall.Kill(os.Getpid(), syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	readUntil(t, master, &out, func(o string) bool { return strings.Contains(o, "\x1b[J") })
	if got := out.String(); got != "\x1b[HID          \x1b[K\r\nc0123456789a\x1b[K\r\n\x1b[J" {
		t.Fatalf("redraw at 12 columns: %q", got)
	}
	s.close()
	out.Reset()
	readUntil(t, master, &out, func(o string) bool { return strings.Contains(o, "\x1b[?25h") })
}

// Into a pipe or a file each frame is plain text below the last.
func TestScreenPlain(t *testing.T) {
	var b bytes.Buffer
	s := newScreen(&b)
	_ = s.draw("a\n")
	_ = s.draw("b\n")
	s.close()
	if b.String() != "a\n\nb\n\n" {
		t.Fatalf("plain frames: %q", b.String())
	}
}
