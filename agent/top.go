package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/brimnode/brim/internal/hostuser"
)

// Process is one process of a container, as the host's /proc shows it
// (brim container top).
type Process struct {
	Pid, PPid int
	// UID is the real uid on the host; User its name in the host's
	// /etc/passwd ("" without an entry).
	UID  uint32
	User string
	// CPU is the user and system time so far.
	CPU time.Duration
	// State is the kernel's one-letter state (R, S, D, T, Z, …).
	State string
	// Args is the command line; empty for a zombie or a kernel thread,
	// which Comm names.
	Args []string
	Comm string
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on
// every Linux architecture brim builds for.
const clockTicks = 100

// Top lists the processes in running container ref's cgroup (its group
// and the groups below it), by pid. A process that exits while it is read
// is left out. Errors wrap ErrNotFound, ErrNotRunning or ErrNotSupported
// (no cgroup lister).
func (a *Agent) Top(ctx context.Context, ref string) ([]Process, error) {
	if a.opts.Cgroups == nil {
		return nil, fmt.Errorf("top: %w: the agent cannot list a container's processes", ErrNotSupported)
	}
	c, err := a.Get(ref)
	if err != nil {
		return nil, fmt.Errorf("top: %w", err)
	}
	if c.State != StateRunning {
		return nil, fmt.Errorf("top %s: %w", c.ID, ErrNotRunning)
	}
	pids, err := a.opts.Cgroups.PIDs(ctx, c.ID)
	if err != nil {
		return nil, fmt.Errorf("top %s: %w", c.ID, err)
	}
	return readProcesses("/proc", "/", pids), nil
}

// readProcesses reads pids from procRoot, naming their users from root's
// /etc/passwd; processes gone meanwhile are left out. Sorted by pid.
func readProcesses(procRoot, root string, pids []int) []Process {
	names := map[uint32]string{}
	out := make([]Process, 0, len(pids))
	for _, pid := range pids {
		p, err := readProcess(procRoot, pid)
		if err != nil {
			continue // exited between the cgroup's list and now
		}
		name, ok := names[p.UID]
		if !ok {
			name, _ = hostuser.Name(root, p.UID)
			names[p.UID] = name
		}
		p.User = name
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pid < out[j].Pid })
	return out
}

// readProcess reads one process's stat, status and cmdline under
// procRoot.
func readProcess(procRoot string, pid int) (Process, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return Process{}, err
	}
	p, err := parseStat(stat)
	if err != nil {
		return Process{}, fmt.Errorf("%s: %w", filepath.Join(dir, "stat"), err)
	}
	p.Pid = pid
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return Process{}, err
	}
	if p.UID, err = parseUID(status); err != nil {
		return Process{}, fmt.Errorf("%s: %w", filepath.Join(dir, "status"), err)
	}
	cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return Process{}, err
	}
	if cmdline = bytes.TrimRight(cmdline, "\x00"); len(cmdline) > 0 {
		p.Args = strings.Split(string(cmdline), "\x00")
	}
	return p, nil
}

// parseStat reads comm, state, ppid and the cpu times of a
// /proc/PID/stat line. comm is between the first '(' and the last ')':
// it may hold spaces and parentheses itself.
func parseStat(b []byte) (Process, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return Process{}, errors.New("no (comm)")
	}
	f := strings.Fields(string(b[end+1:]))
	// After comm: state(0) ppid(1) … utime(11) stime(12).
	if len(f) < 13 {
		return Process{}, fmt.Errorf("%d fields after comm, want at least 13", len(f))
	}
	ppid, err1 := strconv.Atoi(f[1])
	utime, err2 := strconv.ParseInt(f[11], 10, 64)
	stime, err3 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Process{}, err
	}
	return Process{
		Comm: string(b[open+1 : end]), State: f[0], PPid: ppid,
		CPU: time.Duration(utime+stime) * time.Second / clockTicks,
	}, nil
}

// parseUID reads the real uid of a /proc/PID/status.
func parseUID(b []byte) (uint32, error) {
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			n, err := strconv.ParseUint(f[0], 10, 32)
			return uint32(n), err
		}
	}
	return 0, errors.New("no Uid line")
}
