#!/usr/bin/python3
"""An example brim resource estimator in Python: it offers half of the
node's idle cpu and half of the memory no container was allocated, minus
what revocable containers already hold. Run by the agent:

    brim agent --estimator 'plugin:/usr/bin/python3 /path/to/estimator.py'

Needs Debian's python3-grpcio and python3-protobuf (hack/deps.sh installs
them); plugin_pb2.py and health_pb2.py sit beside this file.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import brim_plugin  # noqa: E402
import plugin_pb2  # noqa: E402

MIB = 1 << 20


def estimate(request, context):
    u = request.usage
    cpus = u.total.milli_cpus / 1000
    busy = u.host.cpu_busy_fraction * u.host.num_cpu
    rev_cpus = sum(c.milli_cpus for c in u.containers if c.revocable) / 1000
    rev_mem = sum(c.memory_bytes for c in u.containers if c.revocable) / MIB
    allocated_mem = sum(c.memory_bytes for c in u.containers) / MIB
    offer_cpus = max(0.0, 0.5 * (cpus - busy) - rev_cpus)
    offer_mem = max(0, int(0.5 * (u.total.memory_bytes / MIB - allocated_mem) - rev_mem))
    terms = [
        plugin_pb2.Term(name="node cpus", value=cpus, unit="cpus"),
        plugin_pb2.Term(name="busy cpus", value=busy, unit="cpus", note="host busy fraction × cpus"),
        plugin_pb2.Term(name="revocable allocated cpus", value=rev_cpus, unit="cpus"),
        plugin_pb2.Term(name="offer cpus", value=offer_cpus, unit="cpus", note="½ (node − busy) − revocable"),
        plugin_pb2.Term(name="node mem", value=u.total.memory_bytes / MIB, unit="MiB"),
        plugin_pb2.Term(name="allocated mem", value=allocated_mem, unit="MiB", note="every container"),
        plugin_pb2.Term(name="offer mem", value=offer_mem, unit="MiB", note="½ (node − allocated) − revocable"),
    ]
    return plugin_pb2.EstimateResponse(
        # Mesos text syntax, at most three decimals; the agent marks it revocable.
        revocable=f"cpus:{offer_cpus:.3f};mem:{offer_mem}",
        explanation=plugin_pb2.Explanation(summary="half of the idle cpu, half of the unallocated memory", terms=terms))


if __name__ == "__main__":
    brim_plugin.serve(estimate=estimate)
