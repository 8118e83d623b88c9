package logging

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

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
