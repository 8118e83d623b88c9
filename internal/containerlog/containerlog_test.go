package containerlog

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

func TestParse(t *testing.T) {
	at := time.Date(2026, 11, 29, 7, 58, 21, 176543210, time.UTC)
	var b []byte
	b = appendHeader(b, at, Stderr)
	b = append(b, "P part"...)
	r, err := Parse(b)
	if err != nil || !r.Time.Equal(at) || r.Stream != Stderr || !r.Partial || string(r.Content) != "part" {
		t.Fatalf("Parse(%q) = %+v, %v", b, r, err)
	}
	if string(b[:len("2026-11-29T07:58:21.176543210Z")]) != "2026-11-29T07:58:21.176543210Z" {
		t.Errorf("header %q: want a fixed-width UTC time", b)
	}
	for _, ok := range []string{
		"2026-11-29T07:58:21.1Z stdout F ", // an empty line; a shorter time (other writers)
		"2026-11-29T07:58:21.176543210Z stdout F with  spaces ",
	} {
		if _, err := Parse([]byte(ok)); err != nil {
			t.Errorf("Parse(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "garbage", "2026-11-29T07:58:21Z stdout", "2026-11-29T07:58:21Z stdin F x",
		"2026-11-29T07:58:21Z stdout X x", "2026-11-29T07:58:21Z stdout F", "yesterday stdout F x",
		"2026-11-29T07:58:21Z stdout Fx",
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q): no error", bad)
		}
	}
}

