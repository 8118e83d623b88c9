package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/resources"
)

// docBlock is one fenced code block of a Markdown file.
type docBlock struct {
	lang, text string
	line       int // of the opening fence
}

var fence = regexp.MustCompile("^([ \t]*)```([a-z]*)[ \t]*$")

// codeBlocks returns the fenced code blocks of the Markdown file at path,
// each without the indentation of its fence.
func codeBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docBlock
	var cur *docBlock
	var indent string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		m := fence.FindStringSubmatch(l)
		switch {
		case cur == nil && m != nil:
			cur, indent = &docBlock{lang: m[2], line: n}, m[1]
		case cur != nil && m != nil && m[2] == "":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += strings.TrimPrefix(l, indent) + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("%s: the block of line %d is not closed", path, cur.line)
	}
	return out
}

// shellWords splits a command line as sh does, with PWD set to dir: the
// doc's quoting and $PWD mean what they say.
func shellWords(t *testing.T, dir, line string) []string {
	t.Helper()
	line = strings.ReplaceAll(line, "\\\n", " ")
	cmd := exec.Command("sh", "-c", `cd "$1" && eval "set -- $2" && printf '%s\0' "$@"`, "sh", dir, line)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("split %q: %v", line, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// agentFlags are the flags of a documented `brim agent …` command line
// ("…" dropped: the harness gives the agent its own state dir, socket
// and cgroup parent), with placeholder paths replaced.
func agentFlags(t *testing.T, dir, line string, paths map[string]string) []string {
	t.Helper()
	words := shellWords(t, dir, line)
	if len(words) < 2 || words[0] != "brim" || words[1] != "agent" {
		t.Fatalf("not a brim agent command: %q", line)
	}
	var out []string
	for _, w := range words[2:] {
		if w == "…" {
			continue
		}
		for from, to := range paths {
			w = strings.ReplaceAll(w, from, to)
		}
		out = append(out, w)
	}
	return out
}

// revocableThrough starts an agent with flags (and a JSON log), launches
// a revocable container through it as the reader did, and checks
// the agent's log lines.
func revocableThrough(t *testing.T, what string, flags ...string) {
	t.Helper()
	a := startAgent(t, append(flags, "--log-format", "json", "--estimator-interval", "1s")...)
	// The first estimate comes from the plugin's first call; a launch
	// before it is refused with the noop pool: wait for the state, name
	// the last refusal if it never comes.
	deadline := time.Now().Add(time.Minute)
	for {
		r := a.brim("container", "run", "--revocable", "--cpus", "0.1", "--mem", "32", "--wait", "--", "true")
		if r.code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no revocable container ran: exit %d: %s", what, r.code, r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	checkJSONLog(t, a.logPath)
}

// TestPluginDocExamples runs every example of docs/plugins.md as the doc
// says and launches a revocable container through each estimator (the Go
// example offered cpus only, and the launch failed with "mem not offered
// by this agent"); blocks that are no program or command to run are
// listed, so that a new example cannot go unrun.
func TestPluginDocExamples(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	blocks := codeBlocks(t, filepath.Join(root, "docs", "plugins.md"))
	work := t.TempDir()
	// The Go toolchain offline, from the module cache brim's build filled
	// (the test's environment, not the doc's).
	goEnv := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off")

	// The complete examples, built as the doc says: go build -o bin/ ./examples/...
	bin := filepath.Join(work, "bin") + "/"
	build := exec.Command("go", "build", "-o", bin, "./examples/...")
	build.Dir, build.Env = root, goEnv
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -o bin/ ./examples/...: %v\n%s", err, out)
	}

	var goExample, buildSteps string
	var agentLines []string
	var python *docBlock
	for i, b := range blocks {
		first := strings.TrimSpace(strings.SplitN(b.text, "\n", 2)[0])
		switch {
		case b.lang == "go" && strings.Contains(b.text, "package main"):
			goExample = b.text
		case b.lang == "sh" && strings.Contains(b.text, "go mod init"):
			buildSteps = b.text
		case strings.HasPrefix(first, "brim agent"):
			agentLines = append(agentLines, b.text)
		case b.lang == "python":
			python = &blocks[i]
		case b.lang == "proto", b.lang == "toml", strings.HasPrefix(first, "1|1|tcp|"), strings.HasPrefix(first, "protoc "):
			// No program to run: the service's declaration, a
			// handshake line, the generator of the committed
			// *_pb2.py (make check-generated runs it), an
			// experiment spec (brim experiment).
		default:
			t.Errorf("docs/plugins.md:%d: a code block this test does not run: run it here, or say why it is none", b.line)
		}
	}
	if goExample == "" || buildSteps == "" || python == nil || len(agentLines) != 2 {
		t.Fatalf("docs/plugins.md: go example %v, build steps %v, python %v, %d agent command lines: the doc changed; update this test",
			goExample != "", buildSteps != "", python != nil, len(agentLines))
	}

	// "Building a Go plugin outside this repository", step by step, with
	// main.go the example above and the checkout this one.
	var script []string
	var agentLine string
	for _, l := range strings.Split(strings.TrimSpace(buildSteps), "\n") {
		switch {
		case strings.HasPrefix(l, "# main.go"):
			script = append(script, "cat > main.go <<'EOF'\n"+goExample+"EOF")
		case strings.HasPrefix(l, "brim agent"):
			agentLine = l
		default:
			script = append(script, strings.ReplaceAll(l, "/path/to/brim", root))
		}
	}
	sh := exec.Command("sh", "-ec", strings.Join(script, "\n"))
	sh.Dir, sh.Env = work, goEnv
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("the doc's build steps: %v\n%s", err, out)
	}
	estDir := filepath.Join(work, "my-estimator")
	goPlugin := filepath.Join(estDir, "my-estimator")
	if _, err := os.Stat(goPlugin); err != nil {
		t.Fatalf("the build steps made no plugin: %v", err)
	}
	paths := map[string]string{"/usr/local/bin/my-estimator": goPlugin, "/usr/local/bin/my-qos": bin + "qos-plugin"}

	// The build steps' own agent command, in the directory they end in.
	revocableThrough(t, "the Go example", agentFlags(t, estDir, agentLine, paths)...)
	// The command at the top of the doc, its placeholders the Go example
	// and examples/qos-plugin.
	revocableThrough(t, "the doc's first command", agentFlags(t, work, agentLines[0], paths)...)
	// The Python estimator, run as the doc says from the checkout. It
	// offers half of the node's cpus less the host's busy ones: this
	// shared host is busy, so the node is larger than the host.
	py := agentFlags(t, root, agentLines[1], paths)
	revocableThrough(t, "the Python example", append(py, "--overcommit", "--resources", "cpus:16;mem:2048")...)
	// The complete examples, with the command lines their package docs give.
	revocableThrough(t, "examples/estimator-plugin", "--estimator", "plugin:"+bin+"estimator-plugin cpus:2;mem:1024")
	revocableThrough(t, "examples/qos-plugin", "--estimator", "fixed", "--estimator-opt", "resources=cpus:1;mem:256",
		"--qos", "plugin:"+bin+"qos-plugin 1.5")

	// The Python block is an excerpt of estimator.py: its lines, but for
	// what it elides ([...]), are the file's, in order.
	src, err := os.ReadFile(filepath.Join(root, "examples", "python-plugin", "estimator.py"))
	if err != nil {
		t.Fatal(err)
	}
	rest := string(src)
	for _, l := range strings.Split(python.text, "\n") {
		if code, _, ok := strings.Cut(l, "  # "); ok { // the doc's own remark
			l = code
		}
		l = strings.TrimSpace(l)
		if l == "" || strings.Contains(l, "[...]") || strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.Index(rest, l)
		if i < 0 {
			t.Errorf("docs/plugins.md:%d: %q is not (in this order) in examples/python-plugin/estimator.py", python.line, l)
			continue
		}
		rest = rest[i+len(l):]
	}
}

// durationKeys are the daemons' log attributes that hold durations.
var durationKeys = regexp.MustCompile(`(^|_)(interval|grace|waited|backoff|timeout|bound|after|took|elapsed)$`)

// checkJSONLog checks a daemon's JSON log as a reader parses it: every
// line an object with one "component", durations as Go durations
// ("1.5s", never nanoseconds), resources in brim's text form (never
// {"MilliCPUs":…}).
func checkJSONLog(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 3 {
		t.Fatalf("%s: %d lines", path, len(lines))
	}
	for _, l := range lines {
		dec := json.NewDecoder(strings.NewReader(l))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Errorf("%s: not a JSON object: %s", path, l)
			continue
		}
		components := 0
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Errorf("%s: %v: %s", path, err, l)
				break
			}
			key := tok.(string)
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Errorf("%s: %v: %s", path, err, l)
				break
			}
			if key == "component" {
				components++
			} else if seen[key] {
				t.Errorf("%s: key %q twice: %s", path, key, l)
			}
			seen[key] = true
			if bytes.Contains(v, []byte(`"MilliCPUs"`)) {
				t.Errorf("%s: %s as a Go struct: %s", path, key, l)
			}
			var s string
			switch {
			case durationKeys.MatchString(key):
				if err := json.Unmarshal(v, &s); err != nil {
					t.Errorf("%s: %s is no duration text: %s", path, key, l)
				} else if _, err := time.ParseDuration(s); err != nil {
					t.Errorf("%s: %s %q: %v", path, key, s, err)
				}
			case key == "resources":
				if err := json.Unmarshal(v, &s); err != nil {
					t.Errorf("%s: resources not in text form: %s", path, l)
				} else if _, err := resources.Parse(s); err != nil {
					t.Errorf("%s: resources %q: %v", path, s, err)
				}
			}
		}
		if components != 1 {
			t.Errorf("%s: %d component keys: %s", path, components, l)
		}
	}
}
