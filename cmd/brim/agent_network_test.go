package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCheckNetworkState(t *testing.T) {
	dir := t.TempDir()
	if err := checkNetworkState(dir, false); err != nil {
		t.Errorf("empty state dir: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "network"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "network", "abc.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkNetworkState(dir, false); err == nil {
		t.Error("agent without --network accepted over networked containers")
	}
	if err := checkNetworkState(dir, true); err != nil {
		t.Errorf("with --network: %v", err)
	}
}

func TestNetworkFlagsConfig(t *testing.T) {
	n := networkFlags{bridge: "brim0", subnet: "10.77.0.0/16", hostRate: 1000}
	cfg, err := n.config("/var/lib/brim/agent")
	if err != nil || cfg.StateDir != "/var/lib/brim/agent/network" || cfg.Subnet.String() != "10.77.0.0/16" || cfg.HostRateMbit != 1000 {
		t.Errorf("config: %+v, %v", cfg, err)
	}
	for _, bad := range []networkFlags{{subnet: "10.77.0.0", hostRate: 1}, {subnet: "10.77.0.0/16", hostRate: 0}} {
		if _, err := bad.config("/x"); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
