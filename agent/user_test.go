package agent

import (
	"context"
	"errors"
	"os/user"
	"strings"
	"testing"

	"github.com/brimnode/brim/internal/subid"
	"github.com/brimnode/brim/internal/testutil"
)

// TestTaskUser (issue 13): a container runs as the default user (nobody)
// unless it names one; root is refused without AllowRoot, at launch and
// as the default, and allowed with it.
func TestTaskUser(t *testing.T) {
	nobody, err := user.Lookup("nobody")
	testutil.Require(t, err == nil, "no user nobody on this host")
	ctx := context.Background()
	res := Resources{MilliCPUs: 4000, MemMiB: 4096}
	dir := t.TempDir()
	rt := newFakeRuntime(t.TempDir())
	a := newTestAgent(t, rt, dir, res, Retention{})

	c, err := a.Launch(ctx, spec("plain", 100, 10))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rt.containers[c.ID].spec.User, nobody.Uid+":"+nobody.Gid; got != want || c.User != "nobody" {
		t.Errorf("default user: runtime got %q (want %q), container says %q", got, want, c.User)
	}
	for _, u := range []string{"root", "0", "0:0"} {
		s := spec("", 100, 10)
		s.User = u
		_, err := a.Launch(ctx, s)
		if !errors.Is(err, ErrRootNotAllowed) {
			t.Errorf("launch as %q without AllowRoot: %v, want ErrRootNotAllowed", u, err)
		}
	}
	s := spec("", 100, 10)
	s.User = "no-such-user-brim"
	if _, err := a.Launch(ctx, s); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("launch as an unknown user: %v, want ErrInvalidArgument", err)
	}
	if n := len(rt.containers); n != 1 {
		t.Errorf("%d containers reached the runtime, want only the first", n)
	}
	a.Close()

	if _, err := New(Options{StateDir: t.TempDir(), Runtime: rt, Resources: res, DefaultUser: "root"}); !errors.Is(err, ErrRootNotAllowed) {
		t.Errorf("New with default user root without AllowRoot: %v, want ErrRootNotAllowed", err)
	}
	b, err := New(Options{StateDir: t.TempDir(), Runtime: rt, Resources: res, AllowRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	s = spec("root-ok", 100, 10)
	s.User = "root"
	c, err = b.Launch(ctx, s)
	if err != nil {
		t.Fatalf("launch as root with AllowRoot: %v", err)
	}
	if got := rt.containers[c.ID].spec.User; got != "0:0" {
		t.Errorf("root launch: runtime got user %q, want 0:0", got)
	}
}

// TestTaskUserNS (issue 13): a launch with RunAsRoot (the master's
// run_as_root ACL) may run as root on an agent without AllowRoot; in a
// user namespace root needs neither, the runtime gets the range, and a
// user outside the range is refused; a user namespace without a range
// is refused, as is Options.UserNS without one.
func TestTaskUserNS(t *testing.T) {
	ctx := context.Background()
	res := Resources{MilliCPUs: 4000, MemMiB: 4096}
	rt := newFakeRuntime(t.TempDir())
	r := &subid.Range{HostUID: 100000, HostGID: 100000, Size: 65536}
	a, err := New(Options{StateDir: t.TempDir(), Runtime: rt, Resources: res, UserNSRange: r})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	s := spec("acl-root", 100, 10)
	s.User, s.RunAsRoot = "root", true
	c, err := a.Launch(ctx, s)
	if err != nil {
		t.Fatalf("launch as root with RunAsRoot: %v", err)
	}
	if got := rt.containers[c.ID].spec; got.User != "0:0" || got.UserNS != nil {
		t.Errorf("RunAsRoot launch: runtime got user %q userns %v, want 0:0 without one", got.User, got.UserNS)
	}
	s = spec("ns-root", 100, 10)
	s.User, s.UserNS = "root", true
	c, err = a.Launch(ctx, s)
	if err != nil {
		t.Fatalf("launch as root in a user namespace: %v", err)
	}
	if got := rt.containers[c.ID].spec; got.User != "0:0" || got.UserNS == nil || *got.UserNS != *r || !c.UserNS {
		t.Errorf("userns launch: runtime got user %q userns %v (container userns %v), want 0:0 in %v", got.User, got.UserNS, c.UserNS, r)
	}
	s = spec("", 100, 10)
	s.User, s.UserNS = "70000:70000", true
	if _, err := a.Launch(ctx, s); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "outside") {
		t.Errorf("launch as a user outside the range: %v, want ErrInvalidArgument", err)
	}
	if n := len(rt.containers); n != 2 {
		t.Errorf("%d containers reached the runtime, want 2", n)
	}

	noRange, err := New(Options{StateDir: t.TempDir(), Runtime: rt, Resources: res})
	if err != nil {
		t.Fatal(err)
	}
	defer noRange.Close()
	if err := noRange.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	s = spec("", 100, 10)
	s.UserNS = true
	if _, err := noRange.Launch(ctx, s); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "--userns-range") {
		t.Errorf("userns launch without a range: %v, want ErrInvalidArgument naming --userns-range", err)
	}
	if _, err := New(Options{StateDir: t.TempDir(), Runtime: rt, Resources: res, UserNS: true}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("New with UserNS and no range: %v, want ErrInvalidArgument", err)
	}
	// Every container in a namespace: a root default user is fine.
	all, err := New(Options{StateDir: t.TempDir(), Runtime: rt, Resources: res, UserNS: true, UserNSRange: r, DefaultUser: "root"})
	if err != nil {
		t.Fatalf("New with UserNS and default user root: %v", err)
	}
	all.Close()
}
