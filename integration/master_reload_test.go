package integration

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMasterCredentialsReload: `brim master --credentials F --acls A`
// reads both again on SIGHUP. An operator change with a rotated secret
// works at once and the old secret is refused; a principal added to the
// file and allowed by the new ACLs is let in; a reload of a broken file is
// logged and keeps what is in force; the master keeps serving throughout.
func TestMasterCredentialsReload(t *testing.T) {
	dir := t.TempDir()
	creds := writeTemp(t, dir, "creds.json", `[{"principal":"ops","secret":"s1"}]`)
	acls := writeTemp(t, dir, "acls.json", `{"permissive":true,"rules":[]}`)
	m := startMasterProc(t, "--credentials", creds, "--acls", acls)
	weights := func(principal, secret string) result {
		t.Helper()
		return runBrim(t, "weights", "--master", m.Addr, "--principal", principal, "--secret", secret, "web=2")
	}
	hangup := func(logged string) {
		t.Helper()
		if err := m.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, _ := os.ReadFile(m.logPath)
			if strings.Count(string(b), logged) > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("master log does not say %q after SIGHUP:\n%s", logged, b)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if r := weights("ops", "s1"); r.code != 0 {
		t.Fatalf("brim weights as ops: exit %d: %s", r.code, r.stderr)
	}

	writeTemp(t, dir, "creds.json", `[{"principal":"ops","secret":"s2"},{"principal":"ci","secret":"c1"}]`)
	writeTemp(t, dir, "acls.json", `{"permissive":false,"rules":[{"principals":["ops","ci"],"action":"set_weight","roles":["ANY"]}]}`)
	hangup("credentials reloaded")
	if r := weights("ops", "s1"); r.code != 1 || !strings.Contains(r.stderr, "ops") {
		t.Errorf("brim weights with ops's old secret after the reload: exit %d, want 1: %s", r.code, r.stderr)
	}
	for _, c := range [][2]string{{"ops", "s2"}, {"ci", "c1"}} {
		if r := weights(c[0], c[1]); r.code != 0 {
			t.Errorf("brim weights as %s after the reload: exit %d: %s", c[0], r.code, r.stderr)
		}
	}

	if err := os.WriteFile(filepath.Join(dir, "creds.json"), []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	hangup("the previous ones stay in force")
	if r := weights("ci", "c1"); r.code != 0 {
		t.Errorf("brim weights as ci after a failed reload: exit %d: %s", r.code, r.stderr)
	}
	select {
	case <-m.exited:
		t.Fatal("the master exited")
	default:
	}
}
