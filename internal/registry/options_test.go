package registry

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

var errInvalid = errors.New("invalid test option")

func TestParseOptions(t *testing.T) {
	o, err := ParseOptions([]string{"a=1", "b=x=y", "c="}, errInvalid)
	if err != nil || o["a"] != "1" || o["b"] != "x=y" || o["c"] != "" || len(o) != 3 {
		t.Fatalf("ParseOptions = %v, %v", o, err)
	}
	for _, bad := range []string{"a", "=1"} {
		if _, err := ParseOptions([]string{bad}, errInvalid); !errors.Is(err, errInvalid) {
			t.Errorf("ParseOptions(%q) = %v, want errInvalid", bad, err)
		}
	}
}

func TestParsePlugin(t *testing.T) {
	if _, ok, err := ParsePlugin("usage", map[string]string{"timeout": "bad"}, errInvalid); ok || err != nil {
		t.Fatalf("a registered name: ok %v, err %v", ok, err)
	}
	p, ok, err := ParsePlugin("plugin:/bin/est -v 2", map[string]string{
		"timeout": "2s", "start-timeout": "3s", "min-backoff": "10ms", "max-backoff": "1m", "history": "7", "other": "x",
	}, errInvalid)
	if !ok || err != nil {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	want := PluginOptions{Path: "/bin/est", Args: []string{"-v", "2"}, Timeout: 2 * time.Second, StartTimeout: 3 * time.Second,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: time.Minute, History: 7}
	if p.Path != want.Path || !slices.Equal(p.Args, want.Args) || p.Timeout != want.Timeout || p.StartTimeout != want.StartTimeout ||
		p.MinBackoff != want.MinBackoff || p.MaxBackoff != want.MaxBackoff || p.History != want.History {
		t.Fatalf("ParsePlugin = %+v, want %+v", p, want)
	}
	if _, ok, err := ParsePlugin("plugin:  ", nil, errInvalid); !ok || !errors.Is(err, errInvalid) {
		t.Fatalf("empty path: ok %v, err %v", ok, err)
	}
	_, _, err = ParsePlugin("plugin:/bin/x", map[string]string{"timeout": "soon", "history": "-1"}, errInvalid)
	if !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), "timeout") || !strings.Contains(err.Error(), "history") {
		t.Fatalf("bad options: %v (want both named)", err)
	}
}
