package agentserver

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/internal/speclimit"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestListPaged: 100 containers with 90 KB commands (9 MB together, past
// gRPC's 4 MiB default that both ends of this in-process link keep) are
// listed in pages each below the page budget, in order, none twice.
func TestListPaged(t *testing.T) {
	ctx := context.Background()
	c := startServer(t, newFakeRuntime(t.TempDir()), socketPath(t))
	pad := strings.Repeat("x", 90_000)
	var want []string
	for i := range 100 {
		ct, err := c.Run(ctx, &agentpb.RunRequest{Name: fmt.Sprintf("c%03d", i), Command: []string{"sleep", "600", pad}, MilliCpus: 5, MemMib: 1})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		want = append(want, ct.Id)
	}

	all, err := agentpb.ListAll(ctx, c)
	if err != nil {
		t.Fatalf("list all: %v", err)
	}
	var got []string
	for _, ct := range all {
		got = append(got, ct.Id)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("listed %d containers %v, want %d in creation order %v", len(got), got, len(want), want)
	}

	// Pages by bytes: each stays within the budget plus one container.
	req, pages := &agentpb.ListRequest{}, 0
	for {
		resp, err := c.List(ctx, req)
		if err != nil {
			t.Fatalf("list page %d: %v", pages, err)
		}
		pages++
		if n := proto.Size(resp); n > speclimit.PageBytes+100_000 {
			t.Errorf("page %d is %d bytes, past the page budget %d", pages, n, speclimit.PageBytes)
		}
		if resp.NextPageToken == "" {
			break
		}
		req.PageToken = resp.NextPageToken
	}
	if pages < 9 {
		t.Errorf("9 MB listed in %d pages, want at least 9", pages)
	}

	// Pages by count; a destroyed container does not disturb the next page.
	p1, err := c.List(ctx, &agentpb.ListRequest{PageSize: 3})
	if err != nil || len(p1.Containers) != 3 || p1.NextPageToken == "" {
		t.Fatalf("page of 3: %d containers, token %q, %v", len(p1.GetContainers()), p1.GetNextPageToken(), err)
	}
	if _, err := c.Destroy(ctx, &agentpb.DestroyRequest{Id: p1.Containers[2].Id, Force: true}); err != nil {
		t.Fatal(err)
	}
	p2, err := c.List(ctx, &agentpb.ListRequest{PageSize: 3, PageToken: p1.NextPageToken})
	if err != nil || len(p2.Containers) != 3 || p2.Containers[0].Id != want[3] {
		t.Fatalf("page after a destroyed container: %v, %v; want it to start at %s", p2.GetContainers(), err, want[3])
	}

	for _, bad := range []*agentpb.ListRequest{{PageToken: "nonsense"}, {PageSize: -1}} {
		if _, err := c.List(ctx, bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("list %v: %v, want InvalidArgument", bad, err)
		}
	}
}

// TestRunRefusesOversizedSpec: what the kernel would refuse at exec is
// refused at Run, naming the limit, with nothing left behind.
func TestRunRefusesOversizedSpec(t *testing.T) {
	ctx := context.Background()
	c := startServer(t, newFakeRuntime(t.TempDir()), socketPath(t))
	for _, tc := range []struct {
		name string
		req  *agentpb.RunRequest
		want string
	}{
		{"140 KB argument", &agentpb.RunRequest{Command: []string{"sh", strings.Repeat("x", 140_000)}},
			"the limit is 131071 bytes per argument (the kernel's MAX_ARG_STRLEN)"},
		{"2 MiB of env", &agentpb.RunRequest{Command: []string{"sh"}, Env: strings.Split(strings.Repeat("A=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,", 60_000), ",")[:60_000]},
			"the limit is 1048576 bytes"},
		{"100 labels", &agentpb.RunRequest{Command: []string{"sh"}, Labels: func() map[string]string {
			m := map[string]string{}
			for i := range 100 {
				m[fmt.Sprint(i)] = "v"
			}
			return m
		}()}, "100 labels; the limit is 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.MilliCpus, tc.req.MemMib = 5, 1
			_, err := c.Run(ctx, tc.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run: %v, want InvalidArgument naming %q", err, tc.want)
			}
		})
	}
	if l, err := c.List(ctx, &agentpb.ListRequest{}); err != nil || len(l.Containers) != 0 {
		t.Fatalf("refused runs left %v (%v)", l.GetContainers(), err)
	}
}
