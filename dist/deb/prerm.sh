#!/bin/sh
# brim prerm: stop the master on removal. The agent is stopped too, but its
# containers keep running (KillMode=process); remove them first with
# `brim container rm -f` to decommission a node (docs/operators.md).
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
  systemctl stop brim-master.service brim-agent.service >/dev/null 2>&1 || true
fi
exit 0
