# soakd as a container: a static (musl) binary on a distroless base that
# has no shell, no package manager and runs as a non-root user. Building it
# needs the two base images from a registry (see deploy/kubernetes/README.md).
#
#   docker build -t registry.example.com/soakd:0.1.0 .

FROM rust:1.95-slim-bookworm AS build
# musl-gcc builds the C and assembly of aws-lc-rs (the TLS provider; its
# cc builder with pre-generated musl bindings needs no cmake or clang,
# checked with this very build command outside docker, docs/tls.md) and of
# ring (rcgen) for the static target. Debian's
# package versions move with point releases, so the version is not pinned
# (the base image's tag pins the release).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends musl-tools \
    && rm -rf /var/lib/apt/lists/* \
    && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY vendor ./vendor
COPY src ./src
RUN cargo build --release --locked --target x86_64-unknown-linux-musl \
    && cp target/x86_64-unknown-linux-musl/release/soakd /soakd

# static-debian12 has CA certificates (for https:// targets verified against
# the system's roots) and /etc/passwd with the nonroot user (65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /soakd /usr/local/bin/soakd
USER 65532:65532
EXPOSE 9469
ENTRYPOINT ["/usr/local/bin/soakd"]
CMD ["run", "--config", "/etc/soakd/soakd.toml"]
