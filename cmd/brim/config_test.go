package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/brimnode/brim/internal/flagfile"
)

// reloadFrom reads the file again with the command line still winning,
// re-reads the secret file and names the changed keys a reload cannot
// apply.
func TestReloadFrom(t *testing.T) {
	dir := t.TempDir()
	secret, conf := filepath.Join(dir, "secret"), filepath.Join(dir, "agent.toml")
	write := func(p, text string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(secret, "s1\n")
	write(conf, "estimator = \"fixed\"\nestimator-opt = [\"resources=cpus:1;mem:64\"]\n")
	cmd := newAgentCommand()
	f := cmd.Flags()
	f.AddFlagSet(cmd.PersistentFlags())
	if err := f.Parse([]string{"--principal", "a1", "--secret-file", secret, "--kill-grace", "5s"}); err != nil {
		t.Fatal(err)
	}
	if err := flagfile.Apply(f, conf, notKeys...); err != nil { // as at start
		t.Fatal(err)
	}
	reload := reloadFrom(newAgentCommand, f, conf)

	write(secret, "s2\n")
	write(conf, "estimator = \"fixed\"\nestimator-opt = [\"resources=cpus:0.5;mem:32\"]\nqos = \"interference\"\n"+
		"log-level = \"debug\"\nkill-grace = \"3s\"\nsandbox-retention = \"5\"\n")
	r, err := reload()
	if err != nil {
		t.Fatal(err)
	}
	p := r.Plugins
	if p == nil || p.Estimator != "fixed" || !slices.Equal(p.EstimatorOpts, []string{"resources=cpus:0.5;mem:32"}) || p.QoS != "interference" {
		t.Errorf("plugins %+v", p)
	}
	if r.LogLevel != "debug" || r.Principal != "a1" || r.Secret != "s2" {
		t.Errorf("log level %q, principal %q, secret %q; want debug, a1, s2", r.LogLevel, r.Principal, r.Secret)
	}
	// kill-grace is on the command line (it wins): not a change.
	if !slices.Equal(r.Restart, []string{"--sandbox-retention"}) {
		t.Errorf("needs a restart: %v, want [--sandbox-retention]", r.Restart)
	}

	write(conf, "kill_grace = \"3s\"\n")
	if _, err := reload(); err == nil {
		t.Error("a file with an unknown key reloaded")
	}
}
