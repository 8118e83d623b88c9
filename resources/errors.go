package resources

import (
	"errors"
	"strconv"
)

var (
	// ErrInvalid is wrapped by every parse and validation error.
	ErrInvalid = errors.New("invalid resources")
	// ErrRevocableReservation is returned when revocable resources would be
	// reserved: oversubscribed resources can be taken back at any time, so
	// they cannot be promised to a role.
	ErrRevocableReservation = errors.New("revocable resources cannot be reserved")
	// ErrMixedRevocable is returned by ValidateTask when a task asks for
	// revocable and non-revocable resources of the same name.
	ErrMixedRevocable = errors.New("task mixes revocable and non-revocable resources of one name")
)

// ParseError is the error Parse returns. It names the offending token (one
// `;`-separated resource, trimmed) and why it was rejected. It matches
// ErrInvalid with errors.Is, and also Err when that is set (for example
// ErrRevocableReservation for `cpus(hdfs){REV}:1`).
type ParseError struct {
	// Token is the resource text that was rejected, e.g. "cpu:abc".
	Token string
	// Reason says what is wrong with it, e.g. `invalid scalar "abc"`.
	Reason string
	// Err is a more specific sentinel than ErrInvalid, or nil.
	Err error
}

// Error returns `resource "cpu:abc": invalid scalar "abc"`.
func (e *ParseError) Error() string {
	return "resource " + strconv.Quote(e.Token) + ": " + e.Reason
}

// Unwrap returns ErrInvalid and, when set, the specific sentinel.
func (e *ParseError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

// ValidationError is the error Validate and ValidateTask return for a
// structurally invalid resource. It matches ErrInvalid, and also Err when
// set (ErrRevocableReservation, ErrMixedRevocable).
type ValidationError struct {
	// Resource is the offending resource formatted in the text syntax (best
	// effort: an invalid resource may not parse back).
	Resource string
	// Reason says what is wrong with it.
	Reason string
	// Err is a more specific sentinel than ErrInvalid, or nil.
	Err error
}

// Error returns `resource "cpus:-1": negative scalar -1`.
func (e *ValidationError) Error() string {
	return "resource " + strconv.Quote(e.Resource) + ": " + e.Reason
}

// Unwrap returns ErrInvalid and, when set, the specific sentinel.
func (e *ValidationError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}