// readAll reads dir and returns each stream's output and the records.
func readAll(t *testing.T, dir string) (out [3][]byte, recs []Record) {
	t.Helper()
	err := Read(context.Background(), dir, ReadOptions{}, func(r Record) error {
		out[r.Stream] = append(out[r.Stream], r.Output()...)
		r.Content = append([]byte(nil), r.Content...)
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, recs
}

// TestRoundTrip: what the writer is given comes back byte for byte per
// stream — lines, a line in pieces across writes, a line longer than
// MaxLine, an empty line, no trailing newline — with stdout and stderr
// apart and in order.
func TestRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	w, err := Create(dir, Limits{MaxSize: 1 << 20, MaxFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	long := bytes.Repeat([]byte("x"), 2*MaxLine+5)
	at := time.Unix(1700000000, 0)
	writes := []struct {
		s Stream
		p string
	}{
		{Stdout, "one\ntwo\n"}, {Stderr, "warn: "}, {Stdout, "thr"}, {Stderr, "disk\n"},
		{Stdout, "ee\n\n"}, {Stdout, string(long) + "\n"}, {Stdout, "no newline at the end"},
	}
	var want [3][]byte
	for i, wr := range writes {
		w.Write(wr.s, at.Add(time.Duration(i)*time.Second), []byte(wr.p))
		want[wr.s] = append(want[wr.s], wr.p...)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, recs := readAll(t, dir)
	for _, s := range []Stream{Stdout, Stderr} {
		// The last partial record reads as its content (P: no newline).
		if !bytes.Equal(got[s], want[s]) {
			t.Errorf("%s: got %q, want %q", s, got[s], want[s])
		}
	}
	if recs[0].Stream != Stdout || string(recs[0].Content) != "one" || recs[2].Stream != Stderr || !recs[2].Partial {
		t.Errorf("records out of order: %+v", recs[:3])
	}
	for _, r := range recs {
		if len(r.Content) > MaxLine {
			t.Errorf("record of %d bytes, over MaxLine", len(r.Content))
		}
	}
	if !recs[3].Time.Equal(at.Add(2 * time.Second)) {
		t.Errorf("record time %v, want the time of its write", recs[3].Time)
	}
}

func dirSize(t *testing.T, dir string) (total int64, n int) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
		n++
	}
	return total, n
}

// TestRotationBounds: however much is written, the log keeps at most
// MaxFiles files of at most MaxSize bytes, each ending on a whole record,
// and holds the newest output; a writer started again on the directory
// goes on after its newest file.
func TestRotationBounds(t *testing.T) {
	dir := t.TempDir()
	lim := Limits{MaxSize: MinMaxSize, MaxFiles: 3}
	w, err := Create(dir, lim)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("a", 99) + "\n")
	for i := 0; i < 20000; i++ { // 2 MB of output, ~3.3 MB of records
		w.Write(Stdout, time.Now(), line)
		if i%1000 == 0 {
			if total, n := dirSize(t, dir); total > lim.MaxSize*int64(lim.MaxFiles) || n > lim.MaxFiles {
				t.Fatalf("after %d lines: %d bytes in %d files, over %d×%d", i, total, n, lim.MaxFiles, lim.MaxSize)
			}
		}
	}
	w.Write(Stdout, time.Now(), []byte("last\n"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seqs, _ := files(dir)
	if len(seqs) != lim.MaxFiles {
		t.Fatalf("files %v, want %d", seqs, lim.MaxFiles)
	}
	for _, s := range seqs {
		b, err := os.ReadFile(filepath.Join(dir, fileName(s)))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) > lim.MaxSize || len(b) == 0 || b[len(b)-1] != '\n' {
			t.Errorf("file %d: %d bytes, ends %q", s, len(b), b[max(0, len(b)-3):])
		}
	}
	out, _ := readAll(t, dir)
	if !bytes.HasSuffix(out[Stdout], []byte("a\nlast\n")) {
		t.Errorf("the newest output is not last: %q", out[Stdout][max(0, len(out[Stdout])-20):])
	}

	w2, err := Create(dir, lim)
	if err != nil {
		t.Fatal(err)
	}
	w2.Write(Stderr, time.Now(), []byte("after a restart\n"))
	w2.Close()
	seqs2, _ := files(dir)
	if len(seqs2) != lim.MaxFiles || seqs2[len(seqs2)-1] != seqs[len(seqs)-1]+1 {
		t.Errorf("files after a restart %v (before %v): want a new newest and %d in all", seqs2, seqs, lim.MaxFiles)
	}
}

// TestFollow: Read with Follow passes every record in order while the
// writer rotates under it, and ends once Done is closed and the rest is
// read.
func TestFollow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	w, err := Create(dir, Limits{MaxSize: MinMaxSize, MaxFiles: MaxMaxFiles})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var got bytes.Buffer
	errc := make(chan error, 1)
	go func() {
		errc <- Read(context.Background(), dir, ReadOptions{Follow: true, Done: done, Poll: time.Millisecond}, func(r Record) error {
			got.Write(r.Output())
			return nil
		})
	}()
	var want bytes.Buffer
	for i := 0; i < 5000; i++ {
		line := []byte(strings.Repeat("b", i%300) + "\n")
		w.Write(Stdout, time.Now(), line)
		want.Write(line)
	}
	w.Close()
	close(done)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if seqs, _ := files(dir); len(seqs) < 3 {
		t.Fatalf("only %d files: the test did not rotate", len(seqs))
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("followed %d bytes, want %d", got.Len(), want.Len())
	}
}

// TestFullDisk: on a full disk the writer drops records (counted, the
// error kept), leaves no torn record in the file, and writes again once
// space is freed.
func TestFullDisk(t *testing.T) {
	disk := testutil.SmallTmpfs(t, 1<<20)
	dir := filepath.Join(disk, "log")
	w, err := Create(dir, Limits{MaxSize: 10 << 20, MaxFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Write(Stdout, time.Now(), []byte("before\n"))
	free := testutil.FillDisk(t, disk)
	big := bytes.Repeat([]byte("c"), 1000)
	big[len(big)-1] = '\n'
	for i := 0; i < 300; i++ {
		w.Write(Stdout, time.Now(), big)
	}
	if st := w.Stats(); st.Dropped == 0 || !errors.Is(st.Err, syscall.ENOSPC) || st.In != 300*1000+7 {
		t.Fatalf("stats on a full disk: %+v", st)
	}
	free()
	w.Write(Stdout, time.Now(), []byte("after\n"))
	if st := w.Stats(); st.Err != nil {
		t.Fatalf("stats after space was freed: %+v", st)
	}
	seqs, _ := files(dir)
	for _, s := range seqs {
		b, _ := os.ReadFile(filepath.Join(dir, fileName(s)))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			t.Errorf("file %d ends in a torn record", s)
		}
		for _, l := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
			if _, err := Parse(l); err != nil {
				t.Errorf("file %d: line %q is no record", s, l)
			}
		}
	}
	out, _ := readAll(t, dir)
	if !bytes.HasPrefix(out[Stdout], []byte("before\n")) || !bytes.HasSuffix(out[Stdout], []byte("after\n")) {
		t.Errorf("output %q…: want before … after", out[Stdout][:min(20, len(out[Stdout]))])
	}
}

// TestBucket: the rate bucket lets a second's worth through at once, then
// makes the taker wait for the rest.
func TestBucket(t *testing.T) {
	now := time.Unix(0, 0)
	var slept time.Duration
	b := newBucket(1000)
	b.now = func() time.Time { return now }
	b.last = now
	b.sleep = func(d time.Duration) { slept += d; now = now.Add(d) }
	b.take(1000)
	if slept != 0 {
		t.Fatalf("slept %v within the burst", slept)
	}
	for i := 0; i < 10; i++ {
		b.take(500)
	}
	if slept < 4900*time.Millisecond || slept > 5100*time.Millisecond {
		t.Fatalf("slept %v for 5000 bytes past the burst at 1000/s, want 5s", slept)
	}
}

func TestLimitsValidate(t *testing.T) {
	if err := (Limits{MaxSize: DefaultMaxSize, MaxFiles: DefaultMaxFiles, Rate: DefaultRate}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []Limits{{MaxSize: MinMaxSize - 1, MaxFiles: 1}, {MaxSize: MinMaxSize, MaxFiles: 0},
		{MaxSize: MinMaxSize, MaxFiles: MaxMaxFiles + 1}, {MaxSize: MinMaxSize, MaxFiles: 1, Rate: -1}} {
		if err := l.Validate(); err == nil {
			t.Errorf("%+v: valid", l)
		}
	}
}
