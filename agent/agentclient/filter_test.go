package agentclient

import (
	"strings"
	"testing"

	"github.com/brimnode/brim/agent/agentpb"
)

// Filters as docker ps reads them: one key's filters are ORed, different
// keys ANDed, label filters each required.
func TestFilter(t *testing.T) {
	cs := []*agentpb.Container{
		{Id: "aaa111", Name: "web-1", State: "running", Labels: map[string]string{"app": "web", "tier": "front"}},
		{Id: "aaa222", Name: "web-2", State: "running", Paused: true, Labels: map[string]string{"app": "web"}},
		{Id: "bbb333", Name: "db", State: "exited", Revocable: true, Exit: &agentpb.ExitStatus{Code: 3}, Labels: map[string]string{"app": "db"}},
		{Id: "ccc444", Name: "batch", State: "running", QosFrozen: true},
	}
	for _, c := range []struct {
		filters []string
		want    string
	}{
		{nil, "web-1 web-2 db batch"},
		{[]string{"state=running"}, "web-1"},
		{[]string{"state=running", "state=paused"}, "web-1 web-2"},
		{[]string{"state=frozen"}, "batch"},
		{[]string{"status=frozen"}, "batch"},
		{[]string{"state=exited", "exited=3"}, "db"},
		{[]string{"exited=0"}, ""},
		{[]string{"label=app"}, "web-1 web-2 db"},
		{[]string{"label=app=web"}, "web-1 web-2"},
		{[]string{"label=app=web", "label=tier"}, "web-1"},
		{[]string{"label=app=web", "state=paused"}, "web-2"},
		{[]string{"name=web"}, "web-1 web-2"},
		{[]string{"name=^web-1$", "name=^db$"}, "web-1 db"},
		{[]string{"name=web", "id=aaa2"}, "web-2"},
		{[]string{"id=aaa", "id=ccc"}, "web-1 web-2 batch"},
		{[]string{"revocable=true"}, "db"},
	} {
		f, err := ParseFilters(c.filters)
		if err != nil {
			t.Fatalf("%v: %v", c.filters, err)
		}
		var got []string
		for _, ct := range cs {
			if f.Match(ct) {
				got = append(got, ct.Name)
			}
		}
		if g := strings.Join(got, " "); g != c.want {
			t.Errorf("%v: %q, want %q", c.filters, g, c.want)
		}
	}
	for bad, want := range map[string]string{
		"image=x":       "KEY one of exited, id, label, name, revocable, state",
		"state=up":      "want state=running, paused, frozen or exited",
		"name=(":        "missing closing )",
		"label==x":      "want label=KEY or label=KEY=VALUE",
		"revocable=yes": "want revocable=true or revocable=false",
	} {
		if _, err := ParseFilters([]string{bad}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseFilters(%q) = %v, want %q", bad, err, want)
		}
	}
}
