package resources

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestTextMarshaling(t *testing.T) {
	type doc struct {
		Total Resources `json:"total"`
		Empty Resources `json:"empty"`
	}
	in := doc{Total: MustParse("mem:1024;cpus:2;ports:[80];cpus(r,p):1")}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	if want := `{"total":"cpus:2;cpus(r,p):1;mem:1024;ports:[80-80]","empty":""}`; string(b) != want {
		t.Errorf("json = %s, want %s", b, want)
	}
	var out doc
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	if !out.Total.Equal(in.Total) || !out.Empty.IsEmpty() {
		t.Errorf("round trip = %+v, want %+v", out, in)
	}

	if err := json.Unmarshal([]byte(`{"total":"cpus:x"}`), &out); !errors.Is(err, ErrInvalid) {
		t.Errorf("unmarshal of bad text = %v, want ErrInvalid", err)
	}
	if !out.Total.Equal(in.Total) {
		t.Errorf("failed unmarshal changed the value to %s", out.Total)
	}

	bad := Resources{{Name: "cpus", Scalar: 1000}, {Name: "cpus", Type: Ranges, Ranges: []Range{{1, 2}}}}
	if _, err := json.Marshal(doc{Total: bad}); !errors.Is(err, ErrInvalid) {
		t.Errorf("marshal of invalid resources = %v, want ErrInvalid", err)
	}
}
