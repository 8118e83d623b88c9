// Package pluginpb is the protocol between the brim agent and
// out-of-process resource estimators and QoS controllers.
//
// It owns: the generated gRPC code of plugin.proto (committed; `make
// generate` rebuilds it), the go-plugin handshake and plugin names
// (Handshake, EstimatorPlugin, QoSPlugin), and the conversion between
// monitor.Usage and its wire form.
//
// It never runs anything: internal/pluginhost starts and supervises
// plugin processes and serves the Go side; the estimator and qos packages
// own the contracts, the Go serve side (estimator.Serve, qos.Serve) and
// the fallback policy. Plugins in other languages need only plugin.proto
// and the handshake described in docs/plugins.md.
package pluginpb
