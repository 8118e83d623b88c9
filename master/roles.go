package master

import (
	"fmt"

	"github.com/brimnode/brim/resources"
)

// ValidateRole checks a role a framework subscribes with, a quota or a
// weight is set for, or resources are reserved for. Every role entering
// the master goes through it, so that no quota or weight is kept for a
// role no framework could ever use. The rule is Mesos's, as
// resources.ValidateRole states it: printable ASCII, not "", "." or "..",
// not starting with "-", without whitespace, "/", "*" or any of
// "(),;:{}[]"; and not "*", which means unreserved and is nobody's role.
// Errors wrap ErrInvalid.
func ValidateRole(role string) error {
	if role == resources.Unreserved {
		return fmt.Errorf("role %q: the unreserved role cannot be named: %w", role, ErrInvalid)
	}
	if err := resources.ValidateRole(role); err != nil {
		return fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	return nil
}
