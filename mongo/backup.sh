#!/bin/sh
# The mongo-backup service: a gzipped `mongodump --archive` of the whole replica set (with its
# oplog: one consistent moment) every $BACKUP_INTERVAL_S seconds into $BACKUP_DIR; archives
# older than $BACKUP_KEEP_DAYS days are removed. Restore: docs/production-compose.md.
# `backup.sh check` (the healthcheck) succeeds while an archive is younger than two intervals.
set -eu
dir=${BACKUP_DIR:-/backups}
interval=${BACKUP_INTERVAL_S:-21600}
keep_days=${BACKUP_KEEP_DAYS:-14}

if [ "${1:-}" = check ]; then
    minutes=$((2 * interval / 60 + 1))
    [ -n "$(find "$dir" -name 'crawlsched-*.archive.gz' -mmin -"$minutes")" ]
    exit
fi

: "${MONGO_URL:?set MONGO_URL}"
while :; do
    name="$dir/crawlsched-$(date -u +%Y%m%dT%H%M%SZ).archive.gz"
    # Written under a temporary name, renamed when whole: a half-written dump is never an archive.
    if mongodump --uri="$MONGO_URL" --oplog --gzip --archive="$name.partial" --quiet; then
        mv "$name.partial" "$name"
        echo "backup_written $name"
    else
        rm -f "$name.partial"
        echo "backup_failed" >&2
    fi
    find "$dir" -name 'crawlsched-*.archive.gz' -mtime +"$keep_days" -exec rm -f {} +
    sleep "$interval"
done
