#!/bin/sh
# The container's entrypoint: one trafka node, started from its properties file exactly as
# compose/README.md documents (`knode start --config FILE`). NODE_ID picks the file.
set -eu
: "${NODE_ID:?set NODE_ID to 1, 2 or 3}"
exec knode start --config "/etc/trafka/node${NODE_ID}.properties"
