# SPDX-License-Identifier: Apache-2.0
# FastTier image on Debian 12: builds ft-proxy, ft-target and ft-loader, then ships them on a slim runtime.
FROM debian:12 AS build
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
       build-essential pkg-config \
       liburing-dev libmicrohttpd-dev libcurl4-openssl-dev libssl-dev libjansson-dev libisal-dev libxxhash-dev \
       libarchive-dev libmsgpack-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile ./
COPY common common
COPY cloud cloud
COPY proxy proxy
COPY target target
COPY loader loader
COPY cli cli
RUN make -j"$(nproc)" all

FROM debian:12-slim
# The libraries the binaries link (tests/integration/test_k8s.py checks this list against their NEEDED entries).
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
       liburing2 libmicrohttpd12 libcurl4 libssl3 libjansson4 libisal2 libxxhash0 libarchive13 libmsgpackc2 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd -g 10001 fasttier && useradd -u 10001 -g 10001 -M -d /var/lib/fasttier -s /usr/sbin/nologin fasttier \
    && mkdir -p /var/lib/fasttier /data && chown fasttier:fasttier /var/lib/fasttier /data
COPY --from=build /src/build/bin/ft-proxy /src/build/bin/ft-target /src/build/bin/ft-loader /usr/local/bin/
USER 10001
EXPOSE 51080 51081
ENTRYPOINT []
CMD ["ft-proxy", "--help"]
