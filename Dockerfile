# crawlsched: one image for the workers, the clock, the API and the one-shot init-db.
FROM python:3.11.10-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    CRAWLSCHED_LOG_FORMAT=json \
    CRAWLSCHED_METRICS_DIR=/tmp/crawlsched-prometheus

WORKDIR /app
# Dependencies exactly as locked (versions and hashes: requirements.lock, made from
# pyproject.toml by the command at its top), then crawlsched itself without resolving again.
COPY requirements.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements.lock
COPY pyproject.toml README.md LICENSE ./
COPY crawlsched ./crawlsched
RUN pip install --no-cache-dir --no-deps . && useradd --system --no-create-home crawlsched
USER crawlsched

# The worker group's exporter (CRAWLSCHED_METRICS_ADDRESS), the clock's, the API's metrics.
EXPOSE 9191 9192 9193

# A worker group. The clock, the API and init-db run the same image with another command.
CMD ["dramatiq", "crawlsched.actors", "--processes", "2", "--threads", "8", "--skip-logging"]
