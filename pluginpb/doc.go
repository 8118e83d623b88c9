// Package pluginpb is the wire protocol between the brim agent and
// out-of-process resource estimators and QoS controllers: the generated
// gRPC code of plugin.proto (committed; `make generate` rebuilds it).
//
// The hand-written host and serve sides live in the packages that own the
// contracts (estimator, qos); this package holds only the generated code,
// so plugins in other languages need nothing but plugin.proto.
package pluginpb
