package agentpb

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
)

// Lister is the part of the API ListAll calls (AgentClient has it).
type Lister interface {
	List(ctx context.Context, in *ListRequest, opts ...grpc.CallOption) (*ListResponse, error)
}

// ListAll fetches every page of c.List (see ListRequest) and returns the
// containers in the agent's order. An agent older than paging answers in
// one page. A token that comes back again ends the listing with an error
// rather than looping.
func ListAll(ctx context.Context, c Lister, opts ...grpc.CallOption) ([]*Container, error) {
	var out []*Container
	req := &ListRequest{}
	for {
		resp, err := c.List(ctx, req, opts...)
		if err != nil {
			return nil, err
		}
		out = append(out, resp.GetContainers()...)
		next := resp.GetNextPageToken()
		if next == "" {
			return out, nil
		}
		if next == req.PageToken {
			return nil, fmt.Errorf("list containers: the agent repeated page token %q", next)
		}
		req = &ListRequest{PageToken: next}
	}
}
