package agentserver

import (
	"context"
	"errors"
	"syscall"

	"google.golang.org/grpc/codes"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/image"
)

// imageCode is the gRPC code of an image store's error; ok false when
// err is none of its.
func imageCode(err error) (codes.Code, bool) {
	switch {
	case errors.Is(err, image.ErrNotFound):
		return codes.NotFound, true
	case errors.Is(err, image.ErrInvalidReference), errors.Is(err, image.ErrNoCommand):
		return codes.InvalidArgument, true
	case errors.Is(err, image.ErrUnauthorized):
		return codes.PermissionDenied, true
	case errors.Is(err, image.ErrDigestMismatch), errors.Is(err, image.ErrNoPlatform),
		errors.Is(err, image.ErrUnsafeLayer), errors.Is(err, image.ErrInsecure), errors.Is(err, image.ErrInUse):
		return codes.FailedPrecondition, true
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return codes.ResourceExhausted, true
	}
	return codes.OK, false
}

func (s *server) PullImage(r *agentpb.PullImageRequest, stream agentpb.Agent_PullImageServer) error {
	img, err := s.a.PullImage(stream.Context(), r.Source, r.Name, func(p image.LayerProgress) {
		// A client gone mid-pull ends the stream's context, and the pull.
		_ = stream.Send(&agentpb.PullImageProgress{Layer: int32(p.Index), Layers: int32(p.Count), Digest: p.Digest,
			Size: p.Size, Fetched: p.Fetched, Cached: p.Cached})
	})
	if err != nil {
		return toStatus(err)
	}
	return stream.Send(&agentpb.PullImageProgress{Image: imageToProto(agent.ImageInfo{Image: img})})
}

func (s *server) ListImages(context.Context, *agentpb.ListImagesRequest) (*agentpb.ListImagesResponse, error) {
	imgs, cache, err := s.a.Images()
	if err != nil {
		return nil, toStatus(err)
	}
	out := &agentpb.ListImagesResponse{CacheBytes: cache.Bytes, CacheMaxBytes: cache.MaxBytes}
	for _, img := range imgs {
		out.Images = append(out.Images, imageToProto(img))
	}
	return out, nil
}

func (s *server) RemoveImage(ctx context.Context, r *agentpb.RemoveImageRequest) (*agentpb.PruneImagesResponse, error) {
	rep, err := s.a.RemoveImage(ctx, r.Ref)
	if err != nil {
		return nil, toStatus(err)
	}
	return pruneToProto(rep), nil
}

func (s *server) PruneImages(ctx context.Context, _ *agentpb.PruneImagesRequest) (*agentpb.PruneImagesResponse, error) {
	rep, err := s.a.PruneImages(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return pruneToProto(rep), nil
}

func pruneToProto(r image.PruneReport) *agentpb.PruneImagesResponse {
	return &agentpb.PruneImagesResponse{Images: r.Images, Layers: int32(r.Layers), Bytes: r.Bytes}
}

func imageToProto(in agent.ImageInfo) *agentpb.Image {
	c := in.Config
	return &agentpb.Image{
		Id: in.ID, Digest: in.Digest, Refs: in.Refs, Platform: in.Platform, Layers: int32(len(in.Layers)),
		Size: in.Size, PulledUnixNano: unixNano(in.Pulled), LastUsedUnixNano: unixNano(in.LastUsed),
		Containers: in.Containers, Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: c.Env, WorkingDir: c.WorkingDir,
		User: c.User, ExposedPorts: c.ExposedPorts,
	}
}
