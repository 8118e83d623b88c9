package cli

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/transport"
)

// TestDemandCommands: brim demand against a master's HTTP API: bad input
// exits 1 with the master's message naming the field; ls, show and
// cancel of what is there; an unknown ID exits 1.
func TestDemandCommands(t *testing.T) {
	m, err := master.New(master.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(transport.New(m, transport.Options{}).Handler())
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	run := func(args ...string) (string, error) {
		root := &cobra.Command{Use: "brim", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(Commands()...)
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(append(args, "--master", addr))
		err := root.Execute()
		return out.String(), err
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"DemandID": "a", "Resources": "cpus:1", "Start": {"Time": ["NOW", "+5x"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = run("demand", "submit", "-f", bad)
	var ee ExitError
	if !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(ee.Msg, `Start.Time[1]: "+5x"`) {
		t.Fatalf("submit bad: %v %+v", err, ee)
	}
	_, err = run("demand", "submit", "-f", filepath.Join(dir, "missing.json"))
	if !errors.As(err, &ee) || ee.Code != 2 {
		t.Fatalf("submit missing file: %v", err)
	}
	out, err := run("demand", "ls")
	if err != nil || !strings.Contains(out, "DEMAND") || strings.Count(out, "\n") != 1 {
		t.Fatalf("ls: %v\n%s", err, out)
	}
	_, err = run("demand", "show", "nope")
	if !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(ee.Msg, "not found") {
		t.Fatalf("show unknown: %v %+v", err, ee)
	}
	_, err = run("demand", "cancel", "nope")
	if !errors.As(err, &ee) || ee.Code != 1 {
		t.Fatalf("cancel unknown: %v %+v", err, ee)
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"Resources": "cpus:1;mem:64"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = run("demand", "update", "nope", "-f", good)
	if !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(ee.Msg, "demand nope: demand not found") {
		t.Fatalf("update unknown: %v %+v", err, ee)
	}
	_, err = run("demand", "update", "nope", "-f", filepath.Join(dir, "missing.json"))
	if !errors.As(err, &ee) || ee.Code != 2 {
		t.Fatalf("update missing file: %v", err)
	}
	_, err = run("demand", "update", "-f", good)
	if !errors.As(err, &ee) || ee.Code != 2 {
		t.Fatalf("update without an ID: %v", err)
	}
}
