package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/brimnode/brim/master/api"
)

// Demands lists the master's demands (GET /demands).
func (c *Client) Demands(ctx context.Context) ([]api.Demand, error) {
	var ds []api.Demand
	return ds, c.do(ctx, "GET", "/demands", nil, &ds)
}

// Demand returns one demand (GET /demands/ID).
func (c *Client) Demand(ctx context.Context, id string) (*api.Demand, error) {
	var d api.Demand
	return &d, c.do(ctx, "GET", "/demands/"+url.PathEscape(id), nil, &d)
}

// SubmitDemands posts a demand document, or a JSON list of them, as is
// (POST /demands) and returns the demands as submitted. A document that
// is not JSON is refused here, before anything is sent.
func (c *Client) SubmitDemands(ctx context.Context, document []byte) ([]api.Demand, error) {
	if !json.Valid(document) {
		return nil, fmt.Errorf("demand document: not valid JSON")
	}
	var ds []api.Demand
	return ds, c.do(ctx, "POST", "/demands", json.RawMessage(document), &ds)
}

// UpdateDemand replaces demand id's document (PUT /demands/ID): a new
// window, size or deadline for a demand not handed over yet, planned
// again by the master. A document that is not JSON is refused here,
// before anything is sent.
func (c *Client) UpdateDemand(ctx context.Context, id string, document []byte) (*api.Demand, error) {
	if !json.Valid(document) {
		return nil, fmt.Errorf("demand document: not valid JSON")
	}
	var d api.Demand
	return &d, c.do(ctx, "PUT", "/demands/"+url.PathEscape(id), json.RawMessage(document), &d)
}

// CancelDemand cancels a demand (DELETE /demands/ID).
func (c *Client) CancelDemand(ctx context.Context, id string) (*api.Demand, error) {
	var d api.Demand
	return &d, c.do(ctx, "DELETE", "/demands/"+url.PathEscape(id), nil, &d)
}
