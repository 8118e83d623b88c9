package experiment

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const goodSpec = `
name = "dd"
trials = 3
solo = "20s"
contended = "40s"
after = "5s"

[agent]
resources = "cpus:2;mem:2048"
estimator = "fixed"
estimator-opts = ["resources=cpus:2;mem:1024"]
estimator-interval = "1s"

[[controller]]
name = "noop"
qos = "noop"

[[controller]]
name = "interference"
qos = "interference"
opts = ["warmup=5"]

[lc]
command = ["/var/tmp/lc-probe", "--window", "1s"]
cpus = 0.5
mem = 64
latency-file = "lc-probe.csv"
report = true

[[antagonist]]
name = "dd"
count = 2
cpus = 0.5
mem = 256
command = ["sh", "-c", "while :; do dd if=/dev/zero of=/mnt/sandbox/junk bs=1M count=64 conv=fsync; done"]
`

func TestParseSpec(t *testing.T) {
	s, err := ParseSpec([]byte(goodSpec))
	if err != nil {
		t.Fatal(err)
	}
	if s.Trials != 3 || s.Solo.Duration != 20*time.Second || s.SLO != 1.1 || s.Sample.Duration != time.Second {
		t.Fatalf("spec = %+v (want trials 3, solo 20s, default slo 1.1 and sample 1s)", s)
	}
	if len(s.Controllers) != 2 || s.Controllers[1].Opts[0] != "warmup=5" || !s.LC.Report || s.Antagonists[0].Count != 2 {
		t.Fatalf("spec = %+v", s)
	}
	if got := s.Order(0); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("Order(0) = %v", got)
	}
	if got := s.Order(1); !slices.Equal(got, []int{1, 0}) {
		t.Fatalf("Order(1) = %v, want reversed (interleaved trials)", got)
	}
}

// Every bad spec is refused with an error naming the key.
func TestParseSpecBad(t *testing.T) {
	for _, tc := range []struct{ old, new, want string }{
		{`trials = 3`, `trials = 3` + "\n" + `colour = "red"`, "unknown key colour"},
		{"[lc]\n", "[lc]\ncpu = 1\n", "unknown key lc.cpu"},
		{`trials = 3`, `trials = 0`, "trials 0"},
		{`solo = "20s"`, `solo = "1s"`, "solo 1s"},
		{`solo = "20s"`, `solo = "ten"`, "ten"},
		{`contended = "40s"`, `contended = "0s"`, "contended 0s"},
		{`trials = 3`, `trials = 3` + "\n" + `slo = 0.9`, "slo 0.9"},
		{`trials = 3`, `trials = 3` + "\n" + `sample = "1ms"`, "sample 1ms"},
		{`resources = "cpus:2;mem:2048"`, `resources = "cpus:two"`, "agent.resources"},
		{`name = "noop"`, `name = "interference"`, "used twice"},
		{`qos = "noop"`, `qos = ""`, "controller[0].qos is required"},
		{"latency-file = \"lc-probe.csv\"\n", "", "lc.latency-file is required"},
		{`count = 2`, `count = 0`, "count 0"},
		{`mem = 64`, `mem = 0`, "lc.mem 0"},
		{`name = "dd"` + "\ncount", `name = "lc"` + "\ncount", "used twice"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			doc := strings.Replace(goodSpec, tc.old, tc.new, 1)
			if doc == goodSpec {
				t.Fatalf("%q not in the spec", tc.old)
			}
			_, err := ParseSpec([]byte(doc))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseSpec: %v, want ErrInvalid naming %q", err, tc.want)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	t.Setenv("BRIM_EXP_TEST_HOME", "/h")
	got, err := Expand("$BRIM_EXP_DIR/x ${BRIM_EXP_TEST_HOME} $$i", map[string]string{"BRIM_EXP_DIR": "/out"})
	if err != nil || got != "/out/x /h $i" {
		t.Fatalf("Expand = %q, %v", got, err)
	}
	if _, err := Expand("$BRIM_EXP_SURELY_UNSET/x", nil); err == nil || !strings.Contains(err.Error(), "BRIM_EXP_SURELY_UNSET is not set") {
		t.Fatalf("Expand of an unset name: %v, want an error naming it", err)
	}
}

// The example specs stay valid.
func TestExampleSpecsParse(t *testing.T) {
	files, err := filepath.Glob("../examples/experiments/*.toml")
	if err != nil || len(files) < 2 {
		t.Fatalf("example specs: %v %v", files, err)
	}
	for _, f := range files {
		if _, err := LoadSpecFile(f); err != nil {
			t.Errorf("%v", err)
		}
	}
}
