package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/brimnode/brim/scheduler/runner"
)

func TestFrameworkSecret(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BRIM_SECRET", "from-env")
	for _, tc := range []struct {
		name, principal, secret, file, want string
		ok                                  bool
	}{
		{"no principal: nothing, env ignored", "", "", "", "", true},
		{"file first", "ops", "flag", file, "from-file", true},
		{"flag before env", "ops", "flag", "", "flag", true},
		{"env last", "ops", "", "", "from-env", true},
		{"secret without principal", "", "flag", "", "", false},
		{"file without principal", "", "", file, "", false},
		{"missing file", "ops", "", filepath.Join(t.TempDir(), "none"), "", false},
	} {
		got, err := FrameworkSecret(tc.principal, tc.secret, tc.file)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: %q, %v; want %q (ok %v)", tc.name, got, err, tc.want, tc.ok)
		}
	}
	t.Setenv("BRIM_SECRET", "")
	if _, err := FrameworkSecret("ops", "", ""); err == nil {
		t.Error("a principal without any secret accepted")
	}
}

func TestRefusalMessage(t *testing.T) {
	wrapped := fmt.Errorf("subscribe: %w", status.Error(codes.PermissionDenied, `principal "ops" may not register_framework for role "web"`))
	var ee ExitError
	if err := refusal(wrapped); !errors.As(err, &ee) || ee.Code != 1 ||
		ee.Msg != `the master refused the framework: permission denied: principal "ops" may not register_framework for role "web"` {
		t.Fatalf("refusal: %#v", err)
	}
	other := fmt.Errorf("subscribe: %w", status.Error(codes.Internal, "boom"))
	if err := refusal(other); err != other {
		t.Fatalf("refusal of another error: %#v", err)
	}
}

// TestRunExit: how runner.Run's outcome becomes brim run's exit.
func TestRunExit(t *testing.T) {
	timeout := fmt.Errorf("%w: no agent can fit cpus:64", runner.ErrTimeout)
	refused := fmt.Errorf("%w: task ID \"x\" is in use", runner.ErrRefused)
	for _, tc := range []struct {
		in   error
		code int
		msg  string
	}{
		{&runner.ExitError{TaskID: "t", Code: 3}, 3, ""},
		{runner.ErrInterrupted, 130, "interrupted"},
		{timeout, 1, timeout.Error()},
		{refused, 1, refused.Error()},
		{fmt.Errorf("subscribe: %w", status.Error(codes.Unauthenticated, "bad credentials")), 1, "the master refused the framework: unauthenticated: bad credentials"},
	} {
		var ee ExitError
		if err := runExit(tc.in); !errors.As(err, &ee) || ee.Code != tc.code || ee.Msg != tc.msg {
			t.Errorf("runExit(%v) = %#v, want exit %d %q", tc.in, err, tc.code, tc.msg)
		}
	}
	if err := runExit(nil); err != nil {
		t.Errorf("runExit(nil) = %v", err)
	}
}
