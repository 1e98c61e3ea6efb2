# llmtap sidecar image. Build: docker build -t llmtap .
FROM python:3.12-slim
# nft: `llmtap netfilter apply` in a pod's init container (transparent mode, docs/kubernetes.md)
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends nftables >/dev/null \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --create-home --uid 10001 llmtap
WORKDIR /opt/llmtap
COPY pyproject.toml README.md ./
COPY proxy ./proxy
COPY collector ./collector
COPY dashboards/json ./dashboards/json
RUN pip install --no-cache-dir . && rm -rf /root/.cache \
    && mkdir -p /data /mock && chown llmtap:llmtap /data /mock
USER llmtap
ENV LLMTAP_DATA_DIR=/data LLMTAP_LISTEN=0.0.0.0:8080 LLMTAP_ADMIN=0.0.0.0:9464
VOLUME ["/data"]
EXPOSE 8080 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s \
  CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:9464/healthz', timeout=2).status != 200)"
ENTRYPOINT ["llmtap"]
CMD ["run"]
