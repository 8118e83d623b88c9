#!/bin/sh
# brim postinst: the master's system user, and systemd's view of the units.
# Units are not enabled or started: an operator configures
# /etc/brim/*.toml first (docs/operators.md).
set -e
if [ "$1" = configure ]; then
  if ! getent passwd brim >/dev/null; then
    adduser --system --group --no-create-home --home /var/lib/brim/master brim >/dev/null
  fi
  chgrp brim /etc/brim/master.toml 2>/dev/null || true
fi
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
