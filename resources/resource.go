package resources

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Unreserved is the role of resources that any role may use.
const Unreserved = "*"

// Type is the kind of value a resource carries.
type Type int

const (
	// Scalar resources carry a Value (cpus, mem, disk, net_bw).
	Scalar Type = iota
	// Ranges resources carry inclusive integer ranges (ports).
	Ranges
	// Set resources carry a set of names (disks, devices).
	Set
)

// String returns "scalar", "ranges" or "set".
func (t Type) String() string {
	switch t {
	case Scalar:
		return "scalar"
	case Ranges:
		return "ranges"
	case Set:
		return "set"
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// Well-known resource names. Units follow Mesos: mem and disk in MiB,
// net_bw in Mbit/s.
const (
	CPUs         = "cpus"
	Mem          = "mem"
	Disk         = "disk"
	NetBandwidth = "net_bw"
	Ports        = "ports"
)

// Range is an inclusive range of integers, [Begin, End].
type Range struct{ Begin, End uint64 }

// String returns "Begin-End".
func (r Range) String() string {
	return strconv.FormatUint(r.Begin, 10) + "-" + strconv.FormatUint(r.End, 10)
}

// Reservation marks a dynamic reservation (made by a RESERVE operation) and
// records the principal who made it. A Resource with a role other than "*"
// and no Reservation is statically reserved (by an agent flag).
//
// Arithmetic results may share *Reservation pointers with their inputs:
// treat a Reservation as immutable once it is in a Resource.
type Reservation struct {
	// Principal is who made the reservation.
	Principal string
}

// Resource is one named quantity, for one role, reservation and
// revocability. Exactly one of Scalar, Ranges and Set is used, per Type.
type Resource struct {
	// Name is the resource's name, e.g. "cpus"; [A-Za-z0-9_./-]+.
	Name string
	// Type says which of Scalar, Ranges and Set holds the value.
	Type Type
	// Scalar is the amount of a Scalar resource.
	Scalar Value
	// Ranges are the inclusive ranges of a Ranges resource.
	Ranges []Range
	// Set holds the items of a Set resource.
	Set []string
	// Role is "*" (Unreserved) or the role the resource is reserved for.
	// The empty string is read as "*".
	Role string
	// Reservation is non-nil for a dynamic reservation.
	Reservation *Reservation
	// Revocable marks oversubscribed resources that may be taken back.
	Revocable bool
}

// role returns the effective role ("" reads as "*").
func (r *Resource) role() string {
	if r.Role == "" {
		return Unreserved
	}
	return r.Role
}

// IsReserved reports whether r is reserved for a role (statically or
// dynamically).
func (r Resource) IsReserved() bool { return r.role() != Unreserved }

// IsDynamic reports whether r is dynamically reserved.
func (r Resource) IsDynamic() bool { return r.Reservation != nil }

// isEmpty reports whether r carries nothing (and is dropped by
// normalization). Non-positive scalars count as empty.
func (r *Resource) isEmpty() bool {
	switch r.Type {
	case Scalar:
		return r.Scalar <= 0
	case Ranges:
		return len(r.Ranges) == 0
	case Set:
		return len(r.Set) == 0
	}
	return false
}

// String formats r in the text syntax, e.g. "cpus(hdfs,alice):2".
func (r Resource) String() string {
	return string(r.appendText(nil))
}

func (r *Resource) appendText(b []byte) []byte {
	b = append(b, r.Name...)
	if role := r.role(); role != Unreserved || r.Reservation != nil {
		b = append(b, '(')
		b = append(b, role...)
		if r.Reservation != nil {
			b = append(b, ',')
			b = append(b, r.Reservation.Principal...)
		}
		b = append(b, ')')
	}
	if r.Revocable {
		b = append(b, "{REV}"...)
	}
	b = append(b, ':')
	switch r.Type {
	case Scalar:
		b = r.Scalar.appendText(b)
	case Ranges:
		b = append(b, '[')
		for i, rg := range r.Ranges {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, rg.Begin, 10)
			b = append(b, '-')
			b = strconv.AppendUint(b, rg.End, 10)
		}
		b = append(b, ']')
	case Set:
		b = append(b, '{')
		for i, s := range r.Set {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, s...)
		}
		b = append(b, '}')
	default:
		b = append(b, '?')
	}
	return b
}

