# Podium scheduler image: python:3.11-slim, runs as the non-root user 65532.
#
#   docker build -t podium:dev .
#   docker run --rm podium:dev --help
#
# The chart runs it as `podium run --leader-elect ...` with a read-only root
# filesystem and an emptyDir at /tmp.

# ---- build: turn the project and its dependencies into wheels ----------------------
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator/ operator/
# The tracing extra: podium run --tracing-endpoint (docs/tracing.md).
RUN pip wheel --wheel-dir /wheels '.[tracing]'

# ---- runtime ---------------------------------------------------------------------
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# A fixed, unprivileged identity that matches the chart's runAsUser/runAsGroup.
RUN groupadd --system --gid 65532 podium \
 && useradd --system --uid 65532 --gid 65532 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin podium

# Install from the wheels only (no network at this step). pip compiles the bytecode
# now, as root, because the root filesystem is read-only at run time.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels 'podium[tracing]'

# Nothing may try to write .pyc files at run time.
ENV PYTHONDONTWRITEBYTECODE=1

USER 65532:65532
WORKDIR /tmp
EXPOSE 8080

ENTRYPOINT ["podium"]
CMD ["run"]
