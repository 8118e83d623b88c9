package executor

import (
	"strings"
	"testing"
)

const initStatus = `Name:	sleep
Uid:	65534	65534	65534	65534
Gid:	65534	65534	65534	65534
CapInh:	0000000000000000
CapPrm:	0000000000000000
CapEff:	0000000000000000
CapBnd:	0000000020000420
CapAmb:	0000000000000000
NoNewPrivs:	1
Seccomp:	2
Seccomp_filters:	1
`

// TestBeyond: an exec is refused for any privilege the container's init
// lacks — a capability in any set, no_new_privs off, a weaker seccomp,
// root where the init is not — and allowed at or below the init.
func TestBeyond(t *testing.T) {
	init, err := parseStatus(strings.NewReader(initStatus))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, from, to string
		want           string // "" : allowed
	}{
		{"the same", "", "", ""},
		{"fewer bounding", "CapBnd:	0000000020000420", "CapBnd:	0000000000000400", ""},
		{"effective cap_sys_admin", "CapEff:	0000000000000000", "CapEff:	0000000000200000", "effective capabilities cap_sys_admin"},
		{"bounding cap_net_raw", "CapBnd:	0000000020000420", "CapBnd:	0000000020002420", "bounding capabilities cap_net_raw"},
		{"ambient", "CapAmb:	0000000000000000", "CapAmb:	0000000000000020", "ambient capabilities cap_kill"},
		{"no_new_privs off", "NoNewPrivs:	1", "NoNewPrivs:	0", "no_new_privs off"},
		{"no seccomp", "Seccomp:	2", "Seccomp:	0", "seccomp mode 0"},
		{"fewer filters", "Seccomp_filters:	1", "Seccomp_filters:	0", "0 seccomp filters"},
		{"root", "Uid:	65534	65534	65534	65534", "Uid:	65534	0	65534	65534", "root (uid 0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exec, err := parseStatus(strings.NewReader(strings.Replace(initStatus, tc.from, tc.to, 1)))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(beyond(exec, init), "; ")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("beyond = %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := parseStatus(strings.NewReader("Name:	x\nCapEff:	zz\n")); err == nil {
		t.Error("parseStatus of a bad capability set: no error")
	}
	if _, err := parseStatus(strings.NewReader("Name:	x\n")); err == nil {
		t.Error("parseStatus without the privilege fields: no error")
	}
}

func TestCapBits(t *testing.T) {
	set, err := capBits([]string{"CAP_KILL", "CAP_NET_BIND_SERVICE", "CAP_AUDIT_WRITE"})
	if err != nil || set != 0x20000420 {
		t.Fatalf("capBits = %#x, %v; want 0x20000420", set, err)
	}
	if _, err := capBits([]string{"CAP_NOPE"}); err == nil {
		t.Fatal("capBits of an unknown name: no error")
	}
	if got := capNames(0x200000 | 1<<60); got != "cap_sys_admin,cap_60" {
		t.Fatalf("capNames = %q", got)
	}
}
