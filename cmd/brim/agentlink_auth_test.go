package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/brimnode/brim/masterlink"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMasterRefusalOfAgent(t *testing.T) {
	rejected := fmt.Errorf("master m refused the agent: %w: %w", masterlink.ErrRejected,
		fmt.Errorf("register: %w", status.Error(codes.Unauthenticated, `agent authentication: bad credentials for "a1": wrong secret`)))
	var ee exitError
	if err := masterRefusal("agent", rejected); !errors.As(err, &ee) || ee.code != 1 ||
		ee.msg != `the master refused the agent: unauthenticated: agent authentication: bad credentials for "a1": wrong secret` {
		t.Fatalf("refusal: %#v", err)
	}
	for _, err := range []error{nil, errors.New("dial: boom"), status.Error(codes.Unavailable, "down")} {
		if got := masterRefusal("agent", err); got != err {
			t.Fatalf("refusal of %v: %#v", err, got)
		}
	}
}

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
		var ee exitError
		if tc.usage {
			if !errors.As(err, &ee) || ee.code != 2 {
				t.Errorf("%s: %v, want a usage error (exit 2)", tc.name, err)
			}
			continue
		}
		if err != nil || lo.secret != tc.want {
			t.Errorf("%s: secret %q, %v; want %q", tc.name, lo.secret, err, tc.want)
		}
	}
}
