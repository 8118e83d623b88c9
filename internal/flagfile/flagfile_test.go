package flagfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

type opts struct {
	grace   time.Duration
	verbose bool
	n       int
	ratio   float64
	name    string
	plugin  []string
	config  string
}

func flags(o *opts) *pflag.FlagSet {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.DurationVar(&o.grace, "kill-grace", 10*time.Second, "grace before SIGKILL")
	fs.BoolVar(&o.verbose, "verbose", false, "more logs")
	fs.IntVar(&o.n, "workers", 2, "workers")
	fs.Float64Var(&o.ratio, "ratio", 0.5, "ratio")
	fs.StringVar(&o.name, "name", "a", "name")
	fs.StringArrayVar(&o.plugin, "estimator-opt", nil, "option")
	fs.StringVar(&o.config, "config", "", "the file")
	return fs
}

func file(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestApply(t *testing.T) {
	var o opts
	fs := flags(&o)
	if err := fs.Parse([]string{"--workers", "7"}); err != nil {
		t.Fatal(err)
	}
	p := file(t, `
kill-grace = "3s"
verbose = true
workers = 4          # the command line says 7
ratio = 1.5
name = "x"
estimator-opt = ["a=1", "b=2"]
`)
	if err := Apply(fs, p, "config"); err != nil {
		t.Fatal(err)
	}
	want := opts{grace: 3 * time.Second, verbose: true, n: 7, ratio: 1.5, name: "x", plugin: []string{"a=1", "b=2"}}
	if o.grace != want.grace || o.verbose != want.verbose || o.n != want.n || o.ratio != want.ratio || o.name != want.name || strings.Join(o.plugin, ",") != "a=1,b=2" {
		t.Errorf("got %+v, want %+v", o, want)
	}
}

func TestApplyErrors(t *testing.T) {
	for name, tc := range map[string]struct{ text, wantKey string }{
		"unknown key":    {`kill_grace = "3s"`, `"kill_grace"`},
		"skipped key":    {`config = "/x"`, `"config"`},
		"bad duration":   {`name = "y"` + "\n" + `kill-grace = "soon"`, `"kill-grace"`},
		"list for one":   {`name = ["a", "b"]`, `"name"`},
		"table":          {"[name]\nx = 1", `"name"`},
		"bad int":        {`workers = "many"`, `"workers"`},
		"syntax":         {`workers = `, "agent.toml"},
		"negative grace": {`kill-grace = -1`, `"kill-grace"`}, // a bare number is no duration
	} {
		t.Run(name, func(t *testing.T) {
			var o opts
			fs := flags(&o)
			p := file(t, tc.text)
			err := Apply(fs, p, "config")
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.wantKey) || !strings.Contains(err.Error(), p) {
				t.Errorf("error %q names neither %s nor the file", err, tc.wantKey)
			}
			// Nothing applied from a file that does not load.
			if o.name != "a" || o.grace != 10*time.Second || o.n != 2 {
				t.Errorf("partly applied: %+v", o)
			}
		})
	}
}

func TestApplyMissingFile(t *testing.T) {
	var o opts
	err := Apply(flags(&o), filepath.Join(t.TempDir(), "none.toml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want ErrNotExist", err)
	}
}

// What Write prints loads back to the same values.
func TestWriteRoundTrip(t *testing.T) {
	var o opts
	fs := flags(&o)
	if err := fs.Parse([]string{"--kill-grace", "4s", "--estimator-opt", `q="x"`, "--estimator-opt", "b=2", "--verbose"}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, fs, "config"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "config =") {
		t.Errorf("skipped flag printed:\n%s", buf.String())
	}
	var o2 opts
	fs2 := flags(&o2)
	if err := Apply(fs2, file(t, buf.String()), "config"); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if o2.grace != 4*time.Second || !o2.verbose || strings.Join(o2.plugin, "|") != `q="x"|b=2` || o2.n != 2 {
		t.Errorf("round trip: %+v\n%s", o2, buf.String())
	}
}

// A reload applies the file to a fresh flag set; CopyChanged keeps the
// command line winning there too.
func TestCopyChanged(t *testing.T) {
	var o, o2 opts
	fs := flags(&o)
	if err := fs.Parse([]string{"--workers", "7", "--estimator-opt", "a=1", "--estimator-opt", "b=2"}); err != nil {
		t.Fatal(err)
	}
	fresh := flags(&o2)
	if err := CopyChanged(fresh, fs); err != nil {
		t.Fatal(err)
	}
	if err := Apply(fresh, file(t, "workers = 3\nname = \"z\"\nestimator-opt = [\"c=3\"]"), "config"); err != nil {
		t.Fatal(err)
	}
	if o2.n != 7 || o2.name != "z" || strings.Join(o2.plugin, ",") != "a=1,b=2" {
		t.Errorf("got %+v", o2)
	}
}
