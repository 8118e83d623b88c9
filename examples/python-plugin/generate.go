// Package pythonplugin holds the Python example plugin (estimator.py,
// brim_plugin.py) and its generated message code: plugin_pb2.py from
// pluginpb/plugin.proto and health_pb2.py from health.proto, made by
// Debian's protoc (protobuf-compiler) so that they load with Debian's
// python3-protobuf. `make generate` rebuilds them; the test runs the
// plugin through the agent's plugin host.
package pythonplugin

//go:generate protoc -I ../../pluginpb --python_out=. plugin.proto
//go:generate protoc -I . --python_out=. health.proto
