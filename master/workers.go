package master

import (
	"runtime"
	"time"
)

// workers runs functions on a few goroutines that outlive them, so that
// the stack each grew is used again. An agent's registration runs deep
// (decoding its resources, the allocator, the demand plan, the store):
// run on a goroutine of its own, each one grew a fresh 2 KiB stack step
// by step (copying it each time) — a fifth of the new leader's CPU when
// 50,000 agents re-registered after a failover. Run on the stream's own
// goroutine instead, every stream kept the large stack for its life.
//
// At most max run at once; the rest wait for one. A worker ends after
// idle without work: the pool owns its goroutines and needs no Stop.
type workers struct {
	jobs chan func() // unbuffered: taken by an idle worker
	sem  chan struct{}
	idle time.Duration
}

func newWorkers(max int, idle time.Duration) *workers {
	return &workers{jobs: make(chan func()), sem: make(chan struct{}, max), idle: idle}
}

// newRegistrationWorkers: registrations contend for the master's lock,
// so a few per CPU keep it busy.
func newRegistrationWorkers() *workers { return newWorkers(2*runtime.GOMAXPROCS(0), 10*time.Second) }

// do runs f on a worker and returns when it is done.
func (w *workers) do(f func()) {
	done := make(chan struct{})
	job := func() { defer close(done); f() }
	select {
	case w.jobs <- job: // an idle worker
	default:
		select {
		case w.sem <- struct{}{}:
			go w.work(job)
		case w.jobs <- job:
		}
	}
	<-done
}

// work runs job, then the jobs an idle worker gets, until idle passes
// without one.
func (w *workers) work(job func()) {
	defer func() { <-w.sem }()
	t := time.NewTimer(w.idle)
	defer t.Stop()
	for {
		job()
		t.Reset(w.idle)
		select {
		case job = <-w.jobs:
		case <-t.C:
			return
		}
	}
}
