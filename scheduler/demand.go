package scheduler

import (
	"context"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// SubmitDemand submits a time-aware demand for this framework: document
// is its JSON, or a JSON list of demands submitted all or nothing
// (docs/demands.md). Its transitions arrive through Callbacks.Demand and
// its capacity as offers whose DemandId names it. Errors are the
// master's (codes.InvalidArgument naming the field, PermissionDenied
// without the submit_demand ACL, FailedPrecondition for an ID in use).
func (d *Driver) SubmitDemand(ctx context.Context, document []byte) error {
	id, err := d.fid()
	if err != nil {
		return err
	}
	_, err = d.api.SubmitDemand(ctx, &pb.SubmitDemandRequest{FrameworkId: id, Document: string(document)})
	return err
}

// CancelDemand fails one of this framework's demands (cancelled): its
// capacity is released and its tasks killed.
func (d *Driver) CancelDemand(ctx context.Context, demandID string) error {
	id, err := d.fid()
	if err != nil {
		return err
	}
	_, err = d.api.CancelDemand(ctx, &pb.CancelDemandRequest{FrameworkId: id, DemandId: demandID})
	return err
}
