#!/usr/bin/env bash
echo "demo: not yet wired" >&2
exit 1
