package master

import (
	"fmt"

	"github.com/brimnode/brim/image"
)

// checkTaskImage checks, at ACCEPT, what the agent would refuse of a
// task's command and image: a task without an image needs a command (an
// image's entrypoint or cmd may stand in for it; the agent refuses the
// task if the image has neither), the image is a reference (or an image
// ID) that parses, the pull policy is one the agents know, and a
// read-write root needs an image. Errors wrap ErrInvalid.
func checkTaskImage(t taskInfo) error {
	if t.image == "" {
		switch {
		case len(t.command) == 0:
			return fmt.Errorf("no command: %w", ErrInvalid)
		case t.imagePull != "" || t.imageRW:
			return fmt.Errorf("image_pull or image_read_write without an image: %w", ErrInvalid)
		}
		return nil
	}
	if _, err := image.ParseReference(t.image); err != nil && !image.IsID(t.image) {
		return fmt.Errorf("image: %w: %w", ErrInvalid, err)
	}
	switch t.imagePull {
	case "", "missing", "always", "never":
	default:
		return fmt.Errorf("image_pull %q: want missing, always or never: %w", t.imagePull, ErrInvalid)
	}
	return nil
}
