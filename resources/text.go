package resources

import "fmt"

// MarshalText returns r in the canonical text syntax, so Resources encode
// as a string in JSON, YAML and flag values. Resources that would not parse
// back (see Validate) are refused with an error wrapping ErrInvalid, so an
// unreadable checkpoint is never written.
func (r Resources) MarshalText() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("marshal resources: %w", err)
	}
	return []byte(r.String()), nil
}

// UnmarshalText parses text (see Parse) into r. On error r is unchanged
// and the error is a *ParseError.
func (r *Resources) UnmarshalText(text []byte) error {
	v, err := Parse(string(text))
	if err != nil {
		return err
	}
	*r = v
	return nil
}
