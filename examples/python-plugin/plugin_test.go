package pythonplugin_test

import (
	"context"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/estimator"
	brimtest "github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/resources"
)

// debianPython is the interpreter the example is written for: Debian's,
// with python3-grpcio and python3-protobuf from apt (hack/deps.sh).
const debianPython = "/usr/bin/python3"

// TestPythonEstimator runs estimator.py through the agent's plugin host
// (go-plugin handshake, gRPC health, the Estimator service) and checks
// that it offers cpus and mem.
func TestPythonEstimator(t *testing.T) {
	brimtest.SkipUnless(t, !testing.Short(), "runs a plugin process (-short)")
	err := exec.Command(debianPython, "-c", "import grpc, google.protobuf").Run()
	brimtest.Require(t, err == nil, "Debian's python3-grpcio and python3-protobuf (make deps installs them)")
	script, err := filepath.Abs("estimator.py")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	e, err := estimator.Open(estimator.NewRegistry(), "plugin:"+debianPython+" "+script, estimator.Options{"start-timeout": "30s"}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer e.(*estimator.Plugin).Close()

	now := time.Unix(1_700_000_000, 0)
	lc := monitor.ContainerUsage{ContainerInfo: monitor.ContainerInfo{ID: "lc",
		Limits: isolator.Limits{MilliCPUs: 1000, MemoryBytes: 512 << 20}}, History: monitor.NewRing(1)}
	be := monitor.ContainerUsage{ContainerInfo: monitor.ContainerInfo{ID: "be", Revocable: true,
		Limits: isolator.Limits{MilliCPUs: 250, MemoryBytes: 128 << 20, Class: isolator.BestEffort}}, History: monitor.NewRing(1)}
	u := monitor.Usage{Timestamp: now, Total: monitor.Capacity{MilliCPUs: 2000, MemoryBytes: 2048 << 20},
		Host: monitor.HostStatistics{NumCPU: 2, CPUBusyFraction: 0.25}, Containers: []monitor.ContainerUsage{lc, be}}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	est, err := e.Estimate(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	// cpus: ½ (2 − 0.5 busy) − 0.25 = 0.5; mem: ½ (2048 − 640) − 128 = 576.
	if want := resources.MustParse("cpus{REV}:0.5;mem{REV}:576"); !est.Revocable.Equal(want) {
		t.Fatalf("estimate %s, want %s\n%+v", est.Revocable, want, est.Explanation)
	}
	if !strings.Contains(est.Explanation.Summary, "half of the idle cpu") || len(est.Explanation.Terms) != 7 {
		t.Fatalf("explanation %+v", est.Explanation)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
