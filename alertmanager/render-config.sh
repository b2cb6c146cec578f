#!/bin/sh
# Writes alertmanager.yml ($1) to stdout with its placeholder webhook URL replaced by
# $ALERT_WEBHOOK_URL, written as a YAML single-quoted string (any character a URL may hold).
set -eu
: "${ALERT_WEBHOOK_URL:?set ALERT_WEBHOOK_URL (where Alertmanager posts alerts)}"
placeholder='http://alert-webhook-url.invalid/'
grep -q "url: $placeholder\$" "$1" || { echo "no placeholder URL in $1" >&2; exit 1; }
# ' doubled for YAML; & | \ escaped for sed's replacement.
escaped=$(printf '%s\n' "$ALERT_WEBHOOK_URL" | sed -e "s/'/''/g" -e 's/[&|\\]/\\&/g')
sed -e "s|url: $placeholder\$|url: '$escaped'|" "$1"
