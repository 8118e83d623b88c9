package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	cfg := flag.String("config", ".golangci.yml", "the golangci-lint configuration")
	tags := flag.String("tags", "", "build tags for go list (the lint's run.build-tags)")
	flag.Parse()
	data, err := os.ReadFile(*cfg)
	if err != nil {
		fail(err)
	}
	rules, err := parseRules(data)
	if err != nil {
		fail(fmt.Errorf("%s: %w", *cfg, err))
	}
	pkgs, files, err := listModule(*tags)
	if err != nil {
		fail(err)
	}
	stale := check(rules, pkgs, files)
	for _, s := range stale {
		fmt.Fprintf(os.Stderr, "%s: %s\n", *cfg, s)
	}
	if len(stale) > 0 {
		fmt.Fprintf(os.Stderr, "%s: %d depguard entries name nothing that exists: a rule that guards nothing; fix or remove them\n", *cfg, len(stale))
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "depguardpaths:", err)
	os.Exit(2)
}

// listed is what this command reads of `go list -json`.
type listed struct {
	ImportPath, Dir                                              string
	GoFiles, CgoFiles, TestGoFiles, XTestGoFiles, IgnoredGoFiles []string
}

// listModule returns every package the module's packages and their tests
// import (with the module's own) and the absolute paths of the module's
// Go files, those its build constraints exclude on this system included.
func listModule(tags string) (pkgs, files []string, err error) {
	own, err := goList(tags, "./...")
	if err != nil {
		return nil, nil, err
	}
	deps, err := goList(tags, "-deps", "-test", "./...")
	if err != nil {
		return nil, nil, err
	}
	for _, p := range own {
		for _, set := range [][]string{p.GoFiles, p.CgoFiles, p.TestGoFiles, p.XTestGoFiles, p.IgnoredGoFiles} {
			for _, f := range set {
				files = append(files, filepath.Join(p.Dir, f))
			}
		}
	}
	for _, p := range deps {
		// Test variants are "path [path.test]"; test mains end in .test.
		path, _, _ := strings.Cut(p.ImportPath, " ")
		if !strings.HasSuffix(path, ".test") {
			pkgs = append(pkgs, path)
		}
	}
	return pkgs, files, nil
}

// goList runs go list -json with args and decodes its packages.
func goList(tags string, args ...string) ([]listed, error) {
	argv := append([]string{"list", "-e", "-json", "-tags", tags}, args...)
	cmd := exec.Command("go", argv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w: %s", strings.Join(argv, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("decode go list: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}
