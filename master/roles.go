package master

import (
	"fmt"

	"github.com/brimnode/brim/resources"
)

// MaxRoleBytes is the longest role name, in bytes. Mesos asks a role name
// to be a valid directory name; brim's roles have no "/", so a role is
// one path component, and a component is at most NAME_MAX (255) bytes.
// Without a limit a 100,000-byte role was kept by /reserve (and came back
// after a restart) while /quota and /weights failed on the store's key
// limit with a 500.
const MaxRoleBytes = 255

// ValidateRole checks a role a framework subscribes with, a quota or a
// weight is set for, resources are reserved for, a demand names or an
// agent offers reserved resources for. Every role entering the master
// goes through it, so that no quota or weight is kept for a role no
// framework could ever use. The rule is Mesos's, as
// resources.ValidateRole states it: printable ASCII, not "", "." or "..",
// not starting with "-", without whitespace, "/", "*" or any of
// "(),;:{}[]"; and not "*", which means unreserved and is nobody's role;
// and at most MaxRoleBytes long. Errors wrap ErrInvalid; they quote at
// most the start of a long role.
func ValidateRole(role string) error {
	if len(role) > MaxRoleBytes {
		return fmt.Errorf("role %q… of %d bytes: longer than the %d-byte limit of a role name: %w", role[:32], len(role), MaxRoleBytes, ErrInvalid)
	}
	if role == resources.Unreserved {
		return fmt.Errorf("role %q: the unreserved role cannot be named: %w", role, ErrInvalid)
	}
	if err := resources.ValidateRole(role); err != nil {
		return fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	return nil
}

// validateRolesIn checks the roles of reserved resources (unreserved ones
// name none) with ValidateRole.
func validateRolesIn(res resources.Resources) error {
	for role := range res.ByRole() {
		if role == resources.Unreserved || role == "" {
			continue
		}
		if err := ValidateRole(role); err != nil {
			return err
		}
	}
	return nil
}
