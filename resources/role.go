package resources

import "fmt"

// ValidateRole checks a role name against the rules of the text syntax
// (see the package documentation): printable ASCII, not "", "." or "..",
// not starting with "-", without whitespace, "/", "*" or any of
// "(),;:{}[]". Unreserved ("*") is valid here: callers that need a named
// role reject it themselves. Errors wrap ErrInvalid.
func ValidateRole(role string) error {
	if why := checkRole(role); why != "" {
		return fmt.Errorf("%s: %w", why, ErrInvalid)
	}
	return nil
}
