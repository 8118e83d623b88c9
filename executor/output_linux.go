package executor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/internal/containerlog"
)

// output is a container's stdio: stdin reads /dev/null (or, with
// Bundle.Stdin, a pipe whose write end attach sessions write into), stdout
// and stderr are pipes whose read ends the shim copies into the
// container's rotated log (LogDir). With Bundle.Tty the container has a
// terminal instead, made by libcontainer's init in the container's
// /dev/pts and sent to the shim (consoleSocket): the shim holds its
// master, copies what it reads there into the log as stdout (a terminal
// has one output: what the container writes and the echo of what is
// typed), writes attach sessions' input into it and sets its size.
// Pipes, not files the container writes itself: only the shim writes the
// log, so it can rotate it and bound it, and the files are out of the
// task's reach. The shim outlives the agent, so the
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

	// consoleSocket is the init's end of the socket its terminal comes
	// over (Tty), console the shim's, until the terminal is received.
	consoleSocket, console *os.File
	ttySize                TermSize

	inMu   sync.Mutex
	stdinW *os.File // the write end of a Stdin pipe; nil once closed
	master *os.File // the terminal's master (Tty), once received
}

// stdioMode is the container's stdin and terminal (Bundle.Stdin, Tty).
type stdioMode struct {
	Stdin, Tty bool
	Size       TermSize
}

// openOutput creates the container's stdio and the log under dir, and
// starts the copiers (owned by the output: finish ends and waits for
// them).
func openOutput(dir string, lim containerlog.Limits, mode stdioMode) (*output, error) {
	o, err := openPipes(mode)
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
// and with the limits of its container. A warm sandbox has neither stdin
// nor terminal (Bundle.Validate): they are made with the init.
func openPipes(mode stdioMode) (_ *output, retErr error) {
	o := &output{copied: make(chan struct{})}
	defer func() {
		if retErr != nil {
			o.closeAll()
		}
	}()
	if mode.Tty {
		return o, o.openConsole(mode.Size)
	}
	var err error
	if mode.Stdin {
		if o.stdin, o.stdinW, err = os.Pipe(); err != nil {
			return nil, fmt.Errorf("open stdin: %w", err)
		}
	} else if o.stdin, err = os.Open(os.DevNull); err != nil {
		return nil, fmt.Errorf("open stdin: %w", err)
	}
	for i := range o.readers {
		if o.readers[i], o.child[i], err = os.Pipe(); err != nil {
			return nil, fmt.Errorf("create output pipe: %w", err)
		}
	}
	return o, nil
}

// startLog creates the log under dir and starts the copiers: the pipes',
// or, with a terminal, the count of the one startConsole starts.
func (o *output) startLog(dir string, lim containerlog.Limits) error {
	w, err := containerlog.Create(filepath.Join(dir, LogDir), lim)
	if err != nil {
		return fmt.Errorf("open container log: %w", err)
	}
	o.log = w
	if o.console != nil {
		o.copiers.Add(1) // the terminal's copier, started or given up by startConsole / closeReaders
	} else {
		for i, s := range []containerlog.Stream{containerlog.Stdout, containerlog.Stderr} {
			o.copiers.Add(1)
			go func() {
				defer o.copiers.Done()
				// A read error other than EOF is the read end closed by
				// finish: nothing left to copy.
				_ = w.Copy(s, o.readers[i])
			}()
		}
	}
	o.started = true
	go func() { o.copiers.Wait(); close(o.copied) }()
	return nil
}

// openConsole makes the socket the init sends its terminal over; the
// container's stdio is /dev/null until the init replaces it with the
// terminal. The copier starts when the terminal arrives (startConsole).
func (o *output) openConsole(size TermSize) error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("terminal socket: %w", err)
	}
	o.console, o.consoleSocket = os.NewFile(uintptr(fds[0]), "console"), os.NewFile(uintptr(fds[1]), "console-init")
	o.ttySize = size
	if o.stdin, err = os.Open(os.DevNull); err != nil {
		return fmt.Errorf("open stdin: %w", err)
	}
	for i := range o.child {
		if o.child[i], err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
			return fmt.Errorf("open output: %w", err)
		}
	}
	return nil
}

// startConsole receives the terminal's master from the init (after the
// container's Start) and starts copying it into the log.
func (o *output) startConsole() error {
	if o.console == nil {
		return nil
	}
	sock := o.console
	o.console = nil
	defer sock.Close()
	master, err := recvFd(sock)
	if err != nil {
		o.copiers.Done()
		return err
	}
	o.inMu.Lock()
	o.master = master
	o.inMu.Unlock()
	go func() {
		defer o.copiers.Done()
		// EIO once the terminal's last holder in the container closed it.
		_ = o.log.Copy(containerlog.Stdout, master)
	}()
	return nil
}

// interactive reports whether attach sessions have a stdin or terminal.
func (o *output) interactive() bool {
	o.inMu.Lock()
	defer o.inMu.Unlock()
	return o.stdinW != nil || o.master != nil
}

// writeStdin writes attach input to the container's stdin or terminal.
func (o *output) writeStdin(p []byte) {
	o.inMu.Lock()
	defer o.inMu.Unlock()
	switch {
	case o.master != nil:
		_, _ = o.master.Write(p)
	case o.stdinW != nil:
		if _, err := o.stdinW.Write(p); err != nil {
			o.stdinW.Close()
			o.stdinW = nil
		}
	}
}

// closeStdin closes the container's stdin pipe (a terminal stays).
func (o *output) closeStdin() {
	o.inMu.Lock()
	defer o.inMu.Unlock()
	if o.stdinW != nil {
		o.stdinW.Close()
		o.stdinW = nil
	}
}

// resize sets the terminal's size.
func (o *output) resize(sz TermSize) {
	o.inMu.Lock()
	defer o.inMu.Unlock()
	if o.master != nil {
		_ = resizeTerminal(o.master, sz)
	}
}

// closeChild closes the shim's copies of the container's ends, once the
// container holds its own (after Start): the copiers see EOF when the
// container's last process has gone.
func (o *output) closeChild() {
	if o.stdin != nil {
		o.stdin.Close()
		o.stdin = nil
	}
	if o.consoleSocket != nil {
		o.consoleSocket.Close()
		o.consoleSocket = nil
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
	o.closeReaders()
	<-o.copied
	st := o.log.Stats()
	st.Err = errors.Join(st.Err, o.log.Close())
	return st
}

// closeReaders closes the shim's read ends (pipes, terminal, the
// console socket): a copier still reading ends.
func (o *output) closeReaders() {
	for _, r := range o.readers {
		if r != nil {
			r.Close()
		}
	}
	if o.console != nil {
		o.console.Close()
		o.console = nil
		if o.started {
			o.copiers.Done() // the terminal never came
		}
	}
	o.inMu.Lock()
	defer o.inMu.Unlock()
	for _, f := range []*os.File{o.master, o.stdinW} {
		if f != nil {
			f.Close()
		}
	}
	o.master, o.stdinW = nil, nil
}

// closeAll releases everything of a launch that failed.
func (o *output) closeAll() {
	o.closeChild()
	o.closeReaders()
	if o.started {
		<-o.copied
	}
	if o.log != nil {
		_ = o.log.Close()
	}
}
