#!/bin/bash
# MongoDB's entrypoint in docker-compose.yml: a replica set with auth needs a keyfile (members
# prove themselves to each other with it). Made once, in the config volume, readable by mongod
# only; then the image's own entrypoint runs (it creates the root user on first start).
set -euo pipefail
keyfile=${MONGO_KEYFILE:-/data/configdb/keyfile}
owner=${MONGO_KEYFILE_OWNER:-mongodb:mongodb}
if [[ ! -s $keyfile ]]; then
    (umask 077 && head -c 756 /dev/urandom | base64 -w 0 >"$keyfile.new")
    mv "$keyfile.new" "$keyfile"
fi
chown "$owner" "$keyfile"
chmod 400 "$keyfile"
exec docker-entrypoint.sh "$@"
