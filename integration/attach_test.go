package integration

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/containerd/console"
)

// TestRunInteractiveTerminal: `brim container run -i -t` runs the
// container in the foreground with a terminal of the client's size,
// typed input reaches it, brim exits with its exit code, and the
// terminal's output is the container's log (stdout).
func TestRunInteractiveTerminal(t *testing.T) {
	a := startAgent(t)
	p := startPty(t, 90, 30, "container", "run", "--socket", a.Socket, "-i", "-t", "--name", "it", "--",
		"sh", "-c", `stty size; echo ready; read l; echo got:$l; exit 4`)
	at := p.waitFor("ready", 0)
	if head := p.output()[:at]; !strings.Contains(head, "30 90") {
		t.Errorf("the container's terminal is not the client's size 90x30: %q", head)
	}
	p.write("hello\n")
	p.waitFor("got:hello", at)
	if code := p.exitCode(); code != 4 {
		t.Fatalf("run -it exited %d, want the container's 4", code)
	}
	r := a.brim("container", "logs", "--stream", "stdout", "it")
	if r.code != 0 || !strings.Contains(r.stdout, "ready") || !strings.Contains(r.stdout, "got:hello") {
		t.Fatalf("logs of a -t container: exit %d, %q; want its terminal's output as stdout", r.code, r.stdout)
	}
}

// TestAttach: attach to a container run detached with -i -t: input and
// window size reach it, ctrl-p ctrl-q detaches leaving it running, a
// second attach goes on where the first left, and ends with the
// container's exit code.
func TestAttach(t *testing.T) {
	a := startAgent(t)
	id := a.run("-d", "-i", "-t", "--", "sh", "-c", `while read l; do [ "$l" = quit ] && exit 5; stty size; echo echo:$l; done`)
	var c struct {
		Stdin, Tty bool
	}
	if err := json.Unmarshal([]byte(a.mustBrim("container", "inspect", id)), &c); err != nil || !c.Stdin || !c.Tty {
		t.Fatalf("inspect of a -i -t container: %+v, %v", c, err)
	}
	p := startPty(t, 80, 24, "container", "attach", "--socket", a.Socket, id)
	eventually(t, "attach passes input and output", func() bool {
		p.write("one\n")
		return strings.Contains(p.output(), "echo:one")
	})
	if err := p.master.Resize(console.WinSize{Width: 120, Height: 50}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the container's terminal takes the attached client's size", func() bool {
		p.write("two\n")
		return strings.Contains(p.output(), "50 120")
	})
	p.write("\x10\x11") // ctrl-p ctrl-q
	if code := p.exitCode(); code != 0 {
		t.Fatalf("detach: exit %d, want 0", code)
	}
	// Said before brim exits; the terminal's reader may see it after.
	p.waitFor("detached", 0)
	if st := a.inspect(id).State; st != "running" {
		t.Fatalf("after detach the container is %s, want running", st)
	}
	p = startPty(t, 80, 24, "container", "attach", "--socket", a.Socket, id)
	eventually(t, "a second attach passes input", func() bool {
		p.write("three\n")
		return strings.Contains(p.output(), "echo:three")
	})
	p.write("quit\n")
	if code := p.exitCode(); code != 5 {
		t.Fatalf("attach ended with exit %d, want the container's 5", code)
	}
}

// TestRunInteractivePipe: run -i without a terminal streams a pipe to the
// container's stdin; its end closes the container's stdin, and the exit
// code passes through.
func TestRunInteractivePipe(t *testing.T) {
	a := startAgent(t)
	r := runBrimStdin(t, strings.Repeat("line\n", 1000), "container", "run", "--socket", a.Socket, "-i", "--", "sh", "-c", "wc -l; exit 6")
	if r.code != 6 || strings.TrimSpace(r.stdout) != "1000" {
		t.Fatalf("run -i: exit %d, stdout %q, stderr %q; want 6 and 1000 lines", r.code, r.stdout, r.stderr)
	}
}

// runBrimStdin runs the CLI with stdin from in.
func runBrimStdin(t *testing.T, in string, args ...string) result {
	t.Helper()
	cmd := exec.Command(brimBinary, args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(in), &out, &errb
	return exitResult(t, args, cmd.Run(), &out, &errb)
}
