package executor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/brimnode/brim/internal/containerlog"
)

// output is a container's stdio: stdin reads /dev/null, stdout and stderr
// are pipes whose read ends the shim copies into the container's rotated
// log (LogDir). Pipes, not files the container writes itself: only the
// shim writes the log, so it can rotate it and bound it, and the files
// are out of the task's reach. The shim outlives the agent, so the
// copiers do too; a shim that dies takes its container with it (the
// containerizer kills what is left: ReasonShimLost).
type output struct {
	log     *containerlog.Writer
	stdin   *os.File
	child   [2]*os.File // the container's ends (stdout, stderr); nil once closed
	readers [2]*os.File
	copiers sync.WaitGroup
	started bool          // the copiers run
	copied  chan struct{} // closed once both copiers have returned
}

// openOutput creates the container's stdio and the log under dir, and
// starts the copiers (owned by the output: finish ends and waits for
// them).
func openOutput(dir string, lim containerlog.Limits) (*output, error) {
	o, err := openPipes()
	if err != nil {
		return nil, err
	}
	if err := o.startLog(dir, lim); err != nil {
		o.closeAll()
		return nil, err
	}
	return o, nil
}

// openPipes creates the container's stdio, without the log: a warm
// sandbox's, whose log starts at the claim (startLog), in the directory
// and with the limits of its container.
func openPipes() (_ *output, retErr error) {
	o := &output{copied: make(chan struct{})}
	defer func() {
		if retErr != nil {
			o.closeAll()
		}
	}()
	var err error
	if o.stdin, err = os.Open(os.DevNull); err != nil {
		return nil, fmt.Errorf("open stdin: %w", err)
	}
	for i := range o.readers {
		if o.readers[i], o.child[i], err = os.Pipe(); err != nil {
			return nil, fmt.Errorf("create output pipe: %w", err)
		}
	}
	return o, nil
}

// startLog creates the log under dir and starts the copiers.
func (o *output) startLog(dir string, lim containerlog.Limits) error {
	w, err := containerlog.Create(filepath.Join(dir, LogDir), lim)
	if err != nil {
		return fmt.Errorf("open container log: %w", err)
	}
	o.log = w
	for i, s := range []containerlog.Stream{containerlog.Stdout, containerlog.Stderr} {
		o.copiers.Add(1)
		go func() {
			defer o.copiers.Done()
			// A read error other than EOF is the read end closed by
			// finish: nothing left to copy.
			_ = w.Copy(s, o.readers[i])
		}()
	}
	o.started = true
	go func() { o.copiers.Wait(); close(o.copied) }()
	return nil
}

// closeChild closes the shim's copies of the container's ends, once the
// container holds its own (after Start): the copiers see EOF when the
// container's last process has gone.
func (o *output) closeChild() {
	if o.stdin != nil {
		o.stdin.Close()
		o.stdin = nil
	}
	for i, f := range o.child {
		if f != nil {
			f.Close()
			o.child[i] = nil
		}
	}
}

// finish waits up to wait for the copiers to read the container's output
// to its end, then closes the pipes and the log. It returns the log's
// Stats (Err joined with the close's).
func (o *output) finish(wait time.Duration) containerlog.Stats {
	o.closeChild()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-o.copied:
	case <-t.C:
		// A process that still holds the pipe (in uninterruptible
		// sleep): its output is cut here.
	}
	for _, r := range o.readers {
		if r != nil {
			r.Close()
		}
	}
	<-o.copied
	st := o.log.Stats()
	st.Err = errors.Join(st.Err, o.log.Close())
	return st
}

// closeAll releases everything of a launch that failed.
func (o *output) closeAll() {
	o.closeChild()
	for _, r := range o.readers {
		if r != nil {
			r.Close()
		}
	}
	if o.started {
		<-o.copied
	}
	if o.log != nil {
		_ = o.log.Close()
	}
}
