package hostuser

import (
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		user string
		want ID
		err  error
	}{
		{"nobody", ID{65534, 65534}, nil},
		{"root", ID{0, 0}, nil},
		{"0", ID{0, 0}, nil},
		{"alice", ID{1000, 1001}, nil},
		{"1000", ID{1000, 1001}, nil},
		{"alice:staff", ID{1000, 50}, nil},
		{"alice:7", ID{1000, 7}, nil},
		{"4242:4243", ID{4242, 4243}, nil},
		{"4242:nogroup", ID{4242, 65534}, nil},
		{"4242", ID{}, ErrUnknown}, // no entry and no gid: no silent group
		{"mallory", ID{}, ErrUnknown},
		{"broken", ID{}, ErrUnknown}, // malformed entry ignored
		{"alice:wheel", ID{}, ErrUnknown},
		{"", ID{}, ErrInvalid},
		{":50", ID{}, ErrInvalid},
		{"alice:", ID{}, ErrInvalid},
		{"al ice", ID{}, ErrInvalid},
		{"4294967295:1", ID{}, ErrUnknown}, // (uid_t)-1 is not a uid
	} {
		got, err := Lookup("testdata", tc.user)
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("Lookup(%q) = %v, %v; want %v, %v", tc.user, got, err, tc.want, tc.err)
		}
	}
}

func TestIDString(t *testing.T) {
	id := ID{1000, 50}
	back, err := Lookup("testdata", id.String())
	if err != nil || back != id {
		t.Errorf("Lookup(%q) = %v, %v; want %v", id.String(), back, err, id)
	}
	if id.Root() || !(ID{GID: 5}).Root() {
		t.Error("Root() wrong")
	}
}

// LookupIn reads the database through its opener and names it in errors.
func TestLookupIn(t *testing.T) {
	files := map[string]string{
		"etc/passwd": "app:x:1000:1000::/srv:/bin/sh\nroot:x:0:0::/root:/bin/sh\n",
		"etc/group":  "app:x:1000:\nstaff:x:50:\n",
	}
	open := func(name string) (io.ReadCloser, error) {
		b, ok := files[name]
		if !ok {
			return nil, fs.ErrNotExist
		}
		return io.NopCloser(strings.NewReader(b)), nil
	}
	for _, tc := range []struct {
		user string
		want ID
		err  error
	}{
		{"app", ID{1000, 1000}, nil},
		{"app:staff", ID{1000, 50}, nil},
		{"0", ID{0, 0}, nil},
		{"nobody", ID{}, ErrUnknown},
	} {
		got, err := LookupIn(open, "image app:1", tc.user)
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("LookupIn(%q) = %v, %v; want %v, %v", tc.user, got, err, tc.want, tc.err)
		}
	}
	_, err := LookupIn(open, "image app:1", "nobody")
	if err == nil || !strings.Contains(err.Error(), "image app:1:/etc/passwd") {
		t.Errorf("error %v does not name the image's passwd", err)
	}
	delete(files, "etc/passwd")
	if _, err := LookupIn(open, "image scratch", "app"); !errors.Is(err, ErrUnknown) {
		t.Errorf("no passwd: %v, want ErrUnknown (an empty database)", err)
	}
	if got, err := LookupIn(open, "image scratch", "4242:4242"); err != nil || got != (ID{4242, 4242}) {
		t.Errorf("no passwd, numeric user: %v, %v", got, err)
	}
}

// Name is Lookup's reverse: a uid's entry name (brim container top).
func TestName(t *testing.T) {
	for uid, want := range map[uint32]string{0: "root", 1000: "alice", 65534: "nobody", 4242: ""} {
		if got, ok := Name("testdata", uid); got != want || ok != (want != "") {
			t.Errorf("Name(%d) = %q, %v; want %q", uid, got, ok, want)
		}
	}
}
