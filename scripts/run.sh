#!/usr/bin/env bash
# Run the studio on http://127.0.0.1:8000 with the demo universe and save loaded.
# A local Chroma server (127.0.0.1:8001) holds the vectors, so the studio, management
# commands and any worker share one store safely (two processes must never open one
# embedded Chroma directory). Jobs run in-process unless REDIS_URL is set.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
export DEBUG=${DEBUG:-1}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False
export CHROMA_HOST=${CHROMA_HOST:-127.0.0.1}
export CHROMA_PORT=${CHROMA_PORT:-8001}
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
mkdir -p var

chroma_pid=""
cleanup() { [ -n "$chroma_pid" ] && kill "$chroma_pid" 2>/dev/null || true; }
trap cleanup EXIT INT TERM

if [ "$CHROMA_HOST" = "127.0.0.1" ] && ! (exec 3<>/dev/tcp/127.0.0.1/"$CHROMA_PORT") 2>/dev/null; then
  echo "starting a local Chroma server on 127.0.0.1:$CHROMA_PORT (data in var/chroma-server)"
  .venv/bin/chroma run --path var/chroma-server --host 127.0.0.1 --port "$CHROMA_PORT" \
    > var/chroma-server.log 2>&1 &
  chroma_pid=$!
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$CHROMA_PORT") 2>/dev/null && break; sleep 0.2; done
fi

"$PY" manage.py migrate --noinput
case "${DEBUG,,}" in
  1|true|yes|on) ;;  # runserver serves static files itself in DEBUG
  *) "$PY" manage.py collectstatic --noinput ;;  # DEBUG off: WhiteNoise serves the collected files
esac
"$PY" manage.py load_demo --if-missing
"$PY" manage.py ensure_demo_login
echo "Axiom Studio on http://$HOST:$PORT/  (admin: http://$HOST:$PORT/admin/)"
AXIOM_WARM_EMBEDDINGS=1 "$PY" manage.py runserver "$HOST:$PORT" --noreload
