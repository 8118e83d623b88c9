package agent

import "context"

// ResizeLabeled is Resize that also sets labels on the container (merged
// into its labels) in the same checkpoint as the new limits: the master
// link keeps a task's resources in a label, and a restarted agent must
// report the resources its container really has. Errors are Resize's.
func (a *Agent) ResizeLabeled(ctx context.Context, ref string, u Update, labels map[string]string) (*Container, error) {
	return a.resize(ctx, ref, u, labels)
}
