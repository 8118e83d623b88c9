package containerlog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeNumbered writes n lines, line i at base+i seconds on stderr when
// i%3 == 2 (else stdout), into a log of 64 KiB files: about 700 lines a
// file. It returns the log dir.
func writeNumbered(t *testing.T, n int, base time.Time) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "log")
	w, err := Create(dir, Limits{MaxSize: MinMaxSize, MaxFiles: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range n {
		s := Stdout
		if i%3 == 2 {
			s = Stderr
		}
		w.Write(s, base.Add(time.Duration(i)*time.Second), []byte(fmt.Sprintf("line %d %s\n", i, strings.Repeat("z", 40))))
	}
	return dir
}

// numbers reads dir with opts and returns the line numbers passed.
func numbers(t *testing.T, dir string, opts ReadOptions) []int {
	t.Helper()
	var got []int
	err := Read(context.Background(), dir, opts, func(r Record) error {
		var i int
		if _, err := fmt.Sscanf(string(r.Content), "line %d", &i); err != nil {
			t.Fatalf("record %q: %v", r.Content, err)
		}
		got = append(got, i)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func seq(from, to, step int, skip func(int) bool) []int {
	var out []int
	for i := from; i < to; i += step {
		if skip == nil || !skip(i) {
			out = append(out, i)
		}
	}
	return out
}

// TestReadSelect: the tail, the time bounds and the stream select records
// across rotated files, alone and together.
func TestReadSelect(t *testing.T) {
	base := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	const n = 3000
	dir := writeNumbered(t, n, base)
	if seqs, err := files(dir); err != nil || len(seqs) < 4 {
		t.Fatalf("log files %v, %v: want several, for tails across them", seqs, err)
	}
	stderr := func(i int) bool { return i%3 != 2 }
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
	for _, tc := range []struct {
		name string
		opts ReadOptions
		want []int
	}{
		{"all", ReadOptions{}, seq(0, n, 1, nil)},
		{"tail 1", ReadOptions{Tail: 1}, []int{n - 1}},
		{"tail across files", ReadOptions{Tail: 1500}, seq(n-1500, n, 1, nil)},
		{"tail beyond the log", ReadOptions{Tail: n + 10}, seq(0, n, 1, nil)},
		{"stream", ReadOptions{Stream: Stderr}, seq(0, n, 1, stderr)},
		{"tail of a stream", ReadOptions{Stream: Stderr, Tail: 800}, seq(0, n, 1, stderr)[1000-800:]},
		{"since", ReadOptions{Since: at(2500)}, seq(2500, n, 1, nil)},
		{"until", ReadOptions{Until: at(10)}, seq(0, 11, 1, nil)},
		{"since and until", ReadOptions{Since: at(100), Until: at(1200)}, seq(100, 1201, 1, nil)},
		{"tail within until", ReadOptions{Until: at(1200), Tail: 3}, []int{1198, 1199, 1200}},
		{"everything", ReadOptions{Since: at(900), Until: at(2000), Stream: Stdout, Tail: 4}, []int{1995, 1996, 1998, 1999}},
		{"nothing since", ReadOptions{Since: at(n + 5)}, nil},
		{"from the end", ReadOptions{FromEnd: true, Tail: 5}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := numbers(t, dir, tc.opts)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %d records %v…, want %d %v…", len(got), head(got), len(tc.want), head(tc.want))
			}
		})
	}
}

func head(s []int) []int { return s[:min(len(s), 8)] }

// TestReadFromEndFollows: a followed read from the end passes only what
// is written after it started, across a rotation, and a followed read
// with Until ends once Until has passed.
func TestReadFromEndFollows(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	w, err := Create(dir, Limits{MaxSize: MinMaxSize, MaxFiles: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 2000 {
		w.Write(Stdout, time.Now(), []byte(fmt.Sprintf("old %d %s\n", i, strings.Repeat("y", 40))))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	got := make(chan string, 4000)
	errc := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		first := true
		errc <- Read(ctx, dir, ReadOptions{Follow: true, FromEnd: true, Done: done, Poll: time.Millisecond, Caught: func() error {
			if first {
				first = false
				close(started)
			}
			return nil
		}}, func(r Record) error {
			got <- string(r.Content)
			return nil
		})
	}()
	<-started
	for i := range 2000 { // past at least one rotation
		w.Write(Stdout, time.Now(), []byte(fmt.Sprintf("new %d %s\n", i, strings.Repeat("y", 40))))
	}
	close(done)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	close(got)
	var recs []string
	for r := range got {
		recs = append(recs, r)
	}
	if len(recs) != 2000 || !strings.HasPrefix(recs[0], "new 0 ") || !strings.HasPrefix(recs[1999], "new 1999 ") {
		t.Fatalf("followed from the end: %d records, first %q: want the 2000 new ones", len(recs), head2(recs))
	}

	// Until in the past: a followed read ends at once, after the records.
	until := time.Now()
	ended := make(chan error, 1)
	var n int
	go func() {
		ended <- Read(ctx, dir, ReadOptions{Follow: true, Until: until, Poll: time.Millisecond}, func(Record) error { n++; return nil })
	}()
	if err := <-ended; err != nil || n != 4000 {
		t.Fatalf("follow with until passed: %d records, %v: want all 4000 and the end", n, err)
	}
}

func head2(s []string) []string { return s[:min(len(s), 2)] }

// TestTailTornAndJunk: a torn last line and a run of junk without a
// newline are no records for a tail.
func TestTailTornAndJunk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	w, err := Create(dir, Limits{MaxSize: 1 << 20, MaxFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 0)
	w.Write(Stdout, at, []byte("line 1\nline 2\n"))
	w.Close()
	f := filepath.Join(dir, fileName(1))
	appendFile(t, f, strings.Repeat("j", 3*maxRecordLine)+"\n"+at.UTC().Format(timeLayout)+" stdout F line 3\n"+at.UTC().Format(timeLayout)+" stdout F line 4 torn")
	if got := numbers(t, dir, ReadOptions{Tail: 2}); fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("tail 2 over junk and a torn line: %v, want [2 3]", got)
	}
	if got := numbers(t, dir, ReadOptions{Tail: 3}); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("tail 3: %v, want [1 2 3]", got)
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}
