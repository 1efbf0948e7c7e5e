# The raftq image for machines that can pull base images from a registry:
#   docker build -t raftq:local .
# It is equivalent to what scripts/image builds, and NOT what this project's scripts use: the
# development machine has no registry, so scripts/image assembles a FROM scratch image from the
# host's release build instead (docs/cluster.md). Either image runs docker-compose.yml.

FROM rust:1-bookworm AS build
# librocksdb-sys runs bindgen (libclang) and builds RocksDB with the C++ compiler the image has.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libclang-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p raftq \
 && strip --strip-debug target/release/raftq \
 && cp target/release/raftq /raftq

FROM debian:bookworm-slim
COPY --from=build /raftq /raftq
RUN mkdir /data && chown 65534:65534 /data
USER 65534:65534
ENV RAFTQ_DATA_DIR=/data NO_COLOR=1
VOLUME /data
EXPOSE 8080 7000
ENTRYPOINT ["/raftq"]
CMD ["serve", "--listen", "0.0.0.0:8080"]