// compareKey orders resources canonically: by name, type, role ("*"
// first), static before dynamic, principal, non-revocable first. Resources
// are normalized to one entry per key.
func compareKey(a, b *Resource) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	if a.Type != b.Type {
		if a.Type < b.Type {
			return -1
		}
		return 1
	}
	ra, rb := a.role(), b.role()
	if ra != rb {
		switch {
		case ra == Unreserved:
			return -1
		case rb == Unreserved:
			return 1
		}
		return strings.Compare(ra, rb)
	}
	switch {
	case a.Reservation == nil && b.Reservation != nil:
		return -1
	case a.Reservation != nil && b.Reservation == nil:
		return 1
	case a.Reservation != nil && a.Reservation.Principal != b.Reservation.Principal:
		return strings.Compare(a.Reservation.Principal, b.Reservation.Principal)
	}
	switch {
	case a.Revocable == b.Revocable:
		return 0
	case !a.Revocable:
		return -1
	}
	return 1
}

// Syntax characters that may not appear in names, roles, principals or set
// items, so that every Resources formats to text that parses back.
const syntaxChars = "(),;:{}[]"

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '-' || c == '.' || c == '/'
}

// validWord reports whether s is non-empty printable ASCII without
// whitespace, syntax characters or any byte in extra.
func validWord(s, extra string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(syntaxChars, c) >= 0 || strings.IndexByte(extra, c) >= 0 {
			return false
		}
	}
	return true
}

// checkRole returns why role is not a valid role name, or "". Rules follow
// Mesos (not "", ".", "..", no leading "-", no "/", no whitespace) plus the
// text syntax's own characters; "*" alone is Unreserved.
func checkRole(role string) string {
	switch {
	case role == Unreserved:
		return ""
	case role == "":
		return "empty role"
	case role == "." || role == "..":
		return fmt.Sprintf("invalid role %q", role)
	case role[0] == '-':
		return fmt.Sprintf("invalid role %q: starts with '-'", role)
	case !validWord(role, "/*"):
		return fmt.Sprintf("invalid role %q: contains whitespace, '/', '*' or a reserved character", role)
	}
	return ""
}

func checkPrincipal(p string) string {
	if !validWord(p, "") {
		return fmt.Sprintf("invalid principal %q", p)
	}
	return ""
}

func checkSetItem(s string) string {
	if !validWord(s, "") {
		return fmt.Sprintf("invalid set item %q", s)
	}
	return ""
}

