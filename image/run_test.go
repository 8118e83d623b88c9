package image

import (
	"errors"
	"slices"
	"testing"
)

func TestArgv(t *testing.T) {
	for _, tc := range []struct {
		name       string
		entry, cmd []string
		args, want []string
		err        error
	}{
		{"cmd only", nil, []string{"sh"}, nil, []string{"sh"}, nil},
		{"args replace cmd", nil, []string{"sh"}, []string{"echo", "hi"}, []string{"echo", "hi"}, nil},
		{"entrypoint with cmd", []string{"/init"}, []string{"--serve"}, nil, []string{"/init", "--serve"}, nil},
		{"args replace cmd after entrypoint", []string{"/init"}, []string{"--serve"}, []string{"--check"}, []string{"/init", "--check"}, nil},
		{"entrypoint only", []string{"/init"}, nil, nil, []string{"/init"}, nil},
		{"args only", nil, nil, []string{"true"}, []string{"true"}, nil},
		{"nothing", nil, nil, nil, nil, ErrNoCommand},
		{"empty entrypoint string", []string{""}, nil, nil, nil, ErrNoCommand},
	} {
		got, err := Config{Entrypoint: tc.entry, Cmd: tc.cmd}.Argv(tc.args)
		if !errors.Is(err, tc.err) || !slices.Equal(got, tc.want) {
			t.Errorf("%s: Argv = %q, %v; want %q, %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func TestMergeEnv(t *testing.T) {
	c := Config{Env: []string{"PATH=/usr/bin:/bin", "LANG=C", "EMPTY="}}
	got := c.MergeEnv([]string{"LANG=en_US.UTF-8", "APP=1", "PATH=/opt/bin"})
	want := []string{"PATH=/opt/bin", "LANG=en_US.UTF-8", "EMPTY=", "APP=1"}
	if !slices.Equal(got, want) {
		t.Errorf("MergeEnv = %q, want %q", got, want)
	}
	if got := c.MergeEnv(nil); !slices.Equal(got, c.Env) {
		t.Errorf("MergeEnv(nil) = %q, want the image's %q", got, c.Env)
	}
	if len(c.Env) != 3 || c.Env[1] != "LANG=C" {
		t.Errorf("MergeEnv changed the image's env: %q", c.Env)
	}
}

func TestCwd(t *testing.T) {
	for _, tc := range []struct{ image, given, want string }{
		{"", "", "/"}, {"/app", "", "/app"}, {"/app", "/tmp", "/tmp"}, {"", "/x", "/x"},
	} {
		if got := (Config{WorkingDir: tc.image}).Cwd(tc.given); got != tc.want {
			t.Errorf("Cwd(image %q, given %q) = %q, want %q", tc.image, tc.given, got, tc.want)
		}
	}
}
