#!/bin/sh
# `nemori view` on a database, photographed by headless Chromium: the page as a user first sees it,
# then with an episode open. Usage: sh scripts/view_screenshot.sh DB OUT.png
set -eu
db=$1
out=$2
port=${PORT:-8799}
.venv/bin/nemori view --db "$db" --no-open --port "$port" &
server=$!
trap 'kill $server 2>/dev/null' EXIT
sleep 3
browser=$(command -v chromium || command -v chromium-browser)
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,900 \
	--virtual-time-budget=8000 --screenshot="$out" "http://127.0.0.1:$port/#E1"
