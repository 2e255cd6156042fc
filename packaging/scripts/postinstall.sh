#!/bin/sh
# Runs after the deb or rpm package is installed or upgraded.
set -e

# The key that seals controld's SSH CA keys in Postgres: made once, never
# replaced (the sealed keys need the same one).
if [ ! -e /etc/gpuaas/controld-ca.key ]; then
	(umask 077 && head -c 32 /dev/urandom > /etc/gpuaas/controld-ca.key)
fi
# The key that seals project secrets (docs/jobs.md "Secrets"): the same,
# made once, never replaced (docs/operators.md says how to rotate it).
if [ ! -e /etc/gpuaas/secrets.key ]; then
	(umask 077 && head -c 32 /dev/urandom > /etc/gpuaas/secrets.key)
fi

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload || true
fi
