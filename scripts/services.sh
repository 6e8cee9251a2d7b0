#!/usr/bin/env bash
# Start Redis and PostgreSQL when they are not already running; stop only what we started.
#   source scripts/services.sh; services_start; ...; services_stop
# Debian packages: redis-server, postgresql (installed with apt-get when missing and root).

STARTED_REDIS=0
STARTED_POSTGRES=0

_have() { command -v "$1" >/dev/null 2>&1; }

_apt_install() {
  if [ "$(id -u)" = "0" ] && _have apt-get; then
    echo "installing $* with apt-get"
    (apt-get install -y -q "$@" >/dev/null 2>&1) || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "$@" >/dev/null)
  else
    echo "missing $* and cannot apt-get install it (not root); install it and re-run" >&2
    return 1
  fi
}

redis_up() { (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; }
postgres_up() {
  if _have pg_isready; then pg_isready -q -h 127.0.0.1 -p 5432; else (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; fi
}

services_start() {
  if ! redis_up; then
    _have redis-server || _apt_install redis-server || return 1
    echo "starting redis-server on 127.0.0.1:6379"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
      --dir /tmp --pidfile /tmp/axiom-test-redis.pid --logfile /tmp/axiom-test-redis.log
    STARTED_REDIS=1
    for _ in $(seq 50); do redis_up && break; sleep 0.1; done
  fi
  if ! postgres_up; then
    if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then _apt_install postgresql || return 1; fi
    if postgres_up; then :; else
      echo "starting postgresql"
      local version
      version=$(ls /etc/postgresql | sort -V | tail -n 1)
      if _have pg_ctlcluster; then
        pg_ctlcluster --skip-systemctl-redirect "$version" main start
      fi
      STARTED_POSTGRES=1
      for _ in $(seq 100); do postgres_up && break; sleep 0.2; done
    fi
  fi
  postgres_up || { echo "PostgreSQL is not reachable on 127.0.0.1:5432" >&2; return 1; }
  redis_up || { echo "Redis is not reachable on 127.0.0.1:6379" >&2; return 1; }
}

services_stop() {
  if [ "$STARTED_REDIS" = "1" ]; then
    echo "stopping the redis-server this run started"
    if _have redis-cli; then redis-cli -h 127.0.0.1 -p 6379 shutdown nosave >/dev/null 2>&1 || true
    elif [ -f /tmp/axiom-test-redis.pid ]; then kill "$(cat /tmp/axiom-test-redis.pid)" 2>/dev/null || true; fi
  fi
  if [ "$STARTED_POSTGRES" = "1" ]; then
    echo "stopping the postgresql this run started"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main stop || true
  fi
}
