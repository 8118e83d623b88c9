package registry

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseOptions(t *testing.T) {
	o, err := ParseOptions([]string{"a=1", "b=x=y", "c="})
	if err != nil || o["a"] != "1" || o["b"] != "x=y" || o["c"] != "" || len(o) != 3 {
		t.Fatalf("ParseOptions = %v, %v", o, err)
	}
	for _, bad := range []string{"a", "=1"} {
		if _, err := ParseOptions([]string{bad}); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("ParseOptions(%q) = %v, want ErrInvalidOption", bad, err)
		}
	}
}

func TestParsePlugin(t *testing.T) {
	if _, ok, err := ParsePlugin("usage", Options{"timeout": "bad"}); ok || err != nil {
		t.Fatalf("a registered name: ok %v, err %v", ok, err)
	}
	p, ok, err := ParsePlugin("plugin:/bin/est -v 2", Options{
		"timeout": "2s", "start-timeout": "3s", "min-backoff": "10ms", "max-backoff": "1m", "history": "7", "other": "x",
	})
	if !ok || err != nil {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	want := PluginOptions{Path: "/bin/est", Args: []string{"-v", "2"}, Timeout: 2 * time.Second, StartTimeout: 3 * time.Second,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: time.Minute, History: 7}
	if p.Path != want.Path || !slices.Equal(p.Args, want.Args) || p.Timeout != want.Timeout || p.StartTimeout != want.StartTimeout ||
		p.MinBackoff != want.MinBackoff || p.MaxBackoff != want.MaxBackoff || p.History != want.History {
		t.Fatalf("ParsePlugin = %+v, want %+v", p, want)
	}
	if _, ok, err := ParsePlugin("plugin:  ", nil); !ok || !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("empty path: ok %v, err %v", ok, err)
	}
	_, _, err = ParsePlugin("plugin:/bin/x", Options{"timeout": "soon", "history": "-1"})
	if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "timeout") || !strings.Contains(err.Error(), "history") {
		t.Fatalf("bad options: %v (want both named)", err)
	}
}

func TestOptionGetters(t *testing.T) {
	o := Options{"f": "1.5", "i": "7", "d": "30s", "b": "true", "empty": "",
		"badf": "x", "badi": "1.5", "badd": "-1s", "badb": "maybe"}
	if v, err := o.Float("f", 0); v != 1.5 || err != nil {
		t.Errorf("Float = %v, %v", v, err)
	}
	if v, err := o.Int("i", 0); v != 7 || err != nil {
		t.Errorf("Int = %v, %v", v, err)
	}
	if v, err := o.Duration("d", 0); v != 30*time.Second || err != nil {
		t.Errorf("Duration = %v, %v", v, err)
	}
	if v, err := o.Bool("b", false); !v || err != nil {
		t.Errorf("Bool = %v, %v", v, err)
	}
	// Unset and empty keys take the default.
	if v, err := o.Float("empty", 2.5); v != 2.5 || err != nil {
		t.Errorf("Float(empty) = %v, %v", v, err)
	}
	if v, err := o.Int("missing", 3); v != 3 || err != nil {
		t.Errorf("Int(missing) = %v, %v", v, err)
	}
	for key, err := range map[string]error{
		"badf": func() error { _, err := o.Float("badf", 0); return err }(),
		"badi": func() error { _, err := o.Int("badi", 0); return err }(),
		"badd": func() error { _, err := o.Duration("badd", 0); return err }(),
		"badb": func() error { _, err := o.Bool("badb", false); return err }(),
	} {
		if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v, want ErrInvalidOption naming it", key, err)
		}
	}
	// A reader collects every error, each naming its option.
	r := o.Reader()
	if r.Float("f", 0) != 1.5 || r.Int("i", 0) != 7 || r.Err() != nil {
		t.Fatalf("reader over good options: %v", r.Err())
	}
	r.Float("badf", 0)
	r.Bool("badb", false)
	r.Duration("badd", 0)
	err := r.Err()
	if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "badf") || !strings.Contains(err.Error(), "badb") || !strings.Contains(err.Error(), "badd") {
		t.Fatalf("reader: %v, want all three named", err)
	}
}
