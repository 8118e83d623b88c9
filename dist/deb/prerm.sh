#!/bin/sh
# brim prerm. On removal — `remove` and `purge` alike: dpkg runs prerm with
# "remove" for both, while the binaries are still there — stop both units
# and tear down what the agent left on the node: `brim agent cleanup` kills
# the containers still running (through the agent's cgroups) and removes
# every object the agent made (cgroups, netns mounts, links, nft table,
# records). If it fails, for instance because an agent started outside
# systemd still holds the state dir, the removal is refused: the package
# stays installed and nothing under /var/lib/brim is deleted beneath running
# containers. An upgrade (prerm "upgrade") stops and cleans nothing:
# containers keep running and the restarted agent recovers them.
set -e
case "$1" in
remove)
  if [ -d /run/systemd/system ]; then
    # A unit that is not loaded or not running is not an error here; one
    # that does not stop leaves the agent's lock held, and cleanup says so.
    systemctl stop brim-master.service brim-agent.service >/dev/null 2>&1 || true
  fi
  if [ "${BRIM_REMOVE_WITHOUT_CLEANUP:-}" = 1 ]; then
    echo "brim: BRIM_REMOVE_WITHOUT_CLEANUP=1: removing without brim agent cleanup; containers, cgroups and network objects the agent made stay on this node" >&2
    exit 0
  fi
  set --
  if [ -e /etc/brim/agent.toml ]; then set -- --config /etc/brim/agent.toml; fi
  if ! /usr/bin/brim agent cleanup "$@"; then
    cat >&2 <<'MSG'
brim: removal refused: `brim agent cleanup --config /etc/brim/agent.toml` failed
(its message is above). Removing the package now would delete /var/lib/brim
beneath containers that may still run. Stop every brim agent on this node
(`systemctl stop brim-agent`, and any started by hand), run the command
again until it succeeds, then remove the package. To remove it anyway,
leaving whatever the agent made in place:
  BRIM_REMOVE_WITHOUT_CLEANUP=1 apt-get remove brim   (or dpkg -r / --purge)
MSG
    if [ -d /run/systemd/system ]; then
      echo "brim: the brim units were stopped; \`systemctl start brim-agent brim-master\` starts them again." >&2
    fi
    exit 1
  fi
  ;;
esac
exit 0
