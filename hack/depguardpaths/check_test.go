package main

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// probe is a configuration in the form of .golangci.yml: one rule whose
// entries all exist, one naming a package and globs that do not.
const probe = `
version: "2"
linters:
  settings:
    depguard:
      rules:
        fine:
          files: ["**/master/*.go", "**/master/**/*.go", "!**/internal/logging/*.go", "!$test", "$all"]
          list-mode: strict
          allow: [$gostd, github.com/x/brim/resources]
          deny:
            - {pkg: github.com/x/brim/master$, desc: "exact"}
            - {pkg: github.com/x/brim/master/, desc: "subpackages"}
            - {pkg: github.com/sirupsen/logrus, desc: "a dependency"}
        stale:
          files: ["**/gone/*.go", "!**/internal/gone/*.go"]
          allow: [github.com/x/brim/moved]
          deny:
            - {pkg: github.com/x/brim/resources/old$, desc: "exact, but only a prefix exists"}
            - {pkg: github.com/x/brim/agent, desc: "gone"}
`

var (
	probePkgs = []string{"fmt", "github.com/sirupsen/logrus", "github.com/x/brim/master", "github.com/x/brim/master/api",
		"github.com/x/brim/resources", "github.com/x/brim/resources/oldest"}
	probeFiles = []string{"/src/brim/master/master.go", "/src/brim/master/api/state.go", "/src/brim/internal/logging/slog.go",
		"/src/brim/resources/parse.go"}
)

func TestCheckNamesEveryStaleEntry(t *testing.T) {
	rules, err := parseRules([]byte(probe))
	if err != nil {
		t.Fatal(err)
	}
	got := check(rules, probePkgs, probeFiles)
	want := []string{
		`rule stale: file glob "**/gone/*.go" matches no Go file`,
		`rule stale: file glob "**/internal/gone/*.go" matches no Go file`,
		`rule stale: package "github.com/x/brim/agent" matches no package`,
		`rule stale: package "github.com/x/brim/moved" matches no package`,
		`rule stale: package "github.com/x/brim/resources/old$" matches no package`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("check =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// With the packages and files gone, the fine rule goes stale too.
	got = check(map[string]rule{"fine": rules["fine"]}, []string{"fmt"}, nil)
	if len(got) != 7 {
		t.Fatalf("fine rule against an empty module: %d entries, want 7:\n%s", len(got), strings.Join(got, "\n"))
	}
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		glob, path string
		want       bool
	}{
		{"**/master/*.go", "/src/master/a.go", true},
		{"**/master/*.go", "/src/master/api/a.go", false},
		{"**/master/**/*.go", "/src/master/api/a.go", true},
		{"**/master/**/*.go", "/src/master/a.go", false},
		{"**/ma?ter/*.go", "/src/master/a.go", true},
		{"**/[mn]aster/*.go", "/src/naster/a.go", true},
		{"**/master/*.go", "/src/master.go", false},
		{"**/a.b/*.go", "/src/aXb/x.go", false}, // a dot is a dot
	} {
		re, err := globRegexp(c.glob)
		if err != nil {
			t.Fatalf("%s: %v", c.glob, err)
		}
		if got := re.MatchString(c.path); got != c.want {
			t.Errorf("glob %s on %s = %v, want %v", c.glob, c.path, got, c.want)
		}
	}
	if _, err := globRegexp("**/[master/*.go"); err == nil {
		t.Error("an unclosed [ compiled")
	}
}

// TestParseRulesRepoConfig: the repository's configuration parses, with
// its rules' files and packages (the check itself runs in make lint).
func TestParseRulesRepoConfig(t *testing.T) {
	data, err := os.ReadFile("../../.golangci.yml")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := parseRules(data)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := rules["allocator-is-pure"]
	if !ok || len(r.Files) == 0 || !slices.Contains(r.Allow, "github.com/brimnode/brim/resources") {
		t.Fatalf("allocator-is-pure = %+v (ok %v)", r, ok)
	}
	if r := rules["master-never-runs-containers"]; len(r.Deny) == 0 || r.Deny[0].Pkg == "" {
		t.Fatalf("master-never-runs-containers denies %+v", r.Deny)
	}
	if _, err := parseRules([]byte("version: \"2\"\n")); err == nil {
		t.Fatal("a configuration without depguard rules parsed")
	}
}
