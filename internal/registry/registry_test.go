package registry

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

var errUnknown = errors.New("unknown test plugin")

// testKind makes plugins that are their name (registered ones) or
// "plugin "+path (out-of-process ones).
func testKind() Kind[string] {
	return Kind[string]{Name: "test plugin", Component: "test", Key: "plugin", Unknown: errUnknown,
		Plugin: func(p PluginOptions, _ *slog.Logger) string { return "plugin " + p.Path }}
}

func TestRegistry(t *testing.T) {
	r := New(testKind())
	r.Register("b", func(Options, *slog.Logger) (string, error) { return "2", nil })
	r.Register("a", func(Options, *slog.Logger) (string, error) { return "1", nil })
	if got := r.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Names = %v", got)
	}
	if f, ok := r.Lookup("b"); !ok {
		t.Fatalf("Lookup(b) = %v", ok)
	} else if v, _ := f(nil, nil); v != "2" {
		t.Fatalf("Lookup(b) made %q", v)
	}
	if _, ok := r.Lookup("c"); ok {
		t.Fatal("Lookup(c) found something")
	}
	for _, name := range []string{"", "plugin:/bin/x", "a"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			r.Register(name, func(Options, *slog.Logger) (string, error) { return "", nil })
		}()
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Register of a nil factory did not panic")
			}
		}()
		r.Register("nil", nil)
	}()
}

func TestRegistryNewOpen(t *testing.T) {
	errFactory := errors.New("factory refused")
	r := New(testKind())
	var gotOpts Options
	r.Register("ok", func(o Options, log *slog.Logger) (string, error) {
		if log == nil {
			t.Error("factory got a nil logger")
		}
		gotOpts = o
		return "made", nil
	})
	r.Register("bad", func(Options, *slog.Logger) (string, error) { return "", errFactory })

	if v, err := r.New("ok", Options{"k": "v"}, nil); v != "made" || err != nil || gotOpts["k"] != "v" {
		t.Fatalf("New(ok) = %q, %v (opts %v)", v, err, gotOpts)
	}
	if _, err := r.New("missing", nil, nil); !errors.Is(err, errUnknown) || !strings.Contains(err.Error(), "have bad, ok") {
		t.Fatalf("New(missing) = %v, want errUnknown listing the names", err)
	}
	if _, err := r.New("bad", nil, nil); !errors.Is(err, errFactory) || !strings.Contains(err.Error(), `new test plugin "bad"`) {
		t.Fatalf("New(bad) = %v", err)
	}
	if v, err := r.Open("ok", nil, nil); v != "made" || err != nil {
		t.Fatalf("Open(ok) = %q, %v", v, err)
	}
	if v, err := r.Open("plugin:/bin/p -x", Options{"timeout": "2s"}, nil); v != "plugin /bin/p" || err != nil {
		t.Fatalf("Open(plugin) = %q, %v", v, err)
	}
	if _, err := r.Open("plugin:/bin/p", Options{"timeout": "soon"}, nil); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("Open(plugin, bad option) = %v, want ErrInvalidOption", err)
	}
	// A kind without out-of-process plugins refuses the spec as unknown.
	k := testKind()
	k.Plugin = nil
	if _, err := New(k).Open("plugin:/bin/p", nil, nil); !errors.Is(err, errUnknown) {
		t.Fatalf("Open(plugin) without Plugin = %v, want errUnknown", err)
	}
}
