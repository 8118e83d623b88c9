package master

import (
	"fmt"

	"github.com/brimnode/brim/image/imageref"
)

// checkTaskImage checks, at ACCEPT, what the agent would refuse of a
// task's command and image: a task without an image needs a command (an
// image's entrypoint or cmd may stand in for it; the agent refuses the
// task if the image has neither), the image is a reference (or an image
// ID) that parses, the pull policy is one the agents know, and a
// read-write root needs an image. Errors wrap ErrInvalid.
func checkTaskImage(t TaskInfo) error {
	if t.Image == "" {
		switch {
		case len(t.Command) == 0:
			return fmt.Errorf("no command: %w", ErrInvalid)
		case t.ImagePull != "" || t.ImageRW:
			return fmt.Errorf("image_pull or image_read_write without an image: %w", ErrInvalid)
		}
		return nil
	}
	if _, err := imageref.Parse(t.Image); err != nil && !imageref.IsID(t.Image) {
		return fmt.Errorf("image: %w: %w", ErrInvalid, err)
	}
	switch t.ImagePull {
	case "", "missing", "always", "never":
	default:
		return fmt.Errorf("image_pull %q: want missing, always or never: %w", t.ImagePull, ErrInvalid)
	}
	return nil
}
