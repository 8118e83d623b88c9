#!/bin/sh
# brim postinst: the master's system user and state dir, and systemd's view
# of the units. Units are not enabled or started: an operator configures
# /etc/brim/*.toml first (docs/operators.md).
#
# Who owns what (docs/operators.md, "Files and owners"):
#   /var/lib/brim          root 0755  (the package; holds the two below only)
#   /var/lib/brim/master   brim 0700  (here, and brim-master.service's StateDirectory=)
#   /var/lib/brim/agent    root 0700  (the agent makes it; it runs as root)
#   /etc/brim/master.toml  root:brim 0640 (the master reads it as brim)
set -e
if [ "$1" = configure ]; then
  # Packages before this one made /var/lib/brim 0700, which keeps the master
  # (user brim) out of its own state dir, and dpkg leaves an existing
  # directory's mode alone on upgrade. An operator's dpkg-statoverride wins.
  if ! dpkg-statoverride --list /var/lib/brim >/dev/null && [ "$(stat -c %a /var/lib/brim)" = 700 ]; then
    chmod 0755 /var/lib/brim
  fi
  d=/var/lib/brim/master
  [ -d $d ] || install -d -m 0700 $d
  if ! getent passwd brim >/dev/null; then
    adduser --system --group --no-create-home --home $d brim >/dev/null
  fi
  if [ "$(stat -c %U:%G $d)" != brim:brim ]; then
    # What systemd's StateDirectory= does at start when the directory's
    # owner is not the unit's user: the whole tree becomes the user's (a
    # store written by a master that once ran as root included). When the
    # top is the user's already, systemd looks no deeper, and neither do we.
    chown -R brim:brim $d
    chmod 0700 $d
  fi
  # The master reads its configuration as brim (dpkg installs conffiles root:root).
  if [ -e /etc/brim/master.toml ]; then chgrp brim /etc/brim/master.toml; fi
fi
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
