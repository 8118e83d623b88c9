package image

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoCommand: neither the image (Entrypoint, Cmd) nor the caller gives
// a command to run.
var ErrNoCommand = errors.New("no command: the image has no entrypoint or cmd")

// Argv is the command a container of the image runs, by Docker's rules:
// the entrypoint followed by args, or by the image's Cmd when args is
// empty; with no entrypoint, args, else Cmd. It returns an error
// wrapping ErrNoCommand when that is empty.
func (c Config) Argv(args []string) ([]string, error) {
	tail := args
	if len(tail) == 0 {
		tail = c.Cmd
	}
	argv := append(append([]string(nil), c.Entrypoint...), tail...)
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("%w: give one", ErrNoCommand)
	}
	return argv, nil
}

// MergeEnv is the image's environment with env (KEY=VALUE each) laid
// over it: a key env sets replaces the image's, in the image's place;
// new keys follow in env's order.
func (c Config) MergeEnv(env []string) []string {
	out := append([]string(nil), c.Env...)
	index := make(map[string]int, len(out))
	for i, e := range out {
		k, _, _ := strings.Cut(e, "=")
		index[k] = i
	}
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		if i, ok := index[k]; ok {
			out[i] = e
			continue
		}
		index[k] = len(out)
		out = append(out, e)
	}
	return out
}

// Cwd is the working directory of a container of the image: cwd when
// given, else the image's, else "/".
func (c Config) Cwd(cwd string) string {
	switch {
	case cwd != "":
		return cwd
	case c.WorkingDir != "":
		return c.WorkingDir
	}
	return "/"
}
