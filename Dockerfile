# One image for the web process (gunicorn) and the workers (celery).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False \
    PIP_NO_CACHE_DIR=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY studio ./studio
# torch first, pinned: an unpinned torch pulls a multi-GB CUDA build.
RUN pip install torch==2.13.0 && pip install .
COPY . .
# Static files into /app/staticfiles: hashed names and gzip copies, served by WhiteNoise from the
# web process (no web server needed). DEBUG=1 only lets the command run without SECRET_KEY.
RUN DEBUG=1 python manage.py collectstatic --noinput

RUN useradd --create-home axiom && mkdir -p /app/var && chown -R axiom /app/var
USER axiom
EXPOSE 8000
CMD ["gunicorn", "studio.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--timeout", "60"]
