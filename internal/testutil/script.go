package testutil

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// ScriptCase is one command of a scenario script (qos, demand and
// demandplan testdata) and the output expected after it.
type ScriptCase struct {
	Line     int      // of the command
	Comments []string // the # lines before it
	Cmd      string
	Want     string
}

// ReadScript splits the script at path into commands and their expected
// output: a command line, a "----" line, the output up to a blank line.
// Lines starting with # are comments; a malformed script fails t.
func ReadScript(t testing.TB, path string) []ScriptCase {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []ScriptCase
	var cur *ScriptCase
	var comments, want []string
	inWant := false
	flush := func() {
		if cur != nil {
			cur.Want = strings.Join(want, "\n")
			out = append(out, *cur)
		}
		cur, want, inWant = nil, nil, false
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case inWant && line == "":
			flush()
		case inWant:
			want = append(want, line)
		case line == "" || strings.HasPrefix(line, "#"):
			if strings.HasPrefix(line, "#") {
				comments = append(comments, line)
			}
		case line == "----":
			if cur == nil {
				t.Fatalf("%s:%d: ---- without a command", path, n)
			}
			inWant = true
		case cur != nil:
			t.Fatalf("%s:%d: command %q without ----", path, n, line)
		default:
			cur = &ScriptCase{Line: n, Cmd: line, Comments: comments}
			comments = nil
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	flush()
	return out
}

// WriteScript writes the script at path back with the outputs in cases
// (a -rewrite run), keeping its comments, commands and blank lines.
func WriteScript(t testing.TB, path string, cases []ScriptCase) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	byLine := map[int]ScriptCase{}
	for _, c := range cases {
		byLine[c.Line] = c
	}
	var out []string
	for i := 0; i < len(lines); i++ {
		c, ok := byLine[i+1]
		if !ok {
			out = append(out, lines[i])
			continue
		}
		out = append(out, c.Cmd, "----", c.Want)
		for i++; i < len(lines) && lines[i] != ""; i++ { // skip the old output
		}
		if i < len(lines) {
			out = append(out, "")
		}
	}
	if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
