#!/bin/bash
# A non-leader pod of a multi-pod bmad replica: runs sshd so the leader's mpirun can start this
# pod's ranks. Only the key in the mounted Secret is accepted.
set -euo pipefail
key=${BMAD_SSH_KEY:-/etc/bmad-ssh/id_rsa}
port=${BMAD_SSH_PORT:-2222}
mkdir -p /root/.ssh /run/sshd
chmod 700 /root/.ssh
ssh-keygen -y -f "$key" >/root/.ssh/authorized_keys
chmod 600 /root/.ssh/authorized_keys
ssh-keygen -A >/dev/null
exec /usr/sbin/sshd -D -e -p "$port" -o PermitRootLogin=prohibit-password \
  -o PasswordAuthentication=no -o StrictModes=no -o UsePAM=no