// check returns the structural problem with r, or nil.
func (r *Resource) check() *ValidationError {
	bad := func(reason string, err error) *ValidationError {
		return &ValidationError{Resource: r.String(), Reason: reason, Err: err}
	}
	if !validName(r.Name) {
		return bad(fmt.Sprintf("invalid name %q", r.Name), nil)
	}
	switch r.Type {
	case Scalar:
		if len(r.Ranges) != 0 || len(r.Set) != 0 {
			return bad("scalar resource carries ranges or set items", nil)
		}
		if r.Scalar < 0 {
			return bad("negative scalar "+r.Scalar.String(), nil)
		}
	case Ranges:
		if r.Scalar != 0 || len(r.Set) != 0 {
			return bad("ranges resource carries a scalar or set items", nil)
		}
		for _, rg := range r.Ranges {
			if rg.Begin > rg.End {
				return bad("invalid range "+rg.String()+": begin after end", nil)
			}
		}
		if len(r.Ranges) > 1 {
			sorted := r.Ranges
			if !slices.IsSortedFunc(sorted, compareRange) {
				sorted = slices.SortedFunc(slices.Values(r.Ranges), compareRange)
			}
			for i := 1; i < len(sorted); i++ {
				if sorted[i].Begin <= sorted[i-1].End {
					return bad("overlapping ranges "+sorted[i-1].String()+" and "+sorted[i].String(), nil)
				}
			}
		}
	case Set:
		if r.Scalar != 0 || len(r.Ranges) != 0 {
			return bad("set resource carries a scalar or ranges", nil)
		}
		for _, s := range r.Set {
			if why := checkSetItem(s); why != "" {
				return bad(why, nil)
			}
		}
		if len(r.Set) > 1 {
			sorted := r.Set
			if !slices.IsSorted(sorted) {
				sorted = slices.Sorted(slices.Values(r.Set))
			}
			for i := 1; i < len(sorted); i++ {
				if sorted[i] == sorted[i-1] {
					return bad(fmt.Sprintf("duplicate set item %q", sorted[i]), nil)
				}
			}
		}
	default:
		return bad("unknown type "+r.Type.String(), nil)
	}
	role := r.role()
	if why := checkRole(role); why != "" {
		return bad(why, nil)
	}
	if r.Reservation != nil {
		if role == Unreserved {
			return bad("dynamic reservation without a role", nil)
		}
		if why := checkPrincipal(r.Reservation.Principal); why != "" {
			return bad(why, nil)
		}
	}
	if r.Revocable && role != Unreserved {
		return bad("revocable resources cannot be reserved", ErrRevocableReservation)
	}
	return nil
}

func compareRange(a, b Range) int {
	switch {
	case a.Begin < b.Begin:
		return -1
	case a.Begin > b.Begin:
		return 1
	case a.End < b.End:
		return -1
	case a.End > b.End:
		return 1
	}
	return 0
}

// Validate reports the first structural problem in r: an invalid name, role
// or principal, a negative scalar, a range with begin after end, overlapping
// ranges or duplicate set items in one entry, a dynamic reservation for
// "*", a revocable reserved resource (ErrRevocableReservation), or one name
// used with two types. Errors are *ValidationError wrapping ErrInvalid.
// r need not be normalized.
func (r Resources) Validate() error {
	first := firstOfName(r)
	for i := range r {
		if err := r[i].check(); err != nil {
			return err
		}
		if j := first(i); r[j].Type != r[i].Type {
			return &ValidationError{
				Resource: r[i].String(),
				Reason:   fmt.Sprintf("type %s conflicts with %s %q", r[i].Type, r[j].Type, r[j].String()),
			}
		}
	}
	return nil
}

// ValidateTask validates the resources a task asks for: everything Validate
// checks, and that no name is asked for both revocable and non-revocable
// (ErrMixedRevocable): a task runs either in the guaranteed or in the
// best-effort class, never both.
func ValidateTask(r Resources) error {
	if err := r.Validate(); err != nil {
		return err
	}
	first := firstOfName(r)
	for i := range r {
		if j := first(i); r[j].Revocable != r[i].Revocable {
			return &ValidationError{
				Resource: r[i].String(),
				Reason:   fmt.Sprintf("mixes revocable and non-revocable %q", r[i].Name),
				Err:      ErrMixedRevocable,
			}
		}
	}
	return nil
}

// firstOfName returns a function giving, for each index i of r in
// increasing order, the index of the first entry with r[i]'s name (i
// itself if none comes before). Checking each entry against the first of
// its name finds any conflict, because the entries in between were checked
// against it too. Long lists use a map instead of a quadratic scan.
func firstOfName(r Resources) func(i int) int {
	if len(r) <= smallList {
		return func(i int) int {
			for j := range i {
				if r[j].Name == r[i].Name {
					return j
				}
			}
			return i
		}
	}
	seen := make(map[string]int, len(r))
	return func(i int) int {
		if j, ok := seen[r[i].Name]; ok {
			return j
		}
		seen[r[i].Name] = i
		return i
	}
}
