package transport

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/brimnode/brim/master"
)

// TestReloadableAuth: a reload puts new secrets, principals and ACLs in
// force at once; a reload of a bad file fails and keeps the previous.
func TestReloadableAuth(t *testing.T) {
	dir := t.TempDir()
	creds, acls := filepath.Join(dir, "creds.json"), filepath.Join(dir, "acls.json")
	write := func(p, text string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(creds, `[{"principal":"ops","secret":"s1"}]`)
	write(acls, `{"permissive":true,"rules":[]}`)
	r, err := NewReloadableAuth(creds, acls)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AuthenticateSecret("ops", "s1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Authorize("ops", ActionReserve, "web"); err != nil {
		t.Fatal(err)
	}

	write(creds, `[{"principal":"ops","secret":"s2"},{"principal":"ci","secret":"c1"}]`)
	write(acls, `{"permissive":false,"rules":[{"principals":["ci"],"action":"reserve","roles":["ANY"]}]}`)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := r.AuthenticateSecret("ops", "s1"); !errors.Is(err, master.ErrUnauthenticated) {
		t.Errorf("old secret after reload: %v, want ErrUnauthenticated", err)
	}
	for _, c := range [][2]string{{"ops", "s2"}, {"ci", "c1"}} {
		if err := r.AuthenticateSecret(c[0], c[1]); err != nil {
			t.Errorf("%s after reload: %v", c[0], err)
		}
	}
	if err := r.Authorize("ops", ActionReserve, "web"); !errors.Is(err, master.ErrForbidden) {
		t.Errorf("ops reserving after the ACLs changed: %v, want ErrForbidden", err)
	}
	if err := r.Authorize("ci", ActionReserve, "web"); err != nil {
		t.Errorf("ci reserving: %v", err)
	}
	if r.Principals() != 2 {
		t.Errorf("%d principals, want 2", r.Principals())
	}

	for _, bad := range []string{`[{"principal":"","secret":"x"}]`, `not json`} {
		write(creds, bad)
		if err := r.Reload(); err == nil {
			t.Errorf("reload of %q did not fail", bad)
		}
		if err := r.AuthenticateSecret("ci", "c1"); err != nil {
			t.Errorf("after a failed reload the previous credentials are gone: %v", err)
		}
	}
	if err := os.Remove(acls); err != nil {
		t.Fatal(err)
	}
	write(creds, `[{"principal":"ci","secret":"c1"}]`)
	if err := r.Reload(); err == nil {
		t.Error("reload with the ACL file gone did not fail")
	}
}
