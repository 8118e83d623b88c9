package server_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/master/boltstore"
	"github.com/brimnode/brim/master/server"
)

// TestStart: Start assembles a master that answers on its port, reloads
// on its Reload channel, and stops with its context.
func TestStart(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reload := make(chan os.Signal, 1)
	r, err := server.Start(ctx, server.Config{Listen: "127.0.0.1:0", StateDir: filepath.Join(dir, "state"), Reload: reload})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Get("http://" + r.Addr.String() + "/state")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /state: %s", resp.Status)
	}
	reload <- syscall.SIGHUP // no credentials: logged, the master goes on
	cancel()
	if err := r.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "master.db")); err != nil {
		t.Fatal(err)
	}
}

// TestStartFailsClean: a master that cannot listen leaves its store
// closed (before, startMaster left the bbolt file open and locked).
func TestStartFailsClean(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	state := filepath.Join(t.TempDir(), "state")
	if _, err := server.Start(context.Background(), server.Config{Listen: busy.Addr().String(), StateDir: state}); err == nil {
		t.Fatal("Start on a busy port succeeded")
	}
	st, err := boltstore.Open(filepath.Join(state, "master.db"))
	if err != nil {
		t.Fatalf("store still locked after the failed Start: %v", err)
	}
	st.Close()
	if _, err := server.Start(context.Background(), server.Config{Listen: "127.0.0.1:0", StateDir: "relative"}); err == nil {
		t.Fatal("relative state dir accepted")
	}
}
