package procalive

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestRuns(t *testing.T) {
	if !Runs(os.Getpid()) {
		t.Fatal("this process does not run")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !Runs(pid) {
		t.Fatal("a sleeping child does not run")
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	// Not yet reaped: a zombie, which runs no more.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		_ = cmd.Wait()
		t.Fatal(err)
	}
	if Runs(pid) {
		t.Error("a zombie runs")
	}
	_ = cmd.Wait()
	if Runs(pid) {
		t.Error("a reaped process runs")
	}
}
