package integration

import (
	"crypto/tls"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

// garbageServer accepts connections on loopback and answers each with
// bytes that are neither HTTP/2 nor TLS (and reads what the client sends
// until it hangs up), until the test ends.
func garbageServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.WriteString(c, strings.Repeat("garbage, not a master\r\n", 20))
				_ = c.SetReadDeadline(time.Now().Add(time.Minute))
				_, _ = io.Copy(io.Discard, c) // until the client hangs up
			}()
		}
	}()
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return l.Addr().String()
}

// TestRunFailsClearly: brim run does not wait forever. Against a master
// that is not there, a server that is not a master, and a TLS master
// without --master-ca it says what it waits for and exits 1 with the
// reason once --timeout passes; a task ID the master refuses (invalid, or
// in use) ends it at once; a task no agent can fit ends it after
// --timeout naming the largest free resources offered. (Before, every
// one of these waited until killed.)
func TestRunFailsClearly(t *testing.T) {
	testutil.RequireRoot(t)
	noCgroup := "/" + testutil.UniqueName("brim-test")
	closed := testutil.FreeAddr(t)

	for _, tc := range []struct {
		name, addr string
		want       []string
	}{
		{"unreachable", closed, []string{"cannot reach the master at " + closed, "connection refused"}},
		{"garbage", garbageServer(t), []string{"cannot reach the master at ", "error reading server preface"}},
	} {
		r := runBrimBounded(t, noCgroup, "run", "--master", tc.addr, "--timeout", "3s", "--", "true")
		if r.code != 1 {
			t.Errorf("%s master: exit %d, want 1:\n%s%s", tc.name, r.code, r.stdout, r.stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s master: stderr does not say %q:\n%s", tc.name, w, r.stderr)
			}
		}
		if !strings.Contains(r.stdout, "waiting for the master at "+tc.addr) {
			t.Errorf("%s master: brim run did not say what it waits for:\n%s", tc.name, r.stdout)
		}
	}

	pki := newTestPKI(t, t.TempDir(), "ca")
	tm := startMasterWith(t, &tls.Config{RootCAs: pki.pool}, "--tls-cert", pki.cert, "--tls-key", pki.key)
	r := runBrimBounded(t, noCgroup, "run", "--master", tm.Addr, "--timeout", "3s", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "the master serves TLS") || !strings.Contains(r.stderr, "--master-ca") {
		t.Errorf("TLS master without --master-ca: exit %d, want 1 saying it serves TLS:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runBrimBounded(t, noCgroup, "state", "--master", tm.Addr)
	if r.code != 1 || !strings.Contains(r.stderr, "the master serves TLS") {
		t.Errorf("brim state against a TLS master without --master-ca: exit %d, want 1 saying it serves TLS:\n%s%s", r.code, r.stdout, r.stderr)
	}

	m := startMasterProc(t)
	startLinkedAgent(t, m.Addr)
	waitState(t, m.Addr, "the agent", func(st masterState) bool { return len(st.Agents) == 1 && st.Agents[0].Connected })

	r = runBrimBounded(t, noCgroup, "run", "--master", m.Addr, "--task-id", "bad/id", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "the master refused to launch") || !strings.Contains(r.stderr, `task ID "bad/id"`) {
		t.Errorf("invalid task ID: exit %d, want 1 with the master's reason:\n%s%s", r.code, r.stdout, r.stderr)
	}

	busy := startRun(t, m.Addr, "--task-id", "busy", "--cpus", "0.1", "--mem", "32", "--", "sleep", "300")
	busy.waitLine(t, "RUNNING")
	r = runBrimBounded(t, noCgroup, "run", "--master", m.Addr, "--task-id", "busy", "--cpus", "0.1", "--mem", "32", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, `task ID "busy" is in use`) {
		t.Errorf("task ID in use: exit %d, want 1 with the master's reason:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := busy.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := busy.wait(t); code == 0 {
		t.Errorf("interrupted task: brim run exit 0:\n%s", busy.output())
	}

	r = runBrimBounded(t, noCgroup, "run", "--master", m.Addr, "--cpus", "64", "--mem", "32", "--timeout", "5s", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "no agent can fit cpus:64;mem:32") || !strings.Contains(r.stderr, "the largest free resources offered: cpus 2 on agent ") {
		t.Errorf("unfittable task: exit %d, want 1 naming the largest free resources:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "waiting for an offer that fits cpus:64;mem:32") || !strings.Contains(r.stdout, "does not fit cpus:64;mem:32") {
		t.Errorf("unfittable task: brim run did not say what it waits for:\n%s", r.stdout)
	}
	for _, task := range getState(t, m.Addr).Tasks {
		if task.ID != "busy" {
			t.Errorf("task %s (%s) left in the master's state by a run that gave up", task.ID, task.State)
		}
	}
}
