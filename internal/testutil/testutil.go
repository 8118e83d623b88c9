package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true), where privileged tests
// must fail instead of skipping.
func InCI() bool { return os.Getenv("CI") == "true" }

// RequireRoot skips t when the test does not run as root, except in CI,
// where it fails: a kernel test must never skip silently there.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if InCI() {
		t.Fatal("this test needs root and CI=true: refusing to skip")
	}
	t.Skip("needs root (run `make test` as root)")
}

// Require skips t with reason when ok is false, except in CI, where it
// fails. Use it for host features a test needs (a binary, a kernel feature).
func Require(t testing.TB, ok bool, reason string) {
	t.Helper()
	if ok {
		return
	}
	if InCI() {
		t.Fatalf("missing in CI: %s", reason)
	}
	t.Skip(reason)
}

// SkipUnless skips t with reason when ok is false, in CI too. Use it only for
// what the CI machine legitimately lacks (e.g. a cgroup v2 host on a v1
// machine), never for root or for packages that make installs.
func SkipUnless(t testing.TB, ok bool, reason string) {
	t.Helper()
	if !ok {
		t.Skip(reason)
	}
}

// UniqueName returns prefix-<8 hex chars>, for kernel objects shared
// machine-wide (cgroups, namespaces, links) so parallel tests never collide.
// Link names must stay within 15 bytes: keep prefix ≤ 6 bytes for those.
func UniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// FreeAddr is a loopback address with a port nothing listens on right
// now: a connection to it is refused (as to a killed server's port),
// and a server may listen there.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// DirNames lists the names in dir, sorted (os.ReadDir's order); a dir
// that cannot be read fails t.
func DirNames(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
