package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
)

// TestMasterStoreRecovery (issue 14): `brim master` backs its store up at
// start; an emptied or garbage master.db makes it exit with an error
// naming the file and the recovery commands (before: a 0-byte file
// started empty, losing the weights, and garbage pages panicked);
// `brim master restore` refuses while the master runs and brings the
// backup back once it is stopped.
func TestMasterStoreRecovery(t *testing.T) {
	m := startMasterProc(t)
	if r := runBrim(t, "weights", "--master", m.Addr, "ads=3"); r.code != 0 {
		t.Fatalf("brim weights: exit %d: %s", r.code, r.stderr)
	}
	db := filepath.Join(m.StateDir, "master.db")
	// The backup at start holds no weight; take one with it: restart.
	m.stop()
	m.start()
	var backups []string
	eventually(t, "two backups", func() bool {
		backups, _ = filepath.Glob(filepath.Join(m.StateDir, "backups", "master-*.db"))
		return len(backups) == 2
	})
	if r := runBrim(t, "master", "restore", "--from", backups[1], "--state-dir", m.StateDir); r.code == 0 || !strings.Contains(r.stderr, "stop it first") {
		t.Fatalf("restore under a running master: exit %d: %s", r.code, r.stderr)
	}
	m.stop()

	noCgroup := "/" + testutil.UniqueName("brim-test")
	size := func() int64 { fi, _ := os.Stat(db); return fi.Size() }
	good, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	garbage := append([]byte(nil), good...)
	for i := 2 * 4096; i < len(garbage); i++ {
		garbage[i] = byte(i*31) ^ 0xa5
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{{"empty", nil}, {"garbage pages", garbage}} {
		if err := os.WriteFile(db, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		r := runBrimBounded(t, noCgroup, "master", "--listen", testutil.FreeAddr(t), "--state-dir", m.StateDir)
		if r.code == 0 || !strings.Contains(r.stderr, db) || !strings.Contains(r.stderr, "brim master restore") ||
			strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
			t.Fatalf("%s master.db: exit %d: %s", tc.name, r.code, r.stderr)
		}
		if size() != int64(len(tc.data)) {
			t.Fatalf("%s: the refused file changed", tc.name)
		}
	}
	if r := runBrim(t, "master", "restore", "--from", backups[1], "--state-dir", m.StateDir); r.code != 0 {
		t.Fatalf("restore: exit %d: %s", r.code, r.stderr)
	}
	m.start()
	if r := runBrim(t, "weights", "--master", m.Addr); r.code != 0 || !strings.Contains(r.stdout, "ads") || !strings.Contains(r.stdout, "3") {
		t.Fatalf("weights after restore: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
}
