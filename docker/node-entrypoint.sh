#!/bin/sh
# The node's one program: sshd in the foreground. Docker's init (tini, from
# `init: true`) is PID 1 and reaps the brokers the tool kills. The host key
# is made once per container unless one was put in; the authorized key comes
# from QUEUECHECK_AUTHORIZED_KEY or a file put at /root/.ssh/authorized_keys.
set -e
mkdir -p /run/sshd /root/.ssh
chmod 700 /root/.ssh
if [ ! -s /etc/ssh/ssh_host_ed25519_key ]; then
    ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
fi
if [ -n "${QUEUECHECK_AUTHORIZED_KEY:-}" ]; then
    printf '%s\n' "$QUEUECHECK_AUTHORIZED_KEY" > /root/.ssh/authorized_keys
fi
exec /usr/sbin/sshd -D -e
