package osthread

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Go starts fn on an OS thread that is not the process's main thread and
// that ends when fn returns. It does not wait for fn.
func Go(fn func()) {
	go func() {
		// Never unlocked while fn runs on it: Go ends the thread with
		// this goroutine.
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			held := make(chan struct{})
			Go(func() { close(held); fn() })
			<-held // fn's goroutine is locked to another thread
			runtime.UnlockOSThread()
			return
		}
		fn()
	}()
}

// Run runs fn as Go does and returns its result.
func Run(fn func() error) error {
	ch := make(chan error, 1)
	Go(func() { ch <- fn() })
	return <-ch
}
