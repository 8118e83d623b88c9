package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

func TestNewRefusesNamingTheFlag(t *testing.T) {
	for _, tc := range []struct{ level, format, want string }{
		{"loud", "text", `--log-level "loud"`},
		{"info", "xml", `--log-format "xml"`},
	} {
		if _, err := New(&bytes.Buffer{}, tc.level, tc.format, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q, %q) = %v, want an error naming %s", tc.level, tc.format, err, tc.want)
		}
	}
}

// A held level changes what is logged afterwards (the agent's reload).
func TestNewHeldLevel(t *testing.T) {
	var buf bytes.Buffer
	lv := new(slog.LevelVar)
	log, err := New(&buf, "warn", "json", lv)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	lv.Set(slog.LevelInfo)
	log.Info("shown")
	if out := buf.String(); strings.Contains(out, "hidden") || !strings.Contains(out, `"msg":"shown"`) {
		t.Fatalf("log output:\n%s", out)
	}
}

// libcontainer's logrus entries keep their level and fields in slog.
func TestLogrusHookLevels(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "debug", "text", nil)
	if err != nil {
		t.Fatal(err)
	}
	h := logrusHook{log}
	for _, e := range []*logrus.Entry{
		{Level: logrus.ErrorLevel, Message: "e1", Data: logrus.Fields{"k": "v"}},
		{Level: logrus.WarnLevel, Message: "w1"},
		{Level: logrus.InfoLevel, Message: "i1"},
		{Level: logrus.TraceLevel, Message: "t1"},
	} {
		if err := h.Fire(e); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"level=ERROR msg=e1 k=v", "level=WARN msg=w1", "level=INFO msg=i1", "level=DEBUG msg=t1"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, buf.String())
		}
	}
}

// jsonKeys returns the top-level keys of one JSON object line, in order,
// duplicates kept (a map would keep only the last).
func jsonKeys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", line)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		keys = append(keys, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	return keys
}

// The daemons' JSON lines carry one component, the innermost, however
// many times loggers were given one (a plugin host below the agent's
// estimator named it again), also inside groups and from the record;
// durations are Go durations, not nanoseconds.
func TestJSONOneComponentAndDurations(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "debug", "json", nil)
	if err != nil {
		t.Fatal(err)
	}
	est := log.With("component", "agentd").With("component", "estimator", "estimator", "plugin:/x")
	est.Info("plugin failed", "backoff", 1500*time.Millisecond)
	est.Info("from the plugin", "component", "go-plugin")
	est.WithGroup("g").Info("grouped", "k", 1)
	log.Info("no component")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	wantComp := []string{"estimator", "go-plugin", "estimator", ""}
	for i, l := range lines {
		n := 0
		for _, k := range jsonKeys(t, l) {
			if k == "component" {
				n++
			}
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		if want := wantComp[i]; (want == "" && n != 0) || (want != "" && (n != 1 || m["component"] != want)) {
			t.Errorf("line %d: %d component keys, component %v, want one %q:\n%s", i, n, m["component"], want, l)
		}
	}
	if !strings.Contains(lines[0], `"backoff":"1.5s"`) || !strings.Contains(lines[0], `"estimator":"plugin:/x"`) {
		t.Errorf("line 0: %s", lines[0])
	}
	if !strings.Contains(lines[2], `"g":{"k":1}`) {
		t.Errorf("line 2: %s", lines[2])
	}
}

// logValue is a type with a LogValuer, as agent.Resources has.
type logValue struct{ MilliCPUs int64 }

func (v logValue) LogValue() slog.Value { return slog.StringValue("cpus:0.5") }

func TestTextDurationsAndValuers(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "info", "text", nil)
	if err != nil {
		t.Fatal(err)
	}
	log.With("component", "a").With("component", "b").Info("m", "d", 2*time.Second, "r", logValue{500})
	if got := buf.String(); strings.Count(got, "component=") != 1 || !strings.Contains(got, "component=b") ||
		!strings.Contains(got, "d=2s") || !strings.Contains(got, "r=cpus:0.5") {
		t.Errorf("text line: %s", got)
	}
}
