package transport

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/brimnode/brim/demand"
)

// fill sets every exported field of v (a pointer) to a value that is not
// its zero, recursively into slices of structs: a field added to the
// domain's record shows in the comparison below.
func fill(t *testing.T, v reflect.Value, n *int) {
	t.Helper()
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + string(rune('a'+*n%26)))
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(*n%5 + 1)) // a demand.State too: a valid one
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // json.RawMessage
			v.SetBytes([]byte(`{"doc":true}`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(t, s.Index(i), n)
		}
		v.Set(s)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 29, 10, 0, *n, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), n)
			}
		}
	default:
		t.Fatalf("fill: a field of kind %s: teach the test", v.Kind())
	}
}

// TestDemandToAPI: the operator API's demand (master/api) carries every
// field of the domain's record, under the name GET /demands always gave
// it: the JSON of both is the same.
func TestDemandToAPI(t *testing.T) {
	var d demand.Demand
	n := 0
	fill(t, reflect.ValueOf(&d).Elem(), &n)
	want, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(demandToAPI(d))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("api.Demand:\n%s\nthe domain's demand.Demand:\n%s", got, want)
	}
	if b, _ := json.Marshal(demandsToAPI(nil)); string(b) != "[]" {
		t.Errorf("no demands: %s, want []", b)
	}
}
