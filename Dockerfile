# crawlsched: one image for the workers, the clock and the one-shot init-db.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    CRAWLSCHED_LOG_FORMAT=json \
    CRAWLSCHED_METRICS_DIR=/tmp/crawlsched-prometheus

WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY crawlsched ./crawlsched
RUN pip install --no-cache-dir . && useradd --system --no-create-home crawlsched
USER crawlsched

# The worker group's exporter (CRAWLSCHED_METRICS_ADDRESS) and the clock's.
EXPOSE 9191 9192

# A worker group. The clock and init-db run the same image with another command.
CMD ["dramatiq", "crawlsched.actors", "--processes", "2", "--threads", "8", "--skip-logging"]
