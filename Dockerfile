# copilot-otel as a container (used by docker-compose.yml). Build: docker compose build copilot-otel
FROM python:3.12.12-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY copilot_otel ./copilot_otel
RUN pip install . && rm -rf /src

# uid 1000 = the usual first desktop user, so the read-only ~/.copilot mount is readable;
# docker-compose.yml can override it (COPILOT_OTEL_UID). The state dir is world-writable so a
# named volume initialised from it works for any uid.
RUN useradd --uid 1000 --create-home --shell /usr/sbin/nologin copilot \
    && mkdir -p /var/lib/copilot-otel /home/copilot/.copilot/session-state \
    && chown -R copilot:copilot /var/lib/copilot-otel /home/copilot \
    && chmod 0777 /var/lib/copilot-otel

USER copilot
WORKDIR /home/copilot
ENV COPILOT_OTEL_SESSION_STATE=/home/copilot/.copilot/session-state \
    COPILOT_OTEL_STATE_DIR=/var/lib/copilot-otel
VOLUME ["/var/lib/copilot-otel"]

# SIGTERM = flush, checkpoint, exit (docker stop / docker compose down).
STOPSIGNAL SIGTERM
CMD ["copilot-otel", "run"]
