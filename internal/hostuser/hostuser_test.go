package hostuser

import (
	"errors"
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
