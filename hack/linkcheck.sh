#!/usr/bin/env bash
# linkcheck: what a package links, transitively (depguard sees only a
# file's own imports; a domain package can still link a wire through a
# helper it imports). Run by make lint; fails naming the packages.
#   - master (the domain) links no wire, store or exposition format;
#   - cli links none of the master's code: master/api and
#     master/discovery (with etcd's client) are its only master packages.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
TAGS=${TAGS:-}
fail=0
check() { # package, what it must not link (an extended regexp), why
  local bad
  bad=$("$GO" list -tags "$TAGS" -deps "$1" | grep -E "$2" || true)
  if [ -n "$bad" ]; then
    echo "linkcheck: $1 links what $3:"
    echo "$bad" | sed 's/^/  /'
    fail=1
  fi
}
check ./master '^(net/http|google\.golang\.org/(grpc|protobuf)|go\.etcd\.io/(bbolt|etcd)|github\.com/prometheus)(/|$)' \
  "the domain never does (docs/architecture.md: wire and stores are master/transport's and the stores')"
check ./cli '^(github\.com/brimnode/brim/master$|github\.com/brimnode/brim/master/(allocator|boltstore|etcdstore|record|server|transport)(/|$)|go\.etcd\.io/(bbolt|etcd/server)(/|$)|github\.com/brimnode/brim/demand(/|$))' \
  "the client commands never do (cli-speaks-the-wire: they reach the master over the wire)"
exit $fail
