package timespec

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// MarshalJSON writes the canonical form of d, which Parse reads back to
// an equal description: absolute times in RFC 3339 UTC, relative times in
// seconds, the strategy always spelled out.
func (d *Description) MarshalJSON() ([]byte, error) {
	m := map[string]any{"DemandID": d.DemandID}
	for name, c := range map[string]*Condition{"Start": d.Start, "Duration": d.Duration, "Deadline": d.Deadline} {
		if c != nil {
			m[name] = map[string]any{"Time": exprJSON(c.Time), "Strategy": c.Strategy.String()}
		}
	}
	if d.OrderBy != nil {
		m["OrderBy"] = idJSON(d.OrderBy)
	}
	return json.Marshal(m)
}

func exprJSON(e Expr) any {
	switch e := e.(type) {
	case *Interval:
		if e.From.Kind == Open && e.To.Kind == Open {
			return []any{}
		}
		return []any{pointJSON(e.From), pointJSON(e.To)}
	case And:
		return map[string]any{"AND": exprsJSON(e)}
	case Or:
		return map[string]any{"OR": exprsJSON(e)}
	case *Not:
		return map[string]any{"NOT": exprJSON(e.X)}
	}
	panic(fmt.Sprintf("timespec: unknown expression %T", e))
}

func exprsJSON(es []Expr) []any {
	out := make([]any, len(es))
	for i, e := range es {
		out[i] = exprJSON(e)
	}
	return out
}

func pointJSON(p Point) any {
	switch p.Kind {
	case Now:
		return "NOW"
	case Absolute:
		return p.At.UTC().Format(time.RFC3339)
	case Relative:
		return "+" + strconv.FormatInt(int64(p.Rel/time.Second), 10) + "s"
	case Delay:
		return "^" + strconv.Itoa(p.Count)
	}
	return nil
}

func idJSON(e IDExpr) any {
	switch e := e.(type) {
	case ID:
		return string(e)
	case AllOf:
		return map[string]any{"AND": idsJSON(e)}
	case AnyOf:
		return map[string]any{"OR": idsJSON(e)}
	}
	panic(fmt.Sprintf("timespec: unknown id expression %T", e))
}

func idsJSON(es []IDExpr) []any {
	out := make([]any, len(es))
	for i, e := range es {
		out[i] = idJSON(e)
	}
	return out
}
