package pluginhost

import (
	"context"

	"github.com/brimnode/brim/pluginpb"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// grpcPlugin is the go-plugin definition of one brim plugin over gRPC:
// register serves it (the plugin's side), client reaches it (the
// host's side).
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	register func(*grpc.Server)
	client   func(*grpc.ClientConn) any
}

var _ plugin.GRPCPlugin = (*grpcPlugin)(nil)

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	p.register(s)
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return p.client(c), nil
}

// Serve serves the plugin called name (pluginpb.EstimatorPlugin,
// pluginpb.QoSPlugin) on stdin/stdout with go-plugin's protocol and the
// brim handshake; register registers its gRPC service
// (pluginpb.RegisterEstimatorServer, …). It returns when the host kills
// the process. estimator.Serve and qos.Serve call it from a plugin's main.
func Serve(name string, register func(*grpc.Server)) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: pluginpb.Handshake,
		Plugins:         plugin.PluginSet{name: &grpcPlugin{register: register}},
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}
