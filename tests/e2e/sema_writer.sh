#!/bin/sh
# A foreign tool writing sema-format locks by hand, as specs/000 and specs/002 show:
#   echo "pid=$$" > f; echo "timestamp=$(date +%s)" >> f; echo "tag=..." >> f; ...; rm f
# Usage: sema_writer.sh DIR LOG SECONDS
# Appends one JSON line per action to LOG: {"t", "actor", "op", "path", "key"}.
set -eu
dir=$1
log=$2
seconds=$3
end=$(( $(date +%s) + seconds ))
i=0
note() {  # op path key
    printf '{"t": %s, "actor": "sema-shell", "op": "%s", "path": "%s", "key": "%s"}\n' \
        "$(date +%s.%N)" "$1" "$2" "$3" >> "$log"
}
while [ "$(date +%s)" -lt "$end" ]; do
    i=$((i + 1))
    f="$dir/shell-$i.lock"
    echo "pid=$$" > "$f"
    echo "timestamp=$(date +%s)" >> "$f"
    echo "tag=shell-$i" >> "$f"
    note create "$f" "shell-$i"
    sleep 0.8
    rm "$f"
    note remove "$f" "shell-$i"
    sleep 0.3
done
