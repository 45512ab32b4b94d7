#!/bin/sh
# The image's default command (docker/Dockerfile CMD), also run by docker/check.sh: the API on port 8000 with
# PRIVFIT_API_WORKERS processes (the image sets 2: gunicorn supervising uvicorn workers; docs/deployment.md, "Start
# and stop"), logs in PRIVFIT_LOG_FORMAT. `exec`: privfit is the process that receives the container's SIGTERM.
# Whether it also runs an embedded worker pool follows PRIVFIT_QUEUE (compose sets `celery`: the API only
# publishes job ids).
# Extra arguments go to `privfit serve` and win over these (docker/check.sh binds 127.0.0.1 on a free port).
exec privfit serve --host 0.0.0.0 --port 8000 "$@"
