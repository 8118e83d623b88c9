package agentserver

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/agent"
)

// listenHelperEnv makes the test binary the helper of
// TestListenReplacesAListenerWhoseAgentDied: it listens on the socket the
// variable names, hands the listener to a child that never accepts,
// prints the child's PID and exits.
const listenHelperEnv = "BRIM_TEST_LISTEN_HELPER"

func TestMain(m *testing.M) {
	if path := os.Getenv(listenHelperEnv); path != "" {
		os.Exit(listenHelper(path))
	}
	os.Exit(m.Run())
}

func listenHelper(path string) int {
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return 1
	}
	f, err := l.File()
	if err != nil {
		return 1
	}
	holder := exec.Command("sleep", "600")
	holder.ExtraFiles = []*os.File{f}
	if err := holder.Start(); err != nil {
		return 1
	}
	_, _ = os.Stdout.WriteString(strconv.Itoa(holder.Process.Pid) + "\n")
	return 0
}

// An agent killed -9 while it forked a child leaves its listening socket
// in that child until the child's exec: a connection to the socket then
// succeeds, queued on a listener nobody accepts. Listen must take the
// socket as stale, since the process that listened is gone, and not
// refuse to start with "another agent is running" (seen in CI: an agent
// restarted right after a kill -9 that landed during a warm shim's fork).
func TestListenReplacesAListenerWhoseAgentDied(t *testing.T) {
	sock := socketPath(t)
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		t.Fatal(err)
	}
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), listenHelperEnv+"="+sock)
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	waitErr := helper.Wait()
	pid, convErr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || waitErr != nil || convErr != nil {
		t.Fatalf("listen helper: %q, %v, %v, %v", line, err, waitErr, convErr)
	}
	t.Cleanup(func() {
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Signal(syscall.SIGKILL)
			_, _ = p.Wait()
		}
	})
	// The dead helper's listener still takes connections (its child holds it).
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		t.Fatalf("the held listener takes no connection: %v", err)
	}
	c.Close()

	l, err := Listen(sock)
	if errors.Is(err, agent.ErrAgentRunning) {
		t.Fatalf("Listen on a socket whose agent died: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// And a live listener is still refused.
	if _, err := Listen(sock); !errors.Is(err, agent.ErrAgentRunning) {
		t.Fatalf("second listener on a live socket: %v", err)
	}
}
