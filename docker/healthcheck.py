"""The image's HEALTHCHECK, also used by docker/check.sh: exit 0 iff the URL (default: the API's liveness
endpoint) answers 200 within 3 seconds. Standard library only (the slim image has no curl)."""

import sys
import urllib.request

url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/healthz"
try:
    with urllib.request.urlopen(url, timeout=3) as response:
        sys.exit(0 if response.status == 200 else 1)
except Exception as error:  # refused, timeout, HTTP 503 from /readyz...
    print(f"{url}: {error}", file=sys.stderr)
    sys.exit(1)
