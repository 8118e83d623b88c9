package cgroups

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/brimnode/brim/internal/osthread"
)

// Moving a process into a v1 cgroup (writing its pid to cgroup.procs or
// tasks) takes the kernel's global cgroup_threadgroup_rwsem for writing.
// When nobody has taken it for a while, that first waits out a full RCU
// grace period (rcu_sync_enter): 6 ms median, up to 20 ms, on this kind
// of VM, against 0.1 ms for a move right after another one. Once taken
// and released, the lock stays in its slow mode (where writers do not
// wait) for one or two more grace periods.
//
// Warm takes that wait off a launch's critical path. The shim moves the
// container's init into its groups late, once the init has set the
// container up (executor: join_linux.go); from the moment the groups
// exist until the launch is done, one thread of the agent, moved into
// brim's own parent group of one hierarchy, re-attaches itself there (a
// no-op migration that takes the lock) every warmEvery. The first
// re-attach waits out the grace period while the shim starts the
// container; when the shim moves the init ≈ 25 ms later the lock is warm.
// A thread moving itself by writing "0" to tasks does not take the lock;
// that is how the primer gets there without paying for it.
//
// The waiting re-attach holds cgroup_mutex (every mkdir, rmdir and move
// on the host waits with it): the containerizer calls Warm after the
// isolators have made the container's groups, never before.
const warmEvery = 2 * time.Millisecond

// warmMax bounds one primer's life after the last Warm call, whatever
// its callers do (a variable for tests): a caller that keeps the lock
// warm for longer (the containerizer's warm sandboxes, which join a
// group at every claim) calls Warm again within it.
var warmMax = 2 * time.Second

// warmControllers are the hierarchies the primer thread may live in, in
// order of preference: the freezer's group has no accounting that a
// thread passing through could disturb.
var warmControllers = []string{"freezer", "cpuacct", "pids", "cpu"}

// Warm implements isolator.Warmer: it keeps the kernel's cgroup-attach
// lock warm until every returned done function has been called (or
// warmMax has passed). It does nothing on cgroup v2, where a thread
// cannot move on its own (a domain group takes whole processes) and
// libcontainer joins the init as its first step anyway, and when no
// primer can run (read-only cgroupfs, no parent): priming is an
// optimisation, never a condition of a launch.
func (i *Isolator) Warm() (done func()) {
	if i.version != V1 {
		return func() {}
	}
	if err := i.setup(); err != nil {
		return func() {}
	}
	i.warmMu.Lock()
	defer i.warmMu.Unlock()
	i.warmUsers++
	if i.warmStop != nil {
		select {
		case i.warmRenew <- struct{}{}:
		default: // a renewal is pending already
		}
	} else {
		tasks := ""
		for _, c := range warmControllers {
			if p := filepath.Join(i.dir(c, i.parent), "tasks"); exists(p) {
				tasks = p
				break
			}
		}
		if tasks == "" {
			i.warmUsers--
			return func() {}
		}
		stop, renew := make(chan struct{}), make(chan struct{}, 1)
		i.warmStop, i.warmRenew = stop, renew
		exited := func() {
			// Ended on its own (warmMax, a failed write): a later
			// launch starts a new one.
			i.warmMu.Lock()
			defer i.warmMu.Unlock()
			if i.warmStop == stop {
				i.warmStop = nil
			}
		}
		osthread.Go(func() { prime(tasks, stop, renew, exited) })
	}
	var once bool
	return func() {
		i.warmMu.Lock()
		defer i.warmMu.Unlock()
		if once {
			return
		}
		once = true
		if i.warmUsers--; i.warmUsers == 0 && i.warmStop != nil {
			close(i.warmStop)
			i.warmStop = nil
		}
	}
}

// prime runs on a thread of its own that ends with it (internal/osthread:
// it never returns to the Go scheduler's pool, and is never the main
// thread), so no other goroutine ever runs in brim's group: it moves the
// thread into the group whose tasks file is tasks, then re-attaches it
// there until stop closes, and calls exited when the priming ends. A
// value on renew restarts its warmMax.
func prime(tasks string, stop <-chan struct{}, renew <-chan struct{}, exited func()) {
	defer exited()
	f, err := os.OpenFile(tasks, os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.WriteString("0"); err != nil {
		return
	}
	self := []byte(strconv.Itoa(syscall.Gettid()))
	tick := time.NewTicker(warmEvery)
	defer tick.Stop()
	limit := time.NewTimer(warmMax)
	defer limit.Stop()
	for {
		if _, err := f.Write(self); err != nil {
			return
		}
		select {
		case <-stop:
			return
		case <-limit.C:
			return
		case <-renew:
			limit.Reset(warmMax)
		case <-tick.C:
		}
	}
}
