package timespec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// maxDepth bounds the nesting of AND/OR/NOT.
const maxDepth = 16

// maxDelay bounds ^N.
const maxDelay = 1_000_000

var (
	idRE       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	relativeRE = regexp.MustCompile(`^\+([0-9]{1,9}[hms])+$`)
	delayRE    = regexp.MustCompile(`^\^([0-9]{1,7})$`)
)

// absolute layouts, tried in order; all without a zone are UTC, and each
// may be followed by a zone (parseAbsolute).
var layouts = []string{"2006-01-02 15:04:05", "06-01-02 15:04:05"}

// Parse reads one time description. Errors wrap ErrInvalid and name the
// field and the offending text.
func Parse(data []byte) (*Description, error) {
	var top struct {
		DemandID json.RawMessage
		Start    json.RawMessage
		Duration json.RawMessage
		Deadline json.RawMessage
		OrderBy  json.RawMessage
	}
	if err := strictDecode(data, &top); err != nil {
		return nil, invalid("", "%v", err)
	}
	d := &Description{}
	var err error
	if d.DemandID, err = parseID("DemandID", top.DemandID); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  **Condition
	}{{"Start", top.Start, &d.Start}, {"Duration", top.Duration, &d.Duration}, {"Deadline", top.Deadline, &d.Deadline}} {
		if isNull(f.raw) {
			continue
		}
		if *f.dst, err = parseCondition(f.name, f.raw); err != nil {
			return nil, err
		}
	}
	if !isNull(top.OrderBy) {
		if d.OrderBy, err = parseIDExpr("OrderBy", top.OrderBy, 0); err != nil {
			return nil, err
		}
		for _, id := range d.OrderBy.IDs() {
			if id == d.DemandID {
				return nil, invalid("OrderBy", "%q: a demand cannot wait for itself", id)
			}
		}
	}
	return d, nil
}

func invalid(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if field == "" {
		return fmt.Errorf("%w: %s", ErrInvalid, msg)
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, msg)
}

// strictDecode decodes one JSON value into v, refusing unknown fields and
// trailing data.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

func parseID(field string, raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", invalid(field, "missing")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", invalid(field, "%s: want a string or a number", trim(raw))
		}
		s = n.String()
	}
	if !idRE.MatchString(s) {
		return "", invalid(field, "%q: want 1-128 characters of A-Z a-z 0-9 . _ : - (starting with a letter or digit)", s)
	}
	return s, nil
}

func trim(raw json.RawMessage) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

func parseCondition(field string, raw json.RawMessage) (*Condition, error) {
	var c struct {
		Time     json.RawMessage
		Strategy *string
	}
	if err := strictDecode(raw, &c); err != nil {
		return nil, invalid(field, "%s: %v", trim(raw), err)
	}
	cond := &Condition{}
	if c.Strategy != nil {
		switch *c.Strategy {
		case "strict":
			cond.Strategy = Strict
		case "loose":
			cond.Strategy = Loose
		default:
			return nil, invalid(field+".Strategy", "%q: want strict or loose", *c.Strategy)
		}
	}
	if isNull(c.Time) {
		return nil, invalid(field+".Time", "missing")
	}
	var err error
	if cond.Time, err = parseExpr(field+".Time", c.Time, 0); err != nil {
		return nil, err
	}
	return cond, nil
}

