#!/bin/sh
# Runs after the deb or rpm package is installed or upgraded.
set -e

# The key that seals controld's SSH CA keys in Postgres: made once, never
# replaced (the sealed keys need the same one).
if [ ! -e /etc/gpuaas/controld-ca.key ]; then
	(umask 077 && head -c 32 /dev/urandom > /etc/gpuaas/controld-ca.key)
fi

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload || true
fi
