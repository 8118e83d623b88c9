package master_test

import (
	"errors"
	"testing"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/transport"
)

// run_as_root and exec_tasks are allowed only by a rule that names them:
// not without an ACL file, not by a permissive one.
func TestRunAsRootOnlyByRule(t *testing.T) {
	for _, action := range []string{transport.ActionRunAsRoot, transport.ActionExecTasks} {
		t.Run(action, func(t *testing.T) { testOnlyByRule(t, action) })
	}
}

func testOnlyByRule(t *testing.T, action string) {
	dir := t.TempDir()
	creds := writeFile(t, dir, "creds.json", `[{"principal":"ops","secret":"s"},{"principal":"dev","secret":"s"}]`)
	cases := []struct {
		name, acls  string
		principal   string
		role        string
		wantAllowed bool
	}{
		{"no ACL file", "", "ops", "ads", false},
		{"permissive ACLs", `{"permissive":true,"rules":[]}`, "ops", "ads", false},
		{"a rule for the principal and role", `{"rules":[{"principals":["ops"],"action":"` + action + `","roles":["ads"]}]}`, "ops", "ads", true},
		{"a rule for another role", `{"rules":[{"principals":["ops"],"action":"` + action + `","roles":["web"]}]}`, "ops", "ads", false},
		{"a rule for another principal", `{"rules":[{"principals":["ops"],"action":"` + action + `","roles":["ANY"]}]}`, "dev", "ads", false},
		{"ANY", `{"rules":[{"principals":["ANY"],"action":"` + action + `","roles":["ANY"]}]}`, "dev", "web", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			acls := ""
			if tc.acls != "" {
				acls = writeFile(t, t.TempDir(), "acls.json", tc.acls)
			}
			a, err := transport.LoadAuth(creds, acls)
			if err != nil {
				t.Fatal(err)
			}
			err = a.Authorize(tc.principal, action, tc.role)
			if tc.wantAllowed && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.wantAllowed && !errors.Is(err, master.ErrForbidden) {
				t.Fatalf("err %v, want ErrForbidden", err)
			}
			// Other actions keep their defaults.
			if tc.acls == "" || tc.name == "permissive ACLs" {
				if err := a.Authorize(tc.principal, transport.ActionReserve, tc.role); err != nil {
					t.Errorf("reserve refused: %v", err)
				}
			}
		})
	}
}
