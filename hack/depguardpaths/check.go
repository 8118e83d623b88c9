package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// config is the part of a golangci-lint v2 configuration this command
// reads: the depguard rules.
type config struct {
	Linters struct {
		Settings struct {
			Depguard struct {
				Rules map[string]rule `json:"rules"`
			} `json:"depguard"`
		} `json:"settings"`
	} `json:"linters"`
}

// rule is one depguard rule: the files it covers and the packages it
// allows and denies.
type rule struct {
	Files []string `json:"files"`
	Allow []string `json:"allow"`
	Deny  []struct {
		Pkg string `json:"pkg"`
	} `json:"deny"`
}

// parseRules returns the depguard rules of a golangci-lint configuration.
func parseRules(data []byte) (map[string]rule, error) {
	var c config
	if err := yaml.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("parse configuration: %w", err)
	}
	rules := c.Linters.Settings.Depguard.Rules
	if len(rules) == 0 {
		return nil, fmt.Errorf("parse configuration: no depguard rules")
	}
	return rules, nil
}

// check returns one line per stale entry of rules, sorted: a package path
// no package in pkgs has (depguard matches by prefix, or exactly with a
// trailing $), or a file glob (negated or not) that matches none of files
// (absolute paths) and names no directory of one (globExists). depguard's
// variables ($gostd, $all, $test) are not paths.
func check(rules map[string]rule, pkgs, files []string) []string {
	var out []string
	for name, r := range rules {
		for _, g := range r.Files {
			g = strings.TrimPrefix(g, "!")
			if strings.HasPrefix(g, "$") {
				continue
			}
			ok, err := globExists(g, files)
			if err != nil {
				out = append(out, fmt.Sprintf("rule %s: file glob %q: %v", name, g, err))
			} else if !ok {
				out = append(out, fmt.Sprintf("rule %s: file glob %q matches no Go file", name, g))
			}
		}
		paths := slices.Clone(r.Allow)
		for _, d := range r.Deny {
			paths = append(paths, d.Pkg)
		}
		for _, p := range paths {
			if !strings.HasPrefix(p, "$") && !slices.ContainsFunc(pkgs, matchPkg(p)) {
				out = append(out, fmt.Sprintf("rule %s: package %q matches no package", name, p))
			}
		}
	}
	slices.Sort(out)
	return out
}

// globExists reports whether glob g matches one of files, or names the
// directory of one: "**/x/**/*.go" (x's subdirectories, which the rules
// name beside "**/x/*.go" to guard packages to come) holds while x has Go
// files of its own.
func globExists(g string, files []string) (bool, error) {
	for _, alt := range []string{g, strings.ReplaceAll(g, "/**/", "/")} {
		re, err := globRegexp(alt)
		if err != nil {
			return false, err
		}
		if slices.ContainsFunc(files, re.MatchString) {
			return true, nil
		}
	}
	return false, nil
}

// matchPkg returns depguard's test of a package path against entry p: a
// prefix, or the exact path when p ends with $.
func matchPkg(p string) func(string) bool {
	if exact, ok := strings.CutSuffix(p, "$"); ok {
		return func(pkg string) bool { return pkg == exact }
	}
	return func(pkg string) bool { return strings.HasPrefix(pkg, p) }
}

// globRegexp compiles a depguard file glob (gobwas/glob with '/' as the
// separator: ** any string, * and ? within one path element, [..] a
// class) into an anchored regular expression.
func globRegexp(g string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(g); i++ {
		switch c := g[i]; {
		case strings.HasPrefix(g[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[':
			end := strings.IndexByte(g[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("unclosed [")
			}
			b.WriteString(g[i : i+end+1])
			i += end
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}
