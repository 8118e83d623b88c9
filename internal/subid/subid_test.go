package subid

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestParse(t *testing.T) {
	dir := t.TempDir()
	subuid := filepath.Join(dir, "subuid")
	subgid := filepath.Join(dir, "subgid")
	if err := os.WriteFile(subuid, []byte("# comment\nalice:100000:65536\nbrim:200000:131072\nbrim:900000:10\nzero:0:65536\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(subgid, []byte("alice:100000:65536\nbrim:300000:65536\nzero:0:65536\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := []struct {
		spec string
		want Range
	}{
		{"100000:65536", Range{100000, 100000, 65536}},
		{"brim", Range{200000, 300000, 65536}}, // the smaller count, first entry
		{"alice", Range{100000, 100000, 65536}},
	}
	for _, tc := range ok {
		got, err := Parse(tc.spec, subuid, subgid)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
	for _, spec := range []string{"", "0:65536", "100000:0", "x:1", "1:x", "4294967000:1000", "nobody", "zero"} {
		if _, err := Parse(spec, subuid, subgid); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q): err %v, want ErrInvalid", spec, err)
		}
	}
	if _, err := Parse("brim", filepath.Join(dir, "missing"), subgid); !errors.Is(err, ErrInvalid) {
		t.Errorf("missing file: err %v, want ErrInvalid", err)
	}
	if err := os.WriteFile(subuid, []byte("bad line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse("brim", subuid, subgid); !errors.Is(err, ErrInvalid) {
		t.Errorf("malformed file: err %v, want ErrInvalid", err)
	}
}

func TestRangeHost(t *testing.T) {
	r := Range{HostUID: 100000, HostGID: 200000, Size: 65536}
	if u, g := r.Host(65534, 0); u != 165534 || g != 200000 {
		t.Errorf("Host(65534, 0) = %d, %d", u, g)
	}
	if !r.Contains(65535, 65535) || r.Contains(65536, 0) || r.Contains(0, 65536) {
		t.Error("Contains is wrong at the edges")
	}
}
