# gateway: one instance. Mount your specs/ and agents.yaml (read-only); state goes to the store named by
# agents.yaml (gateway.store: postgresql://... to share it between instances, see docker-compose.yaml).
#   docker build -t gateway .
#   docker run -p 127.0.0.1:8080:8080 -v "$PWD/specs:/srv/specs:ro" -v "$PWD/agents.yaml:/srv/agents.yaml:ro" \
#       gateway --allow-public
# The gateway listens on the container's own address, beyond its loopback: without `clients` in agents.yaml (as in
# the example) it serves that only with --allow-public, and `-p 127.0.0.1:...` publishes it on the host's loopback
# alone. Published anywhere else, give agents.yaml `clients` keys and leave --allow-public out.
FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gateway ./gateway
RUN pip wheel --no-cache-dir --wheel-dir /wheels '.[shared]'

FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    GATEWAY_SPECS=/srv/specs GATEWAY_AGENTS=/srv/agents.yaml GATEWAY_CACHE_DIR=/var/cache/gateway
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels 'gateway[shared]' \
    && useradd --system --uid 10001 --home-dir /srv --shell /usr/sbin/nologin gateway \
    && mkdir -p /srv/specs /var/cache/gateway /srv/.gateway \
    && chown gateway:gateway /var/cache/gateway /srv/.gateway
WORKDIR /srv
USER gateway
EXPOSE 8080
# Python's own HTTP client: the slim image has no curl. /healthz needs no client key.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2).status != 200)"]
# Outside loopback the gateway wants `clients` keys in agents.yaml; --allow-public serves without them
# (only behind a network you trust).
ENTRYPOINT ["gateway", "serve", "--host", "0.0.0.0", "--port", "8080"]
