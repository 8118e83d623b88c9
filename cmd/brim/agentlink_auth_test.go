package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/brimnode/brim/cli"
)

func TestLinkCredentials(t *testing.T) {
	t.Setenv("BRIM_SECRET", "")
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	if err := os.WriteFile(file, []byte(" s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, principal, file, env, want string
		usage                            bool
	}{
		{"none", "", "", "", "", false},
		{"file", "a1", file, "", "s3cret", false},
		{"env", "a1", "", "envsecret", "envsecret", false},
		{"file wins over env", "a1", file, "envsecret", "s3cret", false},
		{"principal without secret", "a1", "", "", "", true},
		{"file without principal", "", file, "", "", true},
		{"missing file", "a1", filepath.Join(dir, "none"), "", "", true},
	} {
		t.Setenv("BRIM_SECRET", tc.env)
		lo := linkOptions{principal: tc.principal, secretFile: tc.file}
		err := lo.credentials()
		var ee cli.ExitError
		if tc.usage {
			if !errors.As(err, &ee) || ee.Code != 2 {
				t.Errorf("%s: %v, want a usage error (exit 2)", tc.name, err)
			}
			continue
		}
		if err != nil || lo.secret != tc.want {
			t.Errorf("%s: secret %q, %v; want %q", tc.name, lo.secret, err, tc.want)
		}
	}
}
