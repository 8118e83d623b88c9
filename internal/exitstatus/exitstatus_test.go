package exitstatus

import (
	"encoding/json"
	"testing"
	"time"
)

func TestSignalNames(t *testing.T) {
	for n := 1; n < len(signalNames); n++ {
		name := SignalName(n)
		if name == "" || SignalNumber(name) != n {
			t.Errorf("signal %d: name %q, back %d", n, name, SignalNumber(name))
		}
	}
	for _, tc := range []struct {
		n    int
		name string
	}{{0, ""}, {-1, ""}, {34, ""}, {9, "SIGKILL"}, {15, "SIGTERM"}} {
		if got := SignalName(tc.n); got != tc.name {
			t.Errorf("SignalName(%d) = %q, want %q", tc.n, got, tc.name)
		}
	}
	if SignalNumber("SIGNOPE") != 0 || SignalNumber("") != 0 {
		t.Error("unknown names must be 0")
	}
}

func TestReasonsKnown(t *testing.T) {
	seen := map[Reason]bool{}
	for _, r := range Reasons() {
		if seen[r] {
			t.Errorf("reason %q listed twice", r)
		}
		seen[r] = true
		if !r.Known() {
			t.Errorf("reason %q not known", r)
		}
	}
	if Reason("from-a-newer-shim").Known() {
		t.Error("an unlisted reason is known")
	}
}

// The JSON form is the agent checkpoint's (camelCase, signal number):
// records written before the vocabulary moved here still decode.
func TestStatusJSONIsTheCheckpoints(t *testing.T) {
	old := `{"code":137,"signal":9,"oomKilled":true,"reason":"memory-limit","message":"m","finishedAt":"2026-11-29T00:00:00Z"}`
	var st Status
	if err := json.Unmarshal([]byte(old), &st); err != nil {
		t.Fatal(err)
	}
	want := Status{Code: 137, Signal: 9, OOMKilled: true, Reason: ReasonMemoryLimit, Message: "m", FinishedAt: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)}
	if st != want {
		t.Fatalf("decoded %+v, want %+v", st, want)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != old {
		t.Fatalf("encoded %s, want %s", b, old)
	}
}
