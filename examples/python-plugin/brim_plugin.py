"""Serve a brim plugin from Python with nothing but Debian's python3-grpcio
and python3-protobuf: the go-plugin handshake, the gRPC health service
(grpc.health.v1, which Debian does not package: health_pb2.py is generated
from the health.proto shipped here) and the registration of a brim service
without generated *_pb2_grpc.py stubs.
"""

import os
import sys
import time
from concurrent import futures

import grpc

import health_pb2
import plugin_pb2

MAGIC_KEY = "BRIM_PLUGIN_MAGIC_COOKIE"
MAGIC_VALUE = "brim-oversubscription"


class _Health:
    """grpc.health.v1.Health: SERVING for "" and "plugin" (go-plugin asks for "plugin")."""

    def check(self, request, context):
        if request.service not in ("", "plugin"):
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown service " + request.service)
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)

    def watch(self, request, context):
        yield self.check(request, context)
        while context.is_active():
            time.sleep(1)


def _unary(fn, req, resp):
    return grpc.unary_unary_rpc_method_handler(
        fn, request_deserializer=req.FromString, response_serializer=resp.SerializeToString)


def serve(estimate=None, corrections=None):
    """Serve an estimator (estimate(EstimateRequest, context) -> EstimateResponse)
    or a QoS controller (corrections(CorrectionsRequest, context) ->
    CorrectionsResponse) until the agent kills the process."""
    if os.environ.get(MAGIC_KEY) != MAGIC_VALUE:
        sys.exit("this is a brim plugin: the brim agent starts it")
    if "1" not in os.environ.get("PLUGIN_PROTOCOL_VERSIONS", "1").split(","):
        sys.exit("the agent does not speak app protocol version 1")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    handlers = []
    if estimate is not None:
        handlers.append(grpc.method_handlers_generic_handler("brim.plugin.v1.Estimator", {
            "Estimate": _unary(estimate, plugin_pb2.EstimateRequest, plugin_pb2.EstimateResponse)}))
    if corrections is not None:
        handlers.append(grpc.method_handlers_generic_handler("brim.plugin.v1.QoSController", {
            "Corrections": _unary(corrections, plugin_pb2.CorrectionsRequest, plugin_pb2.CorrectionsResponse)}))
    h = _Health()
    handlers.append(grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
        "Check": _unary(h.check, health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse),
        "Watch": grpc.unary_stream_rpc_method_handler(
            h.watch, request_deserializer=health_pb2.HealthCheckRequest.FromString,
            response_serializer=health_pb2.HealthCheckResponse.SerializeToString)}))
    # go-plugin's plugin.GRPCController/Shutdown (an empty message each
    # way) asks the plugin to exit; without it the host waits 2 s, then
    # kills the process.
    def shutdown(request, context):
        server.stop(grace=0.5)
        return b""
    handlers.append(grpc.method_handlers_generic_handler("plugin.GRPCController", {
        "Shutdown": grpc.unary_unary_rpc_method_handler(
            shutdown, request_deserializer=lambda b: b, response_serializer=lambda b: b)}))
    server.add_generic_rpc_handlers(handlers)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    # core protocol 1 | app protocol 1 | network | address | protocol
    print(f"1|1|tcp|127.0.0.1:{port}|grpc", flush=True)
    server.wait_for_termination()