func parseExpr(field string, raw json.RawMessage, depth int) (Expr, error) {
	if depth > maxDepth {
		return nil, invalid(field, "nested deeper than %d", maxDepth)
	}
	t := bytes.TrimSpace(raw)
	switch {
	case len(t) > 0 && t[0] == '[':
		return parseInterval(field, t)
	case len(t) > 0 && t[0] == '{':
		op, args, err := operator(field, t)
		if err != nil {
			return nil, err
		}
		if op == "NOT" {
			x, err := parseExpr(field+".NOT", args, depth+1)
			if err != nil {
				return nil, err
			}
			return &Not{X: x}, nil
		}
		var list []json.RawMessage
		if err := json.Unmarshal(args, &list); err != nil || len(list) == 0 {
			return nil, invalid(field+"."+op, "%s: want a non-empty list of time expressions", trim(args))
		}
		out := make([]Expr, 0, len(list))
		for i, e := range list {
			x, err := parseExpr(fmt.Sprintf("%s.%s[%d]", field, op, i), e, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		if op == "AND" {
			return And(out), nil
		}
		return Or(out), nil
	default:
		return nil, invalid(field, "%s: want [T1, T2] or {\"AND\"|\"OR\"|\"NOT\": ...}", trim(raw))
	}
}

// operator reads an object with exactly one key, AND, OR or NOT.
func operator(field string, raw json.RawMessage) (string, json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", nil, invalid(field, "%s: %v", trim(raw), err)
	}
	if len(m) != 1 {
		return "", nil, invalid(field, "%s: want exactly one of AND, OR, NOT", trim(raw))
	}
	for k, v := range m {
		switch k {
		case "AND", "OR", "NOT":
			return k, v, nil
		}
		return "", nil, invalid(field, "%q: unknown operator (want AND, OR or NOT)", k)
	}
	panic("unreachable")
}

func parseInterval(field string, raw json.RawMessage) (Expr, error) {
	var ends []*string
	if err := json.Unmarshal(raw, &ends); err != nil {
		return nil, invalid(field, "%s: an interval is [T1, T2] of strings or null", trim(raw))
	}
	if len(ends) > 2 || len(ends) == 1 {
		return nil, invalid(field, "%s: an interval has two ends, [T1, T2] (use null for an open end)", trim(raw))
	}
	iv := &Interval{}
	if len(ends) == 0 {
		return iv, nil
	}
	var err error
	if iv.From, err = parsePoint(field+"[0]", ends[0], false); err != nil {
		return nil, err
	}
	if iv.To, err = parsePoint(field+"[1]", ends[1], true); err != nil {
		return nil, err
	}
	if iv.From.Kind == Absolute && iv.To.Kind == Absolute && iv.To.At.Before(iv.From.At) {
		return nil, invalid(field, "%s: T2 is before T1", trim(raw))
	}
	return iv, nil
}

func parsePoint(field string, s *string, second bool) (Point, error) {
	if s == nil || *s == "" {
		return Point{Kind: Open}, nil
	}
	v := strings.TrimSpace(*s)
	switch {
	case strings.EqualFold(v, "NOW"):
		if second {
			return Point{}, invalid(field, "%q: NOW is a start (T1); T2 is absolute, +N{s,m,h} or ^N", v)
		}
		return Point{Kind: Now}, nil
	case strings.HasPrefix(v, "+"):
		if !second {
			return Point{}, invalid(field, "%q: a relative time is only an end (T2)", v)
		}
		if !relativeRE.MatchString(v) {
			return Point{}, invalid(field, "%q: want +N with unit s, m or h (e.g. +90s, +5m, +1h30m)", v)
		}
		d, err := time.ParseDuration(v[1:])
		if err != nil || d <= 0 {
			return Point{}, invalid(field, "%q: want a positive duration", v)
		}
		return Point{Kind: Relative, Rel: d}, nil
	case strings.HasPrefix(v, "^"):
		if !second {
			return Point{}, invalid(field, "%q: a delay count is only an end (T2)", v)
		}
		m := delayRE.FindStringSubmatch(v)
		if m == nil {
			return Point{}, invalid(field, "%q: want ^N with N a count of allocation opportunities", v)
		}
		n, _ := strconv.Atoi(m[1])
		if n > maxDelay {
			return Point{}, invalid(field, "%q: at most ^%d", v, maxDelay)
		}
		return Point{Kind: Delay, Count: n}, nil
	}
	at, err := parseAbsolute(v)
	if err != nil {
		return Point{}, invalid(field, "%q: want NOW, \"YYYY-MM-DD hh:mm:ss\" or \"YY-MM-DD hh:mm:ss\" (UTC, or followed by a zone: +01:00, Europe/Paris), RFC 3339%s", v, map[bool]string{true: ", +N{s,m,h} or ^N", false: ""}[second])
	}
	return Point{Kind: Absolute, At: at}, nil
}

func parseAbsolute(v string) (time.Time, error) {
	for _, l := range layouts {
		if t, err := time.ParseInLocation(l, v, time.UTC); err == nil {
			return t, nil
		}
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC(), nil
	}
	// A layout followed by a zone: an offset (+01:00, +0100, Z) or a
	// time zone name as TZ takes it (Europe/Paris, UTC).
	i := strings.LastIndexByte(v, ' ')
	if i < 0 {
		return time.Time{}, fmt.Errorf("no layout matches %q", v)
	}
	clock, zone := v[:i], v[i+1:]
	for _, l := range layouts {
		for _, z := range []string{"Z07:00", "-0700"} {
			if t, err := time.Parse(l+" "+z, v); err == nil {
				return t.UTC(), nil
			}
		}
		if strings.ContainsAny(zone[:1], "+-0123456789") {
			continue // an offset that did not parse is not a zone name
		}
		loc, err := time.LoadLocation(zone)
		if err != nil {
			continue
		}
		if t, err := time.ParseInLocation(l, clock, loc); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("no layout or zone matches %q", v)
}

func parseIDExpr(field string, raw json.RawMessage, depth int) (IDExpr, error) {
	if depth > maxDepth {
		return nil, invalid(field, "nested deeper than %d", maxDepth)
	}
	t := bytes.TrimSpace(raw)
	switch {
	case len(t) > 0 && t[0] == '[':
		list, err := idList(field, t, depth)
		if err != nil {
			return nil, err
		}
		return AllOf(list), nil
	case len(t) > 0 && t[0] == '{':
		op, args, err := operator(field, t)
		if err != nil {
			return nil, err
		}
		if op == "NOT" {
			return nil, invalid(field, "NOT is not allowed in OrderBy (it names demands that must finish first)")
		}
		list, err := idList(field+"."+op, args, depth)
		if err != nil {
			return nil, err
		}
		if op == "AND" {
			return AllOf(list), nil
		}
		return AnyOf(list), nil
	default:
		id, err := parseID(field, t)
		if err != nil {
			return nil, err
		}
		return ID(id), nil
	}
}

func idList(field string, raw json.RawMessage, depth int) ([]IDExpr, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil || len(list) == 0 {
		return nil, invalid(field, "%s: want a non-empty list of DemandIDs", trim(raw))
	}
	out := make([]IDExpr, 0, len(list))
	for i, e := range list {
		x, err := parseIDExpr(fmt.Sprintf("%s[%d]", field, i), e, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}
