package pluginhost

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A plugin's hclog line keeps its level and attributes in the host's log,
// but not go-plugin's "plugin" key: the Supervisor's logger names the
// plugin already, and a JSON line held the key twice.
func TestSlogWriterOneKeyPerName(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})).With("plugin", "/bin/p")
	w := &slogWriter{log: log}
	if _, err := w.Write([]byte(`{"@level":"info","@message":"plugin process exited","@timestamp":"x","plugin":"/bin/p","id":"42"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	if strings.Count(got, `"plugin"`) != 1 || !strings.Contains(got, `"level":"INFO","msg":"plugin process exited"`) || !strings.Contains(got, `"id":"42"`) {
		t.Errorf("log line: %s", got)
	}
}
