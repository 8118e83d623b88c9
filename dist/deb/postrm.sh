#!/bin/sh
# brim postrm: on purge, remove what the package made at run time — the
# master's user and brim's state directories. dpkg removes the conffiles.
# prerm has already stopped the units and run `brim agent cleanup` (or
# refused the removal); a daemon still holding its state here (an agent or
# a master started by hand since) makes the purge refuse rather than delete
# its files beneath it.
set -e
if [ "$1" = purge ]; then
  for f in /var/lib/brim/agent/lock /var/lib/brim/master/master.db; do
    # The agent holds an flock on its lock file, bbolt on the store, while
    # they run (never stale: the kernel drops it when the holder dies).
    if [ -f "$f" ] && ! flock --nonblock --no-fork "$f" true; then
      echo "brim: purge refused: a brim daemon is running on $f (stop it, then purge again)" >&2
      exit 1
    fi
  done
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
