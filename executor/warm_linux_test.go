package executor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	tramp "github.com/brimnode/brim/executor/trampoline"
)

func TestTrampolineEnvIsTheTrampolines(t *testing.T) {
	if TrampolineEnv != tramp.EnvVar {
		t.Errorf("TrampolineEnv %q, the trampoline reads %q", TrampolineEnv, tramp.EnvVar)
	}
}

// TestPrepareEnv: the trampoline's environment is libcontainer's
// prepareEnv's: the last of duplicate variables, in the order given, no
// empty HOME, HOME from the container's /etc/passwd when not set ("/"
// for a user without an entry), bad variables refused.
func TestPrepareEnv(t *testing.T) {
	self := os.Getpid() // this process's root: the host's /etc/passwd
	for _, tc := range []struct {
		name string
		env  []string
		uid  int
		want []string
		err  string
	}{
		{"duplicates", []string{"A=1", "B=2", "A=3", "HOME=/h"}, 0, []string{"B=2", "A=3", "HOME=/h"}, ""},
		{"home of root", []string{"PATH=/bin"}, 0, []string{"PATH=/bin", "HOME=/root"}, ""},
		{"empty home", []string{"HOME=", "X=y"}, 0, []string{"X=y", "HOME=/root"}, ""},
		{"user without an entry", nil, 123457, []string{"HOME=/"}, ""},
		{"no equals", []string{"A"}, 0, nil, "missing '='"},
		{"no name", []string{"=x"}, 0, nil, "name cannot be empty"},
		{"nul", []string{"A=x\x00y"}, 0, nil, "nul byte"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := prepareEnv(tc.env, tc.uid, self)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("prepareEnv = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestTrampolineMessage reads an encoded message back as trampoline.c
// does.
func TestTrampolineMessage(t *testing.T) {
	m := trampolineMessage{UID: 1000, GID: 1001, Groups: []uint32{5, 6}, Bounding: 1 << 5, Effective: 1 << 7,
		Permitted: 1<<5 | 1<<7, Ambient: 1 << 10, Hostname: "h", Cwd: "/w", Path: "/bin",
		Args: []string{"sh", "-c", "x"}, Env: []string{"A=1"}}
	data, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("BRT1")) {
		t.Fatalf("magic: %q", data[:4])
	}
	r := bytes.NewReader(data[4:])
	var hdr [6]uint32
	var caps [5]uint64
	groups := make([]uint32, 2)
	for _, v := range []any{&hdr, &caps, groups} {
		if err := binary.Read(r, binary.NativeEndian, v); err != nil {
			t.Fatal(err)
		}
	}
	rest := make([]byte, r.Len())
	_, _ = r.Read(rest)
	strs := strings.Split(strings.TrimSuffix(string(rest), "\x00"), "\x00")
	want := []string{"h", "/w", "/bin", "sh", "-c", "x", "A=1"}
	if hdr != [6]uint32{1000, 1001, 2, 3, 1, 0} || caps != [5]uint64{1 << 5, 1 << 7, 1<<5 | 1<<7, 0, 1 << 10} ||
		!slices.Equal(groups, []uint32{5, 6}) || !slices.Equal(strs, want) {
		t.Errorf("decoded %v %v %v %q", hdr, caps, groups, strs)
	}
	m.Args = []string{"a\x00b"}
	if _, err := m.encode(); err == nil {
		t.Error("a NUL byte in an argument was encoded")
	}
	m.Args = nil
	if _, err := m.encode(); err == nil {
		t.Error("an empty command was encoded")
	}
}

// TestCapMask: the masks of the capability names libcontainer applies.
func TestCapMask(t *testing.T) {
	if got, want := capMask([]string{"CAP_KILL", "CAP_AUDIT_WRITE", "CAP_NET_BIND_SERVICE", "CAP_NO_SUCH"}), uint64(0x20000420); got != want {
		t.Errorf("capMask = %#x, want %#x (runc's defaults, as /proc/self/status shows them)", got, want)
	}
}

// TestTrampolineStatus: what the trampoline writes after its start says
// whether it exec'd the task (a task that exits at once included).
func TestTrampolineStatus(t *testing.T) {
	for _, tc := range []struct {
		out, err string
		notFound bool
	}{
		{"x", "", false},
		{"", "ended without running it", false},
		{"notfound\texec: \"nope\": executable file not found in $PATH\n", "executable file not found", true},
		{"x" + "notfound\texec /bin/x: No such file or directory\n", "No such file", true},
		{"error\tsethostname: Operation not permitted\n", "sethostname", false},
	} {
		err := trampolineStatus([]byte(tc.out))
		if tc.err == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.out, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) || errors.Is(err, ErrCommandNotFound) != tc.notFound {
			t.Errorf("%q: %v, want %q (command not found %v)", tc.out, err, tc.err, tc.notFound)
		}
	}
}
