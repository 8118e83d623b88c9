#!/bin/sh
# brim postrm: on purge, remove what the package made at run time — the
# master's user and brim's state directories. dpkg removes the conffiles.
set -e
if [ "$1" = purge ]; then
  # --one-file-system: never follow a mount left under the state dir.
  rm -rf --one-file-system /var/lib/brim /etc/brim
  if getent passwd brim >/dev/null; then
    deluser --system brim >/dev/null 2>&1 || userdel brim >/dev/null 2>&1 || true
  fi
  if getent group brim >/dev/null; then
    delgroup --system brim >/dev/null 2>&1 || groupdel brim >/dev/null 2>&1 || true
  fi
fi
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
